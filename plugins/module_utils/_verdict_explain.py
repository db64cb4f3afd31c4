# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict in words: the reason of a decision, the one verdict line, and what goes to JSON.

Used by ``_verdict`` (the decision) and ``_verdict_stats`` (the figures' names in each check's ``why``),
and by ``_report`` and ``_fleet``, which print the verdict line that only :func:`verdict_line` builds.

Standard library only.
"""
from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import _levels


# --------------------------------------------------------------------------- the figures' names

def label(figure):
    return {"output_tok_s": "output tok/s", "tpot_ms": "TPOT", "ttft_ms": "TTFT", "error_rate": "errors"}[figure]


# --------------------------------------------------------------------------- the reason of a verdict

def reason(result, verdict, checks, invalid):
    if verdict == "invalid":
        parts = ["%s c=%d invalid: %s" % (p["side"], p["level"], p["why"]) for p in invalid]
        sides = sorted({p["side"] for p in invalid})
        return "; ".join(parts) + (" - re-measure the baseline" if sides == ["baseline"] else "")
    if verdict == "keep":
        # the speed-ups shown, and outputs that differ by the operator's leave (a lossy sampler)
        shown = [c for c in checks if c["figure"] == "output_tok_s" or (c["figure"] == "outputs" and c["candidate"])]
        return "; ".join("c=%d %s" % (c["level"], c["why"]) for c in shown)
    if verdict == "rollback":
        return "; ".join("c=%d %s" % (c["level"], c["why"]) for c in checks if c["status"] == "fail")
    pending = [c for c in checks if c["status"] == "open"]
    figures = " ".join("c=%d" % level for level in sorted(result["requests"]))
    counts = sorted(set(result["requests"].values()))
    done = "%s request(s) at %s" % ("/".join(str(n) for n in counts), figures)
    if verdict == "inconclusive":
        what = "not shown faster" if any(c["figure"] == "output_tok_s" for c in pending) else "not shown within the thresholds"
        budget = " (seconds budget %g s)" % result["plan"]["max_seconds"] if result.get("budget") == "seconds" else ""
        return "%s after %s%s: %s" % (what, done, budget, "; ".join("c=%d %s" % (c["level"], c["why"]) for c in pending))
    nxt = result["next"]
    return "round %d, %s; next round %d request(s) at %s: %s" % (
        result["round"], done, nxt["requests"], ",".join("c=%d" % c for c in nxt["concurrency"]),
        "; ".join("c=%d %s" % (c["level"], c["why"]) for c in pending))


def json_safe(value):
    """No inf / NaN in what goes to JSON: None instead."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------- the one verdict line

_WORDS = {"keep": "KEPT", "rollback": "ROLLED BACK", "inconclusive": "INCONCLUSIVE", "invalid": "INVALID",
          "continue": "MEASURING"}


def verdict_line(rec):
    """The one-line verdict for the job log, the report and the history.

    ``HOST: OUTCOME LABEL on SUITE (xS.SS [LO, HI]) - REASON``; OUTCOME is the record's ``outcome``
    (kept, rolled_back, unchanged, failed) in capitals, or the verdict's word when there is none. An
    inconclusive verdict rolled back reads ``ROLLED BACK ... not shown faster ...``. A drift check
    (``drift``: the result of ``_verdict.drift``) that found the host unstable is appended, and so is a wake
    probe (``park.wake_probe``, ``_park_probe``) that found the woken baseline's acceptance collapsed.
    """
    outcome = rec.get("outcome")
    if outcome:
        word = str(outcome).upper().replace("_", " ")
    else:
        word = _WORDS.get(rec.get("verdict") or rec.get("decision"), str(rec.get("decision", "")).upper())
    speed = ""
    if rec.get("speedup") not in (None, ""):
        speed = " (x%.2f" % float(rec["speedup"])
        ci = rec.get("speedup_ci")
        if ci and len(ci) == 2 and None not in ci:
            speed += " [%.2f, %.2f]" % (float(ci[0]), float(ci[1]))
        speed += ")"
    head = "%s: " % rec["host"] if rec.get("host") else ""
    line = "%s%s %s on %s%s - %s" % (
        head, word, rec.get("label", "candidate"), rec.get("suite", "-"), speed, rec.get("reason", ""))
    check = rec.get("drift")
    if isinstance(check, dict) and check.get("unstable"):
        line += "; host unstable: %s" % check.get("reason", "")
    probe = (rec.get("park") or {}).get("wake_probe") if isinstance(rec.get("park"), dict) else None
    if isinstance(probe, dict) and probe.get("collapsed"):  # the wake probe (_park_probe): restarted instead
        line += "; production restarted, not woken: %s" % probe.get("line", "")
    # Issue 32: the levels judged and the one that decided, the prompts (a warning on synthetic ones).
    return line + _levels.line_notes(rec)
