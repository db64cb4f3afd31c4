# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reports people can read: verdict lines, Markdown, a PNG chart (spec_report writes them with _files).

Input records are what the spec_switch role stores per host (``spec_switch_record``): host, engine,
model, suite, label, outcome, decision, reason, speedup, thresholds, and the ``baseline`` / ``result``
summaries from ``_verdict_stats.summarize`` (levels keyed by concurrency), with the verdict's ``checks`` (per level and
figure, the ratio and its interval) and ``plan`` (its ``confidence``). Nightly check records
(``spec_switch_nightly_record``: ``status``, no ``outcome``) get sections of their own, and any record that
carries an ``acceptance_watch`` (``_watch.watch``) is listed under "Acceptance watch".
"""

from __future__ import annotations

import io
import math
import re

from ansible_collections.llmops.specdec.plugins.module_utils import _optional, _stats, _verdict, _verdict_explain

# Optional: only the chart needs it. The Figure API draws without pyplot and without choosing a backend.
FIGURE = _optional.Optional("matplotlib.figure", "Figure")

# A reason can quote an engine's or Ansible's message: keep each record on one line of the report.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


# Characters that open inline Markdown or HTML anywhere in a line (CommonMark and GitHub's extensions):
# HTML and autolinks (<), entities (&), links and images ([ ] !), emphasis (* _ ~), code spans (`),
# table cells (|), and the escape itself. Each is backslash-escaped: CommonMark shows an escaped ASCII
# punctuation character as itself, so '<' reads '<' (an entity such as &lt; reads '&lt;' in a code span,
# a plain-text viewer or a job log, where the report is read too).
_MD_INLINE = re.compile(r"([\\`*_\[\]<!&|~])")
# What starts a block when it opens a cell or an item: a heading (#), a quote (>), a list (- + 1. 1)),
# a setext underline (=). Only there are '#' and '>' markup, so '->' in a sentence stays as it is.
_MD_BLOCK_START = re.compile(r"\A(\s*)([-+=#>]|[0-9]+(?=[.)]))")


def md_text(value):
    """``value`` as inline Markdown text for a table cell or a list item: one line, no markup of its own.

    Line breaks fold to spaces; every character that could open HTML, a link, an image, emphasis, code,
    an entity or a cell is backslash-escaped, and so is what would start a block. A reader shows the
    value as given ('<' as '<'); nothing in it becomes markup.
    """
    text = _MD_INLINE.sub(r"\\\1", _BREAKS.sub(" ", str(value)))

    def escape(m):
        mark = m.group(2)
        return m.group(1) + (mark + "\\" if mark[0].isdigit() else "\\" + mark)
    return _MD_BLOCK_START.sub(escape, text, count=1)


_md = md_text


def _first_level(summary):
    if not summary or not summary.get("levels"):
        return None, None
    key = min(summary["levels"], key=int)
    return int(key), summary["levels"][key]


def verdict_line(rec):
    """The one verdict line (built by _verdict_explain, the only place that builds it)."""
    return _verdict_explain.verdict_line(rec)


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def _is_nightly(rec):
    """A nightly check's record (spec_switch_nightly_record: ``status``, no ``outcome``)."""
    return "outcome" not in rec and "status" in rec


def markdown(records, generated_at):
    """The report: a table and the reasons for switch records; nightly check records (status, acceptance watch)
    get sections of their own, so one report can hold both."""
    switches = [rec for rec in records if not _is_nightly(rec)]
    nightly = [rec for rec in records if _is_nightly(rec)]
    out = [
        "# Speculative-decoding switch report",
        "",
        "Generated %s." % generated_at,
        "",
    ]
    if switches or not nightly:
        out += [
            "| host | engine | model | suite | candidate | outcome | c | baseline tok/s | candidate tok/s "
            "| speed-up | TPOT ms (base / cand) | TTFT ms (base / cand) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    for rec in switches:
        level, base = _first_level(rec.get("baseline"))
        cand = _first_level(rec.get("result"))[1]
        base, cand = base or {}, cand or {}
        out.append(
            "| %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s / %s | %s / %s |"
            % (
                _md(rec["host"]),
                _md(rec.get("engine", "-")),
                _md(rec.get("model", "-")),
                _md(rec["suite"]),
                _md(rec["label"]),
                rec["outcome"].replace("_", " "),
                level if level is not None else "-",
                _fmt(base.get("output_tok_s")),
                _fmt(cand.get("output_tok_s")),
                "-" if rec.get("speedup") in (None, "") else "x%.2f" % float(rec["speedup"]),
                _fmt(base.get("tpot_ms"), "%.2f"),
                _fmt(cand.get("tpot_ms"), "%.2f"),
                _fmt(base.get("ttft_ms")),
                _fmt(cand.get("ttft_ms")),
            )
        )
    if switches:
        out += ["", "## Why", ""]
        out += ["- %s" % _md(verdict_line(rec)) for rec in switches]
    out += judged_on_section(switches)
    out += lossless_section(switches)
    out += guardrails_section(switches)
    out += load_section(switches)
    if nightly:
        out += ["", "## Nightly check", ""]
        out += ["- %s: %s %s - %s" % (_md(rec["host"]), _md(str(rec["status"]).upper().replace("_", " ")),
                                      _md(rec.get("suite", "-")), _md(rec.get("reason", ""))) for rec in nightly]
    out += acceptance_section(records)
    thresholds = next((r.get("thresholds") for r in switches if r.get("thresholds")), None)
    if thresholds:
        out += ["", "Thresholds: " + ", ".join("%s=%s" % kv for kv in sorted(thresholds.items()))]
    return "\n".join(out) + "\n"


def _levels_words(choice):
    levels = ",".join(str(x) for x in choice.get("levels") or [])
    src = choice.get("source")
    if src == "observed":
        return "levels %s from production's batch: %s in %s s (%s of %s reads busy)" % (
            levels, _md(choice.get("why", "")), _md(str(choice.get("seconds", "-"))), choice.get("busy", "-"),
            choice.get("samples", "-"))
    if src == "fallback":
        return "levels %s by default - %s" % (levels, _md(choice.get("why", "")))
    return "levels %s %s" % (levels, "named by the operator" if src == "named" else "of the stored baseline")


def judged_on_section(records):
    """The "Levels and prompts" lines (issue 32): per switch record, the levels judged and where they came from, the
    speed-up at each level, the check that decided with its figures, and the prompts (a warning on synthetic ones)."""
    rows = [rec for rec in records if isinstance(rec.get("levels"), dict) or isinstance(rec.get("prompts"), dict)]
    if not rows:
        return []
    out = ["", "## Levels and prompts (what the verdict was judged on)", ""]
    for rec in rows:
        head = "- %s %s: " % (_md(rec.get("host", "-")), _md(rec.get("label", "candidate")))
        parts = []
        choice = rec.get("levels")
        if isinstance(choice, dict):
            parts.append(_levels_words(choice))
        speed = [c for c in rec.get("checks") or [] if isinstance(c, dict) and c.get("figure") == "output_tok_s"]
        if speed:
            parts.append("speed-up " + ", ".join("c=%s x%s%s %s" % (
                c.get("level"), _fmt(_number(c.get("ratio")), "%.2f"),
                " [%s, %s]" % tuple(_fmt(_number(v), "%.2f") for v in c["ci"]) if isinstance(c.get("ci"), list) and len(c["ci"]) == 2 else "",
                c.get("status", "")) for c in speed))
        decided = rec.get("decided_by") if isinstance(rec.get("decided_by"), dict) else None
        if decided:
            check = next((c for c in rec.get("checks") or [] if isinstance(c, dict) and c.get("level") == decided["level"]
                          and c.get("figure") == decided.get("figure")), None)
            parts.append("decided at c=%s by %s%s" % (
                decided["level"], _md(str(decided.get("figure"))), ": " + _md(check["why"]) if check and check.get("why") else ""))
        prompts = rec.get("prompts")
        if isinstance(prompts, dict):
            if prompts.get("synthetic"):
                parts.append("**WARNING: synthetic prompts** (the shipped suite %s, %s prompts): random or canned prompts "
                             "understate or overstate speculation; set spec_switch_prompts_file to judge on your own traffic"
                             % (_md(str(prompts.get("name"))), prompts.get("prompts", "-")))
            else:
                parts.append("on the operator's %s %s: %s prompts%s%s, sha256 %s" % (
                    "request log" if prompts.get("source") == "request_log" else "prompts file", _md(str(prompts.get("name"))),
                    prompts.get("prompts", "-"),
                    ", %s request(s) without a text prompt skipped" % prompts["skipped"] if prompts.get("skipped") else "",
                    ", %s beyond the first %s left out" % (prompts["truncated"], prompts.get("prompts")) if prompts.get("truncated") else "",
                    _md(str(prompts.get("sha256") or "-"))))
        out.append(head + "; ".join(parts))
    return out


def lossless_section(records):
    """The "Outputs (lossless check)" lines: per switch record with a ``lossless`` check (``_verdict_lossless``),
    its divergence rate over the prompts compared and, when they differ, the prompts and where; or why it was
    not compared."""
    rows = [rec for rec in records if isinstance(rec.get("lossless"), dict)]
    if not rows:
        return []
    out = ["", "## Outputs (lossless check)", ""]
    for rec in rows:
        check = rec["lossless"]
        head = "- %s %s: " % (_md(rec.get("host", "-")), _md(rec.get("label", "candidate")))
        if check.get("skipped"):
            out.append(head + "not compared - %s" % _md(check["skipped"]))
            continue
        word = "FAILED" if check.get("status") == "fail" else "passed"
        rate = _number(check.get("rate"))
        out.append(head + "%s, divergence %s (%s/%s prompts) - %s" % (
            word, "-" if rate is None else "%.1f%%" % (100 * rate), check.get("differ", "-"), check.get("compared", "-"),
            _md(check.get("why", ""))))
    return out


def guardrails_section(records):
    """The "Guardrails" lines (docs/verdict.md): per switch record with ``guardrails``, the one that stopped the
    candidate with its figures, else every guardrail that held with its figures."""
    rows = [rec for rec in records if isinstance(rec.get("guardrails"), dict) and rec["guardrails"].get("checks")]
    if not rows:
        return []
    out = ["", "## Guardrails", ""]
    for rec in rows:
        guard = rec["guardrails"]
        head = "- %s %s: " % (_md(rec.get("host", "-")), _md(rec.get("label", "candidate")))
        fired = guard.get("fired") or []
        if fired:
            out.append(head + "STOPPED - " + "; ".join("c=%s %s" % (row.get("level"), _md(row.get("why", ""))) for row in fired))
        else:
            out.append(head + "held (always-valid, alpha %s each) - %s" % (
                guard.get("alpha", "-"), "; ".join("c=%s %s" % (row.get("level"), _md(row.get("why", ""))) for row in guard["checks"])))
    return out


_LOAD_WORDS = (("weights", "weights"), ("compile", "compile"), ("graph_capture", "graph capture"),
               ("kv_profile", "KV profile"), ("other", "other"))


_CACHE_WORDS = {"hit": " (from the cache)", "load_failed": " (its cached graphs not loadable: compiled again)"}


def load_section(records):
    """The "Candidate load" lines (docs/load.md): per switch record with a ``load`` breakdown, the time from the
    unit's start to ready and each phase the engine reported; and what the prewarm read before it."""
    rows = [rec for rec in records if isinstance(rec.get("load"), dict)]
    if not rows:
        return []
    out = ["", "## Candidate load", ""]
    for rec in rows:
        load = rec["load"]
        parts = []
        for key, word in _LOAD_WORDS:
            value = _number(load.get(key))
            if value is not None:
                cache = load.get("compile_cache") or ("hit" if load.get("compile_cache_hit") else None)
                parts.append("%s %.1f s%s" % (word, value, _CACHE_WORDS.get(cache, "") if key == "compile" else ""))
        total = _number(load.get("total"))
        line = "- %s %s: %s to ready" % (_md(rec.get("host", "-")), _md(rec.get("label", "candidate")),
                                         "-" if total is None else "%.1f s" % total)
        if parts:
            line += " - " + ", ".join(parts)
        prewarm = rec.get("prewarm") or {}
        if _number(prewarm.get("read_bytes")) is not None:
            seconds = _number(prewarm.get("seconds")) or 0.0
            line += "; prewarm read %.2f GiB in %.1f s" % (prewarm["read_bytes"] / 1024.0 ** 3, seconds)
        out.append(line)
    return out


def _share(value):
    return "-" if _number(value) is None else "%.3f" % float(value)


def acceptance_section(records):
    """The "Acceptance watch" lines of the records that carry one (``acceptance_watch``, _watch.watch's answer).

    One item per host (DROPPED, ok or not judged, and the watch's line), then a table per judged position:
    acceptance when kept and tonight, the drop, the drafts behind each and the test's p-value against its level.
    Empty when no record carries a watch.
    """
    watched = [rec for rec in records if isinstance(rec.get("acceptance_watch"), dict)]
    if not watched:
        return []
    out = ["", "## Acceptance watch", ""]
    for rec in watched:
        watch = rec["acceptance_watch"]
        word = "DROPPED" if watch.get("judged") and watch.get("dropped") else ("ok" if watch.get("judged") else "not judged")
        kept = " (kept %s%s)" % (_md(watch["label"]) if watch.get("label") else "configuration",
                                 ", " + _md(watch["kept_at"]) if watch.get("kept_at") else "")
        out.append("- %s: **%s**%s - %s" % (_md(rec["host"]), word, kept, _md(watch.get("line", watch.get("reason", "")))))
    rows = [(rec, row) for rec in watched for row in (rec["acceptance_watch"].get("positions") or []) if isinstance(row, dict)]
    if rows:
        out += ["", "| host | suite | position | kept | now | drop | drafted (kept / now) | p (level) | flagged |",
                "|---|---|---|---|---|---|---|---|---|"]
        for rec, row in rows:
            out.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |" % (
                _md(rec["host"]), _md(rec.get("suite", "-")), _md(row.get("position", "-")), _share(row.get("kept")),
                _share(row.get("now")), _share(row.get("drop")), _md(row.get("drafted_kept", "-")), _md(row.get("drafted_now", "-")),
                "-" if _number(row.get("p_value")) is None else "%.2g (%.2g)" % (float(row["p_value"]), float(row.get("level") or 0)),
                "**yes**" if row.get("dropped") else "no"))
    return out


def _confidence(rec):
    plan = rec.get("plan") if isinstance(rec.get("plan"), dict) else {}
    try:
        level = float(plan.get("confidence") or _verdict.DEFAULT_PLAN["confidence"])
    except (TypeError, ValueError):
        level = _verdict.DEFAULT_PLAN["confidence"]
    return level if 0.5 <= level < 1 else _verdict.DEFAULT_PLAN["confidence"]


_number = _stats.finite_or_none


def _side_interval(figures, key, level, confidence):
    """(low, high) around a side's plotted figure at one level, from its per-request samples; None without.

    The interval is the verdict's estimator on that side alone (_stats: the ratio of summed tokens over summed
    seconds for output tok/s, the median with Price-Bonett's variance for TPOT, blocks of ``level`` requests),
    as a relative width, applied to the figure the chart plots (the level's output tok/s is the aggregate of
    all streams, the estimator's the per-request rate; their relative uncertainty is the same).
    """
    value = _number(figures.get(key))
    samples = figures.get("samples")
    if not value or value <= 0 or not isinstance(samples, dict):
        return None
    if key == "output_tok_s":
        pairs = [(_number(t), _number(e)) for t, e in zip(samples.get("output_tokens") or [], samples.get("e2e_ms") or [])]
        pairs = [(t, e / 1000.0) for t, e in pairs if t is not None and e is not None and e > 0]
        est = _stats.log_ratio_of_means([t for t, _e in pairs], [e for _t, e in pairs], level) if len(pairs) >= 2 else None
    else:
        values = [v for v in (_number(x) for x in samples.get(key) or []) if v is not None and v > 0]
        est = _stats.log_median(values, level) if values else None
    if est is None:
        return None
    low, high = _stats.interval(est, confidence)
    return value * math.exp(low - est.value), value * math.exp(high - est.value)


def _speedups(rec):
    """[(level, ratio, (low, high) or None)] of output tok/s per level: the verdict's checks, else the point ratio."""
    out = []
    for check in rec.get("checks") or []:
        if not isinstance(check, dict) or check.get("figure") != "output_tok_s":
            continue
        ratio, level = _number(check.get("ratio")), _number(check.get("level"))
        if ratio is None or level is None:
            continue
        ci = check.get("ci")
        bounds = None
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in (_number(ci[0]), _number(ci[1])):
            bounds = (min(_number(ci[0]), ratio), max(_number(ci[1]), ratio))
        out.append((int(level), ratio, bounds))
    if out:
        return sorted(out, key=lambda row: row[0])
    # Records from before the checks (or a failed verdict): the point ratio per common level, no interval.
    base = (rec.get("baseline") or {}).get("levels") or {}
    cand = (rec.get("result") or {}).get("levels") or {}
    by_level = {int(k): v for k, v in cand.items()}
    for key in sorted(base, key=int):
        one, two = _number((base[key] or {}).get("output_tok_s")), _number((by_level.get(int(key)) or {}).get("output_tok_s"))
        if one and two and one > 0:
            out.append((int(key), two / one, None))
    return out


def _min_speedup(rec):
    value = _number((rec.get("thresholds") or {}).get("min_speedup"))
    return _verdict.DEFAULT_THRESHOLDS["min_speedup"] if value is None else value


def _errorbar(ax, xs, ys, bounds, **style):
    """Asymmetric error bars (no marker line) from (low, high) bounds; the ErrorbarContainer, or None."""
    rows = [(x, y, b) for x, y, b in zip(xs, ys, bounds) if b is not None]
    if not rows:
        return None
    return ax.errorbar([r[0] for r in rows], [r[1] for r in rows],
                       yerr=[[r[1] - r[2][0] for r in rows], [r[2][1] - r[1] for r in rows]],
                       fmt="none", capsize=3, elinewidth=1, **style)


def chart_figure(records):
    """The chart as a matplotlib Figure (Figure API, no pyplot), or None with nothing to draw.

    Three panels per host / suite / candidate, at the lowest level: output tok/s and TPOT of baseline and
    candidate (bars, with error bars at the verdict's confidence where the sides carry per-request samples);
    the speed-up of output tok/s at every level with its interval from the verdict's checks (points with
    error bars; the point ratio without an interval for records from before intervals) and each record's
    ``min_speedup`` as a dashed bar across its group.
    """
    rows = []
    for rec in records:
        level, base = _first_level(rec.get("baseline"))
        cand = _first_level(rec.get("result"))[1]
        if base and cand:
            rows.append({"name": "%s\n%s\n%s" % (rec["host"], rec["suite"], rec["label"]), "level": level, "base": base,
                         "cand": cand, "confidence": _confidence(rec), "speedups": _speedups(rec), "bar": _min_speedup(rec)})
    if not rows:
        return None
    fig = FIGURE.get()(figsize=(max(9, 3.4 * len(rows)), 4.4))
    axes = fig.subplots(1, 3)
    xs = list(range(len(rows)))
    names = [r["name"] for r in rows]
    confidence = sorted({r["confidence"] for r in rows})
    shown = "/".join("%g%%" % (100 * c) for c in confidence)
    for ax, key, title in ((axes[0], "output_tok_s", "output tok/s (higher is better)"), (axes[1], "tpot_ms", "TPOT ms (lower is better)")):
        for side, offset, color in (("base", -0.2, "#8c8c8c"), ("cand", 0.2, "#2b7bba")):
            label = "baseline" if side == "base" else "candidate"
            heights = [_number(r[side].get(key)) or 0.0 for r in rows]
            ax.bar([x + offset for x in xs], heights, 0.4, label=label, color=color)
            bounds = [_side_interval(r[side], key, r["level"], r["confidence"]) for r in rows]
            _errorbar(ax, [x + offset for x in xs], heights, bounds, ecolor="#222222", label="_%s %s interval" % (label, key))
        ax.set_xticks(xs)
        ax.set_xticklabels(names, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[2]
    levels = sorted({level for r in rows for level, _ratio, _ci in r["speedups"]})
    width = 0.8 / max(1, len(levels))
    colors = ("#2b7bba", "#e08214", "#1b9e77", "#7570b3", "#d95f02", "#66a61e")
    for i, level in enumerate(levels):
        offset = -0.4 + width * (i + 0.5)
        points = [(x + offset, ratio, ci) for x, r in zip(xs, rows) for lv, ratio, ci in r["speedups"] if lv == level]
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in points], [p[1] for p in points], "o", color=color, label="c=%d" % level)
        _errorbar(ax, [p[0] for p in points], [p[1] for p in points], [p[2] for p in points], ecolor=color,
                  label="_c=%d interval" % level)
    for x, r in zip(xs, rows):
        ax.hlines(r["bar"], x - 0.45, x + 0.45, colors="#b2182b", linestyles="dashed",
                  label="min_speedup" if x == 0 else "_min_speedup", gid="min_speedup")
    ax.axhline(1.0, color="#bbbbbb", linewidth=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, fontsize=7)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_title("speed-up per level (%s interval)" % shown, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def chart_png(records):
    """:func:`chart_figure` as PNG bytes; None with nothing to draw.

    Needs matplotlib (``FIGURE.get()`` is None without it). The same records give the same bytes.
    """
    fig = chart_figure(records)
    if fig is None:
        return None
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110)
    return out.getvalue()
