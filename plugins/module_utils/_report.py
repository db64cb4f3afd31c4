# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reports people can read: verdict lines, JSON with history, Markdown, a PNG chart.

Input records are what the spec_switch role stores per host (``spec_switch_record``): host, engine,
model, suite, label, outcome, decision, reason, speedup, thresholds, and the ``baseline`` / ``result``
summaries from ``_verdict.summarize`` (levels keyed by concurrency).
"""
from __future__ import annotations

import json
import os
import re

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
    speed = "" if rec.get("speedup") in (None, "") else " (x%.2f)" % float(rec["speedup"])
    return "%s: %s %s on %s%s - %s" % (
        rec["host"], rec["outcome"].upper().replace("_", " "), rec["label"], rec["suite"], speed, rec["reason"])


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def markdown(records, generated_at):
    out = ["# Speculative-decoding switch report", "", "Generated %s." % generated_at, "",
           "| host | engine | model | suite | candidate | outcome | c | baseline tok/s | candidate tok/s "
           "| speed-up | TPOT ms (base / cand) | TTFT ms (base / cand) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in records:
        level, base = _first_level(rec.get("baseline"))
        cand = _first_level(rec.get("result"))[1]
        base, cand = base or {}, cand or {}
        out.append("| %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s / %s | %s / %s |" % (
            _md(rec["host"]), _md(rec.get("engine", "-")), _md(rec.get("model", "-")), _md(rec["suite"]), _md(rec["label"]),
            rec["outcome"].replace("_", " "), level if level is not None else "-",
            _fmt(base.get("output_tok_s")), _fmt(cand.get("output_tok_s")),
            "-" if rec.get("speedup") in (None, "") else "x%.2f" % float(rec["speedup"]),
            _fmt(base.get("tpot_ms"), "%.2f"), _fmt(cand.get("tpot_ms"), "%.2f"),
            _fmt(base.get("ttft_ms")), _fmt(cand.get("ttft_ms"))))
    out += ["", "## Why", ""]
    out += ["- %s" % _md(verdict_line(rec)) for rec in records]
    thresholds = next((r.get("thresholds") for r in records if r.get("thresholds")), None)
    if thresholds:
        out += ["", "Thresholds: " + ", ".join("%s=%s" % kv for kv in sorted(thresholds.items()))]
    return "\n".join(out) + "\n"


def chart(records, path):
    """Baseline vs candidate output tok/s and TPOT per host and suite. Needs matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for rec in records:
        base = _first_level(rec.get("baseline"))[1]
        cand = _first_level(rec.get("result"))[1]
        if base and cand:
            rows.append(("%s\n%s\n%s" % (rec["host"], rec["suite"], rec["label"]), base, cand))
    if not rows:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(max(6, 2.4 * len(rows)), 4.2))
    xs = range(len(rows))
    for ax, key, title in ((axes[0], "output_tok_s", "output tok/s (higher is better)"),
                           (axes[1], "tpot_ms", "TPOT ms (lower is better)")):
        ax.bar([x - 0.2 for x in xs], [r[1].get(key) or 0 for r in rows], 0.4, label="baseline", color="#8c8c8c")
        ax.bar([x + 0.2 for x in xs], [r[2].get(key) or 0 for r in rows], 0.4, label="candidate", color="#2b7bba")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0] for r in rows], fontsize=7)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_if_changed(path, text):
    """Write text atomically; return whether the file changed."""
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def history_append(path, records):
    with open(path, "a") as f:
        for rec in records:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
