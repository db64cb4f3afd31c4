# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which concurrency levels a switch is judged at (issue 32, item 4), and which level decided.

Speculative decoding's gain depends on the batch: a candidate can win single-stream and collapse past a batch
size (vLLM issue 49548), so a verdict at one fixed level misses what production runs. The levels an operator
names are used as named. Without them, the engine's running-request gauge (the adapter's ``RUNNING_GAUGE``:
vLLM ``vllm:num_requests_running``, SGLang ``sglang:num_running_reqs``) is sampled while production traffic is
served, before the baseline's own requests start (``_bench.observe_running``), and :func:`from_running` turns the
samples into levels:

- the samples taken while the engine was busy (gauge >= 1; an idle engine says nothing about batch sizes);
- their median and 90th percentile, each rounded **up** to the ladder (powers of two, 1 to 256: the batch sizes
  engines capture graphs for and schedules band at), so the level measured is at least the batch production runs;
- with 1 always (single-stream latency is what speculation is for, and the lossless check digests the lowest
  level), bounded by ``max_level``;
- without enough busy samples (no gauge, an idle engine, fewer than ``MIN_BUSY``): ``fallback`` (1 and 8), said so.

Stdlib only: the module's payload carries it.
"""
from __future__ import annotations

import math

__all__ = ["LADDER", "FALLBACK", "MIN_BUSY", "ladder_up", "from_running", "named", "deciding"]

LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# The role's levels before issue 32: single stream and one real batch.
FALLBACK = (1, 8)
# Fewer busy samples than this and the observation does not stand for production's batch sizes.
MIN_BUSY = 3


def ladder_up(value, max_level=None):
    """The smallest ladder step >= value (at least 1), capped at ``max_level`` (and the ladder's top)."""
    top = LADDER[-1] if max_level is None else max(1, int(max_level))
    for step in LADDER:
        if step >= value:
            return min(step, top)
    return min(LADDER[-1], top)


def _percentile(sorted_vals, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_vals) == 1:
        return float(sorted_vals[0])
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_vals) - 1)
    return float(sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo))


def named(levels):
    """The choice record of operator-named levels (in the order named: the benchmark runs them so)."""
    return {"source": "named", "levels": [int(x) for x in levels],
            "why": "the levels the operator named (spec_switch_bench_concurrency)"}


def from_running(samples, gauge=None, max_level=64, fallback=FALLBACK, seconds=None, error=None):
    """Levels from running-request samples (floats, one per scrape; None for a scrape that failed).

    Returns ``{"source": "observed"|"fallback", "levels", "gauge", "samples", "busy", "median", "p90", "max",
    "seconds", "why"}``; ``error`` (why the gauge could not be read) goes into ``why`` of a fallback.
    """
    read = [float(s) for s in samples if s is not None and not (isinstance(s, float) and math.isnan(s))]
    busy = sorted(s for s in read if s >= 1)
    out = {"gauge": gauge, "samples": len(read), "busy": len(busy), "median": None, "p90": None,
           "max": max(busy) if busy else None, "seconds": seconds, "max_level": int(max_level)}
    if len(busy) < MIN_BUSY:
        if gauge is None:
            why = "the engine exports no running-request gauge%s" % (": %s" % error if error else "")
        elif not read:
            why = "%s could not be read%s" % (gauge, ": %s" % error if error else "")
        else:
            why = "the engine was busy in %d of %d sample(s) of %s (fewer than %d)" % (len(busy), len(read), gauge, MIN_BUSY)
        out.update(source="fallback", levels=sorted(set(min(int(x), int(max_level)) for x in fallback) | {1}),
                   why="%s: the default levels" % why)
        return out
    median = _percentile(busy, 50)
    p90 = _percentile(busy, 90)
    levels = sorted({1, ladder_up(median, max_level), ladder_up(p90, max_level)})
    out.update(source="observed", levels=levels, median=round(median, 2), p90=round(p90, 2),
               why="%s while busy: median %s, p90 %s running request(s) over %d sample(s), rounded up to the ladder%s" % (
                   gauge, _fmt(median), _fmt(p90), len(busy),
                   " (capped at %d)" % int(max_level) if ladder_up(p90) > int(max_level) else ""))
    return out


def _fmt(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def deciding(verdict):
    """The level that decided a verdict and how: ``{"level", "figure", "status"}`` or None.

    Rollback: the highest level with a failing check (a batch collapse shows at the top); keep: the level whose
    speed-up is smallest (the one that came closest to its bar); inconclusive: the highest level still open;
    invalid: the first invalid level. Checks without a level (the lossless check runs at the lowest one) count
    at theirs.
    """
    if not isinstance(verdict, dict):
        return None
    checks = [c for c in verdict.get("checks") or [] if isinstance(c, dict) and c.get("level") is not None]
    word = verdict.get("verdict") or verdict.get("decision")
    if word == "invalid":
        bad = [p for p in verdict.get("invalid") or [] if isinstance(p, dict) and p.get("level") is not None]
        return {"level": bad[0]["level"], "figure": "invalid", "status": "invalid"} if bad else None
    for status, pick in (("fail", max), ("open", max)):
        hit = [c for c in checks if c.get("status") == status]
        if hit and (status == "fail" or word == "inconclusive"):
            level = pick(c["level"] for c in hit)
            first = next(c for c in hit if c["level"] == level)
            return {"level": level, "figure": first.get("figure"), "status": status}
    speed = [c for c in checks if c.get("figure") == "output_tok_s" and c.get("ratio") is not None]
    if word == "keep" and speed:
        low = min(speed, key=lambda c: c["ratio"])
        return {"level": low["level"], "figure": "output_tok_s", "status": "pass"}
    return None


def _levels_text(levels):
    return ",".join(str(x) for x in levels or [])


def line_notes(rec):
    """What the verdict line appends about what the verdict was judged on (issue 32): the levels and why, the level
    that decided, and the prompts (a warning on a shipped, synthetic suite). Empty for a record without them."""
    out = ""
    choice = rec.get("levels")
    if isinstance(choice, dict) and choice.get("levels"):
        src = choice.get("source")
        if src == "observed":
            out += "; levels %s from production's batch (busy median %s, p90 %s running)" % (
                _levels_text(choice["levels"]), _fmt(choice.get("median") or 0), _fmt(choice.get("p90") or 0))
        elif src == "fallback":
            why = str(choice.get("why") or "").split(": the default levels", 1)[0]
            out += "; levels %s by default (%s)" % (_levels_text(choice["levels"]), why)
        else:
            out += "; levels %s %s" % (_levels_text(choice["levels"]), "named" if src == "named" else "stored")
        decided = rec.get("decided_by") if isinstance(rec.get("decided_by"), dict) else deciding(rec)
        if decided and len(choice["levels"]) > 1:
            out += ", c=%s decided" % decided["level"]
    prompts = rec.get("prompts")
    if isinstance(prompts, dict):
        if prompts.get("synthetic"):
            out += "; WARNING synthetic prompts (shipped suite %s): set spec_switch_prompts_file to judge on your traffic" % (
                prompts.get("name"))
        elif prompts.get("source"):
            out += "; on the operator's %s %s (%s prompts, sha256 %s)" % (
                "request log" if prompts["source"] == "request_log" else "prompts file", prompts.get("name"),
                prompts.get("prompts"), str(prompts.get("sha256") or "")[:12])
    return out
