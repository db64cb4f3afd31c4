# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep or roll back: compare a candidate benchmark with the baseline under thresholds.

Both inputs are ``summary`` dicts as produced by :func:`summarize` from a ``spec_bench`` result:
``{"levels": {<concurrency>: {"output_tok_s", "tpot_ms", "ttft_ms", "error_rate"}}}``, with medians
for the latencies. The decision is explained line by line, so an operator sees which figure and which
threshold decided it.
"""
from __future__ import annotations

DEFAULT_THRESHOLDS = {
    # Speculation costs draft GPU time and memory; keep it only for a clear win.
    "min_speedup": 1.05,
    # Per-token latency may not get worse by more than this share.
    "max_tpot_regression": 0.05,
    # Drafting adds prefill work; allow some TTFT growth, not much.
    "max_ttft_regression": 0.25,
    # A faster but erroring configuration is not faster.
    "max_error_rate": 0.01,
}


class VerdictError(ValueError):
    """Inputs that cannot be compared (missing levels, bad thresholds)."""


def thresholds(overrides=None):
    """Defaults merged with operator overrides, validated as non-negative numbers."""
    merged = dict(DEFAULT_THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise VerdictError(
                "unknown threshold %r; allowed: %s" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        if value is None:
            continue
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise VerdictError("threshold %s must be a number, got %r" % (key, value))
        if value < 0:
            raise VerdictError("threshold %s must be >= 0, got %s" % (key, value))
        merged[key] = value
    return merged


def summarize(bench):
    """Reduce a spec_bench result to the figures a verdict needs, per concurrency level."""
    levels = {}
    for level in bench.get("levels", []):
        requests = level.get("ok", 0) + level.get("errors", 0)
        levels[int(level["concurrency"])] = {
            "output_tok_s": float(level.get("output_tok_s") or 0.0),
            "tpot_ms": _median(level.get("tpot_ms")),
            "ttft_ms": _median(level.get("ttft_ms")),
            "error_rate": (float(level.get("errors", 0)) / requests) if requests else 1.0,
        }
    if not levels:
        raise VerdictError("benchmark result has no levels")
    return {"levels": levels}


def _median(stats):
    if isinstance(stats, dict):
        value = stats.get("median")
        return None if value is None else float(value)
    return None if stats is None else float(stats)


def _level_checks(level, base, cand, limits):
    checks = []
    speedup = cand["output_tok_s"] / base["output_tok_s"] if base["output_tok_s"] > 0 else float("inf")
    checks.append({
        "level": level, "figure": "output_tok_s", "baseline": base["output_tok_s"],
        "candidate": cand["output_tok_s"], "ratio": speedup, "limit": limits["min_speedup"],
        "ok": speedup >= limits["min_speedup"],
        "why": "output %.1f vs %.1f tok/s = x%.2f, needs >= x%.2f" % (
            cand["output_tok_s"], base["output_tok_s"], speedup, limits["min_speedup"]),
    })
    for figure, key in (("tpot_ms", "max_tpot_regression"), ("ttft_ms", "max_ttft_regression")):
        if base.get(figure) is None or cand.get(figure) is None or base[figure] <= 0:
            continue
        ratio = cand[figure] / base[figure]
        checks.append({
            "level": level, "figure": figure, "baseline": base[figure], "candidate": cand[figure],
            "ratio": ratio, "limit": 1 + limits[key], "ok": ratio <= 1 + limits[key],
            "why": "%s %.1f vs %.1f ms = x%.2f, allowed <= x%.2f" % (
                figure.split("_", 1)[0].upper(), cand[figure], base[figure], ratio, 1 + limits[key]),
        })
    checks.append({
        "level": level, "figure": "error_rate", "baseline": base["error_rate"],
        "candidate": cand["error_rate"], "ratio": None, "limit": limits["max_error_rate"],
        "ok": cand["error_rate"] <= limits["max_error_rate"],
        "why": "errors %.1f%%, allowed <= %.1f%%" % (100 * cand["error_rate"], 100 * limits["max_error_rate"]),
    })
    return checks


def decide(baseline, candidate, overrides=None):
    """Return ``{"decision": "keep"|"rollback", "checks": [...], "reason": str, "speedup": float}``.

    Every concurrency level measured in both runs must pass every check; the speed-up reported is the
    one at the lowest common concurrency (single-stream when measured).
    """
    limits = thresholds(overrides)
    # Summaries read back from JSON have their concurrency keys as strings.
    baseline = {"levels": {int(k): v for k, v in baseline["levels"].items()}}
    candidate = {"levels": {int(k): v for k, v in candidate["levels"].items()}}
    common = sorted(set(baseline["levels"]) & set(candidate["levels"]))
    if not common:
        raise VerdictError(
            "baseline levels %s and candidate levels %s share no concurrency"
            % (sorted(baseline["levels"]), sorted(candidate["levels"])))
    checks = []
    for level in common:
        checks.extend(_level_checks(level, baseline["levels"][level], candidate["levels"][level], limits))
    failed = [c for c in checks if not c["ok"]]
    first = common[0]
    speedup = next(c["ratio"] for c in checks if c["level"] == first and c["figure"] == "output_tok_s")
    decision = "rollback" if failed else "keep"
    shown = failed or [c for c in checks if c["figure"] == "output_tok_s"]
    reason = "; ".join("c=%d %s" % (c["level"], c["why"]) for c in shown)
    return {"decision": decision, "checks": checks, "reason": reason, "speedup": speedup,
            "thresholds": limits}
