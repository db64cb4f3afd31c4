# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reports people can read: verdict lines, Markdown, a PNG chart (spec_report writes them with _files).

Input records are what the spec_switch role stores per host (``spec_switch_record``): host, engine,
model, suite, label, outcome, decision, reason, speedup, thresholds, and the ``baseline`` / ``result``
summaries from ``_verdict.summarize`` (levels keyed by concurrency).
"""

from __future__ import annotations

import io
import re
import traceback

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict

# Optional: only the chart needs it. The Figure API draws without pyplot and without choosing a backend.
try:
    from matplotlib.figure import Figure
except ImportError:
    Figure = None
    MATPLOTLIB_IMPORT_ERROR = traceback.format_exc()
else:
    MATPLOTLIB_IMPORT_ERROR = None

# A reason can quote an engine's or Ansible's message: keep each record on one line of the report.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _md(value):
    """Text for one Markdown table cell or list item: no line breaks, '|' and '<' escaped."""
    return _BREAKS.sub(" ", str(value)).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _first_level(summary):
    if not summary or not summary.get("levels"):
        return None, None
    key = min(summary["levels"], key=int)
    return int(key), summary["levels"][key]


def verdict_line(rec):
    """The one verdict line (built by _verdict, the only place that builds it)."""
    return _verdict.verdict_line(rec)


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def markdown(records, generated_at):
    out = [
        "# Speculative-decoding switch report",
        "",
        "Generated %s." % generated_at,
        "",
        "| host | engine | model | suite | candidate | outcome | c | baseline tok/s | candidate tok/s "
        "| speed-up | TPOT ms (base / cand) | TTFT ms (base / cand) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:
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
    out += ["", "## Why", ""]
    out += ["- %s" % _md(verdict_line(rec)) for rec in records]
    thresholds = next((r.get("thresholds") for r in records if r.get("thresholds")), None)
    if thresholds:
        out += ["", "Thresholds: " + ", ".join("%s=%s" % kv for kv in sorted(thresholds.items()))]
    return "\n".join(out) + "\n"


def chart_png(records):
    """Baseline vs candidate output tok/s and TPOT per host and suite, as PNG bytes; None with nothing to draw.

    Needs matplotlib (``Figure`` is None without it). The same records give the same bytes.
    """
    rows = []
    for rec in records:
        base = _first_level(rec.get("baseline"))[1]
        cand = _first_level(rec.get("result"))[1]
        if base and cand:
            rows.append(("%s\n%s\n%s" % (rec["host"], rec["suite"], rec["label"]), base, cand))
    if not rows:
        return None
    fig = Figure(figsize=(max(6, 2.4 * len(rows)), 4.2))
    axes = fig.subplots(1, 2)
    xs = range(len(rows))
    for ax, key, title in ((axes[0], "output_tok_s", "output tok/s (higher is better)"), (axes[1], "tpot_ms", "TPOT ms (lower is better)")):
        ax.bar([x - 0.2 for x in xs], [r[1].get(key) or 0 for r in rows], 0.4, label="baseline", color="#8c8c8c")
        ax.bar([x + 0.2 for x in xs], [r[2].get(key) or 0 for r in rows], 0.4, label="candidate", color="#2b7bba")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0] for r in rows], fontsize=7)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110)
    return out.getvalue()
