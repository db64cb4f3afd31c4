# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep or roll back: compare a candidate benchmark with the baseline under thresholds and noise.

Inputs are ``spec_bench`` results (``bench``) or their summaries from :func:`summarize`:
``{"levels": {<concurrency>: {"output_tok_s", "tpot_ms", "ttft_ms", "error_rate", "ok", "errors",
"error_kinds", "duration_s", "samples": {...}, "samples_truncated"}}, "max_tokens": N}``. The candidate
may be a list of rounds (one benchmark each, in the order run).

With per-request samples on both sides the verdict is sequential (docs/verdict.md): after each round
every check (per level: speed-up of output tok/s, TPOT and TTFT ratios, error rate) is judged from a
confidence interval against its bar, allowing for a host shift between the two measurements; the
candidate is kept once every check is shown within its bar, rolled back as soon as one is shown
outside, and rolled back as inconclusive ("not shown faster") when the budget ends first. Without
samples (summaries from before samples existed) the point estimates are compared as they always were.

A level that cannot be judged (every request failed, 0 tok/s, errors above the limit, non-finite
figures, token counts beyond max_tokens or negative, in the samples or as spec_bench's ``bad_usage``
requests) makes the verdict ``invalid``, naming the side,
the level and why; its action is ``rollback``. Nothing returned is ever inf or NaN.
"""
from __future__ import annotations

import math
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _bench_outputs, _stats, _verdict_lossless

DEFAULT_THRESHOLDS = {
    # Speculation costs draft GPU time and memory; keep it only for a clear win.
    "min_speedup": 1.05,
    # Per-token latency may not get worse by more than this share.
    "max_tpot_regression": 0.05,
    # Drafting adds prefill work; allow some TTFT growth, not much.
    "max_ttft_regression": 0.25,
    # A faster but erroring configuration is not faster (and a level above it is invalid).
    "max_error_rate": 0.01,
    # Share of the digested prompts whose greedy output may differ from the baseline's (_verdict_lossless):
    # speculation is lossless and both sides decode one sequence at a time, so none by default.
    "max_output_divergence": 0.0,
}

# How the verdict is reached; docs/verdict.md derives the defaults and their operating characteristics.
DEFAULT_PLAN = {
    # P(keep) of a candidate whose true speed-up is min_speedup - speedup_tolerance or less, over all rounds.
    "alpha": 0.05,
    # One-sided level of the rollback (futility) bound at each round; it only costs power, never keeps.
    "futility": 0.2,
    # The indifference band below min_speedup: what a keep guarantees is speed-up > min_speedup - this.
    "speedup_tolerance": 0.03,
    # Systematic shift allowed between the baseline's and the candidate's measurement (host drift);
    # more samples do not reduce it, so every bar is moved by it.
    "host_shift": 0.02,
    # Candidate requests per concurrency level: the first round, each later one, and the budget.
    "first_round": 24,
    "round_requests": 24,
    "max_requests": 72,
    # Candidate benchmark seconds (all levels, all rounds; measured time, not restarts or warm-up).
    "max_seconds": 1200,
    # Requests per level to measure the baseline with (the role's setting; the verdict uses what it gets).
    "baseline_requests": 72,
    # alpha spent by round k: alpha * (n_k / max_requests) ** spending (2: little early, most at the end).
    "spending": 2.0,
    # Level of the intervals shown (verdict line, report, JSON).
    "confidence": 0.95,
}

_PLAN_INTS = ("first_round", "round_requests", "max_requests", "baseline_requests")


class VerdictError(ValueError):
    """Inputs that cannot be compared (missing levels, bad thresholds or plan)."""


# --------------------------------------------------------------------------- settings

def _number(kind, key, value):
    if isinstance(value, bool):
        raise VerdictError("%s %s must be a number, not a boolean (%r)" % (kind, key, value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise VerdictError("%s %s must be a number, got %r" % (kind, key, value))
    if not math.isfinite(number):
        raise VerdictError("%s %s must be a finite number, got %r" % (kind, key, value))
    return number


def thresholds(overrides=None):
    """Defaults merged with operator overrides, validated as finite non-negative numbers (no booleans).

    ``by_level``: ``{concurrency: {threshold: value}}``, bars that differ at one level (the tuner's
    schedule must only be 'not slower' where it does not draft); :func:`at_level` applies them.
    """
    merged = dict(DEFAULT_THRESHOLDS)
    if overrides is not None and not isinstance(overrides, dict):
        raise VerdictError("thresholds must be a mapping, got %r" % (overrides,))
    overrides = dict(overrides or {})
    by_level = overrides.pop("by_level", None) or {}
    if not isinstance(by_level, dict):
        raise VerdictError("thresholds by_level must be a mapping of concurrency to thresholds, got %r" % (by_level,))
    merged.update(_by_level(by_level) if by_level else {})
    for key, value in overrides.items():
        if key not in DEFAULT_THRESHOLDS:
            raise VerdictError(
                "unknown threshold %r; allowed: %s" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        if value is None:
            continue
        value = _number("threshold", key, value)
        if value < 0:
            raise VerdictError("threshold %s must be >= 0, got %s" % (key, value))
        if key in ("max_error_rate", "max_output_divergence") and value > 1:
            raise VerdictError("threshold %s is a share and must be <= 1, got %s" % (key, value))
        merged[key] = value
    return merged


def _by_level(by_level):
    out = {}
    for level, values in by_level.items():
        try:
            key = int(level)
        except (TypeError, ValueError):
            raise VerdictError("thresholds by_level keys are concurrency levels, got %r" % (level,))
        if isinstance(level, bool) or key < 1:
            raise VerdictError("thresholds by_level keys are concurrency levels >= 1, got %r" % (level,))
        if not isinstance(values, dict) or "by_level" in values:
            raise VerdictError("thresholds by_level[%s] must be a mapping of thresholds, got %r" % (level, values))
        checked = thresholds(values)
        out[key] = dict((name, checked[name]) for name in values if values[name] is not None)
    return {"by_level": out}


def at_level(limits, level):
    """The thresholds that hold at one concurrency level (``by_level`` applied)."""
    out = dict((k, v) for k, v in limits.items() if k != "by_level")
    out.update((limits.get("by_level") or {}).get(int(level), {}))
    return out


_PLAN_RANGES = {
    "alpha": (0.0, 0.5, False), "futility": (0.0, 0.5, True), "speedup_tolerance": (0.0, None, True),
    "host_shift": (0.0, 0.5, True), "spending": (0.0, None, False), "confidence": (0.5, 1.0, False),
    "max_seconds": (0.0, None, False),
}


def plan(overrides=None):
    """DEFAULT_PLAN merged with overrides, validated; adds ``rounds`` (cumulative requests per round)."""
    merged = dict(DEFAULT_PLAN)
    if overrides is not None and not isinstance(overrides, dict):
        raise VerdictError("plan must be a mapping, got %r" % (overrides,))
    for key, value in (overrides or {}).items():
        if key == "rounds":
            continue  # derived; a plan read back from a result carries it
        if key not in DEFAULT_PLAN:
            raise VerdictError("unknown plan setting %r; allowed: %s" % (key, ", ".join(sorted(DEFAULT_PLAN))))
        if value is None:
            continue
        value = _number("plan setting", key, value)
        if key in _PLAN_INTS:
            if value != int(value) or value < 1:
                raise VerdictError("plan setting %s must be a whole number >= 1, got %s" % (key, value))
            value = int(value)
        else:
            low, high, high_inclusive = _PLAN_RANGES[key]
            if value < low or (key not in ("speedup_tolerance", "host_shift") and value == low):
                raise VerdictError("plan setting %s must be > %s, got %s" % (key, low, value))
            if high is not None and (value > high or (value == high and not high_inclusive)):
                raise VerdictError("plan setting %s must be %s %s, got %s" % (key, "<=" if high_inclusive else "<", high, value))
        merged[key] = value
    merged["first_round"] = min(merged["first_round"], merged["max_requests"])
    merged["rounds"] = _schedule(merged)
    return merged


def _schedule(settings):
    """Cumulative candidate requests per level after each planned round."""
    out = [settings["first_round"]]
    while out[-1] < settings["max_requests"]:
        out.append(min(out[-1] + settings["round_requests"], settings["max_requests"]))
    return out


# --------------------------------------------------------------------------- summaries

SAMPLE_KEYS = ("e2e_ms", "output_tokens", "tpot_ms", "ttft_ms")


def _float_or_none(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _median(stats):
    if isinstance(stats, dict):
        return _float_or_none(stats.get("median"))
    return _float_or_none(stats)


def _level_summary(level):
    ok = int(level.get("ok", 0) or 0)
    errors = int(level.get("errors", 0) or 0)
    requests = ok + errors
    out = {
        "output_tok_s": _float_or_none(level.get("output_tok_s")) or 0.0,
        "tpot_ms": _median(level.get("tpot_ms")),
        "ttft_ms": _median(level.get("ttft_ms")),
        "error_rate": (float(errors) / requests) if requests else 1.0,
        "ok": ok,
        "errors": errors,
    }
    if level.get("error_kinds"):
        out["error_kinds"] = dict(level["error_kinds"])
    if level.get("duration_s") is not None:
        out["duration_s"] = _float_or_none(level["duration_s"])
    samples = level.get("samples")
    if isinstance(samples, dict) and samples:
        out["samples"] = {key: list(samples.get(key) or []) for key in SAMPLE_KEYS if key in samples}
        out["samples_truncated"] = bool(level.get("samples_truncated", False))
    return out


def _is_summary(data):
    return isinstance(data, dict) and isinstance(data.get("levels"), dict)


def _one_summary(bench, max_tokens=None):
    if _is_summary(bench):
        levels = {int(k): v for k, v in bench["levels"].items()}
        limit = max_tokens if max_tokens is not None else bench.get("max_tokens")
    else:
        if not isinstance(bench, dict):
            raise VerdictError("a benchmark result must be a mapping, got %r" % (type(bench).__name__,))
        levels = {}
        for level in bench.get("levels") or []:
            levels[int(level["concurrency"])] = _level_summary(level)
        limit = max_tokens if max_tokens is not None else bench.get("max_tokens")
    if not levels:
        raise VerdictError("benchmark result has no levels")
    out = {"levels": levels}
    if limit is not None:
        out["max_tokens"] = limit
    if isinstance(bench.get("outputs"), dict):
        out["outputs"] = bench["outputs"]
    return out


def _rounds(data, max_tokens=None):
    """A benchmark, a summary, or a list of either (rounds in order) -> list of summaries."""
    if isinstance(data, (list, tuple)):
        if not data:
            raise VerdictError("no benchmark rounds given")
        return [_one_summary(item, max_tokens) for item in data]
    return [_one_summary(data, max_tokens)]


def _merge(acc, level):
    """Add one round's level summary into an accumulator (a plain dict)."""
    acc["rounds"] += 1
    acc["ok"] += int(level.get("ok", 0) or 0)
    acc["errors"] += int(level.get("errors", 0) or 0)
    acc["rates"].append(level.get("error_rate"))
    for kind, count in (level.get("error_kinds") or {}).items():
        acc["error_kinds"][kind] = acc["error_kinds"].get(kind, 0) + count
    tok_s, duration = level.get("output_tok_s"), level.get("duration_s")
    acc["tok_s"].append(tok_s)
    if duration is not None and tok_s is not None and acc["duration_s"] is not None:
        acc["duration_s"] += duration
        acc["tokens"] += tok_s * duration
    else:
        acc["duration_s"] = None
    acc["tpot_med"].append(level.get("tpot_ms"))
    acc["ttft_med"].append(level.get("ttft_ms"))
    samples = level.get("samples")
    if isinstance(samples, dict) and samples and acc["samples"] is not None:
        for key in SAMPLE_KEYS:
            acc["samples"][key].extend(samples.get(key) or [])
        acc["truncated"] = acc["truncated"] or bool(level.get("samples_truncated"))
    else:
        acc["samples"] = None
    return acc


def _new_acc():
    return {"rounds": 0, "ok": 0, "errors": 0, "rates": [], "error_kinds": {}, "tok_s": [], "duration_s": 0.0,
            "tokens": 0.0, "tpot_med": [], "ttft_med": [], "samples": {key: [] for key in SAMPLE_KEYS},
            "truncated": False}


def _figures(acc):
    """The per-level figures of an accumulator: what the report and the checks show."""
    requests = acc["ok"] + acc["errors"]
    if requests:
        error_rate = acc["errors"] / float(requests)
    else:  # summaries without counts: the stored rate (today's summaries always carry ok/errors)
        rates = [r for r in acc["rates"] if r is not None]
        error_rate = max(rates) if rates else 1.0
    if acc["duration_s"]:
        tok_s = acc["tokens"] / acc["duration_s"]
    else:
        values = [v for v in acc["tok_s"] if v is not None]
        tok_s = _stats.mean(values) if values else 0.0
    samples = acc["samples"]
    out = {"output_tok_s": tok_s, "error_rate": error_rate, "ok": acc["ok"], "errors": acc["errors"]}
    for key, meds in (("tpot_ms", acc["tpot_med"]), ("ttft_ms", acc["ttft_med"])):
        if acc["rounds"] == 1 or not samples or not samples.get(key):
            out[key] = meds[0] if acc["rounds"] == 1 else _mean_or_none(meds)
        else:
            values = [v for v in samples[key] if _positive(v)]
            out[key] = _stats.median(values) if values else None
    return out


def _mean_or_none(values):
    values = [v for v in values if v is not None]
    return _stats.mean(values) if values else None


def _positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def summarize(bench, max_tokens=None):
    """Reduce a spec_bench result (or a list of rounds, merged) to the figures a verdict needs, per level.

    Levels keep their per-request ``samples`` (e2e_ms, output_tokens, tpot_ms, ttft_ms) so a stored
    baseline can be judged with intervals later; ``max_tokens`` is kept beside them.
    """
    rounds = _rounds(bench, max_tokens)
    if len(rounds) == 1:
        return rounds[0]
    accs = {}
    for rnd in rounds:
        for level, figures in rnd["levels"].items():
            _merge(accs.setdefault(level, _new_acc()), figures)
    levels = {}
    for level, acc in accs.items():
        figures = _figures(acc)
        if acc["duration_s"] is not None:
            figures["duration_s"] = acc["duration_s"]
        if acc["error_kinds"]:
            figures["error_kinds"] = acc["error_kinds"]
        if acc["samples"] is not None:
            figures["samples"] = acc["samples"]
            figures["samples_truncated"] = acc["truncated"]
        levels[level] = figures
    out = {"levels": levels}
    limit = next((r["max_tokens"] for r in rounds if r.get("max_tokens") is not None), None)
    if limit is not None:
        out["max_tokens"] = limit
    outputs = _verdict_lossless.merge([r.get("outputs") for r in rounds])
    if outputs is not None:
        out["outputs"] = outputs
    return out


# --------------------------------------------------------------------------- broken inputs

def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _sample_problems(samples, max_tokens):
    lengths = {key: len(samples[key]) for key in SAMPLE_KEYS if samples.get(key)}
    if len(set(lengths.values())) > 1:
        return ["samples of unequal length (%s)" % ", ".join("%s %d" % kv for kv in sorted(lengths.items()))]
    problems = []
    for key in SAMPLE_KEYS:
        values = samples.get(key) or []
        if None in values:
            values = [v for v in values if v is not None]
        try:
            finite = all(map(math.isfinite, values))
        except TypeError:
            finite = False
        if not finite:
            bad = [v for v in values if not _finite(v)]
            problems.append("%d non-finite %s sample(s) (%r)" % (len(bad), key, bad[0]))
            continue
        if values and min(values) < 0:
            negative = [v for v in values if v < 0]
            problems.append("%d negative %s sample(s) (%s)" % (len(negative), key, negative[0]))
    if problems:
        return problems
    tokens = samples.get("output_tokens") or []
    if None in tokens:
        tokens = [v for v in tokens if v is not None]
    if max_tokens is not None and tokens and max(tokens) > max_tokens:
        over = [v for v in tokens if v > max_tokens]
        problems.append("%d request(s) report more output tokens than max_tokens %g (%g)" % (len(over), max_tokens, max(over)))
    e2e = [v for v in samples.get("e2e_ms") or [] if v is not None]
    if e2e and min(e2e) <= 0:
        problems.append("end-to-end time of 0 ms in samples")
    return problems


def _level_problems(figures, acc, limits, max_tokens):
    """Why a side's level cannot be judged (empty when it can)."""
    problems = []
    requests = figures["ok"] + figures["errors"]
    kinds = ", ".join("%s=%s" % kv for kv in sorted(acc["error_kinds"].items()))
    if acc["rounds"] and requests == 0 and acc["rates"] and all(r is not None and r >= 1 for r in acc["rates"]):
        return ["every request failed"]
    if requests and figures["ok"] == 0:
        return ["every request failed (%d error(s)%s)" % (figures["errors"], ": " + kinds if kinds else "")]
    tok_s = figures["output_tok_s"]
    if not _finite(tok_s):
        problems.append("output tok/s is not a finite number (%r)" % (tok_s,))
    elif tok_s <= 0:
        problems.append("0 tok/s")
    for key in ("tpot_ms", "ttft_ms"):
        value = figures.get(key)
        if value is not None and (not _finite(value) or value < 0):
            problems.append("median %s is %r" % (key, value))
    rate = figures["error_rate"]
    if not _finite(rate) or rate > limits["max_error_rate"]:
        low, high = _stats.wilson(figures["errors"], requests) if requests else (0.0, 1.0)
        problems.append("errors %.1f%% [%.1f%%, %.1f%%] above the limit %.1f%%%s" % (
            100 * rate, 100 * low, 100 * high, 100 * limits["max_error_rate"], " (%s)" % kinds if kinds else ""))
    bad_usage = acc["error_kinds"].get("bad_usage", 0)
    if bad_usage:
        # spec_bench found the server's own token counts impossible (negative, beyond max_tokens, shrinking):
        # its figures are counted by those, so no share of such requests is tolerated.
        problems.append("%d request(s) with impossible token counts in the server's usage (bad_usage)" % bad_usage)
    if acc["samples"] is not None:
        problems.extend(_sample_problems(acc["samples"], max_tokens))
    return problems


def problems(summary, overrides=None, max_tokens=None, side="baseline"):
    """Why a measurement cannot serve a verdict: ``[{"side", "level", "why"}]``, empty when it can.

    The role calls it on a fresh baseline before the switch (re-measure, or fail without touching the host).
    """
    limits = thresholds(overrides)
    rounds = _rounds(summary, max_tokens)
    limit = _max_tokens(next((r.get("max_tokens") for r in rounds if r.get("max_tokens") is not None), None))
    accs = {}
    for one in rounds:
        for level, figures in one["levels"].items():
            _merge(accs.setdefault(level, _new_acc()), figures)
    return [{"side": side, "level": level, "why": why}
            for level in sorted(accs) for why in _level_problems(_figures(accs[level]), accs[level], limits, limit)]


def _max_tokens(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


# --------------------------------------------------------------------------- checks

def _speedup_estimate(base, cand, block):
    """log speed-up of output tok/s from samples: sum(tokens) / sum(e2e seconds) per side."""
    sides = []
    for samples in (cand, base):
        tokens, e2e = samples.get("output_tokens") or [], samples.get("e2e_ms") or []
        pairs = [(t, e / 1000.0) for t, e in zip(tokens, e2e) if _finite(t) and _finite(e) and e > 0]
        est = _stats.log_ratio_of_means([p[0] for p in pairs], [p[1] for p in pairs], block) if len(pairs) >= 2 else None
        if est is None:
            return None
        sides.append(est)
    return _stats.difference(sides[0], sides[1])


def _median_estimate(base, cand, key, block):
    sides = []
    for samples in (cand, base):
        values = [v for v in samples.get(key) or [] if _positive(v)]
        est = _stats.log_median(values, block) if values else None
        if est is None:
            return None
        sides.append(est)
    return _stats.difference(sides[0], sides[1])


def _x(value):
    return "x%.2f" % value


def _shift_note(shift):
    return " with a %g%% host shift" % (100 * shift) if shift else ""


def _sample_check(level, figure, base_fig, cand_fig, est, limits, settings, a_keep, a_fut):
    """One figure at one level from samples: status pass / fail / open against its keep_bar."""
    shift = math.log1p(settings["host_shift"])
    higher = figure == "output_tok_s"
    if higher:
        target = limits["min_speedup"] - settings["speedup_tolerance"]
        limit = limits["min_speedup"]
        keep_bar = math.log(target) + shift if target > 0 else None
    else:
        key = "max_tpot_regression" if figure == "tpot_ms" else "max_ttft_regression"
        target = limit = 1 + limits[key]
        keep_bar = math.log(target) - shift
    check = {"level": level, "figure": figure, "baseline": base_fig, "candidate": cand_fig, "limit": limit,
             "target": target, "method": "samples"}
    if est is None:
        check.update(ratio=None, ci=None, bar=None, bound=None, status="open", ok=False,
                     why="%s: too few samples for an interval" % _label(figure))
        return check
    low, high = _stats.interval(est, settings["confidence"])
    check.update(ratio=math.exp(est.value), ci=[math.exp(low), math.exp(high)])
    if keep_bar is None:  # min_speedup - tolerance <= 0: any speed-up passes
        status, bound = "pass", None
    elif higher:
        keep_bound = _stats.bound(est, "lower", 1 - a_keep) if a_keep > 0 else -math.inf
        fut_bound = _stats.bound(est, "upper", 1 - a_fut)
        status = "pass" if keep_bound >= keep_bar else ("fail" if fut_bound < keep_bar else "open")
        bound = fut_bound if status == "fail" else keep_bound
    else:
        keep_bound = _stats.bound(est, "upper", 1 - a_keep) if a_keep > 0 else math.inf
        fut_bound = _stats.bound(est, "lower", 1 - a_fut)
        status = "pass" if keep_bound <= keep_bar else ("fail" if fut_bound > keep_bar else "open")
        bound = fut_bound if status == "fail" else keep_bound
    check.update(bar=_safe_exp(keep_bar), bound=_safe_exp(bound), status=status, ok=status == "pass")
    word = {"pass": "shown", "fail": "cannot be shown", "open": "not shown"}[status]
    relation = ">=" if higher else "<="
    # the side of the bar the bound is on: as the relation when shown, the other way when not
    beside = relation if status == "pass" else {">=": "<", "<=": ">"}[relation]
    if higher:
        head = "output %.1f vs %.1f tok/s = %s [%.2f, %.2f]" % (cand_fig, base_fig, _x(check["ratio"]), check["ci"][0], check["ci"][1])
    else:
        head = "%s %s vs %s ms = %s [%.2f, %.2f]" % (_label(figure), _ms(cand_fig), _ms(base_fig), _x(check["ratio"]),
                                                     check["ci"][0], check["ci"][1])
    if keep_bar is None:
        check["why"] = "%s, needs >= x%.2f" % (head, target)
    else:
        check["why"] = "%s, %s %s x%.2f%s (bound x%.3f %s x%.3f)" % (
            head, word, relation, target, _shift_note(settings["host_shift"]), check["bound"], beside, check["bar"])
    return check


def _ms(value):
    return "-" if value is None else "%.1f" % value


def _safe_exp(value):
    if value is None or not math.isfinite(value):
        return None
    return math.exp(value)


def _label(figure):
    return {"output_tok_s": "output tok/s", "tpot_ms": "TPOT", "ttft_ms": "TTFT", "error_rate": "errors"}[figure]


def _point_checks(level, base, cand, limits):
    """Today's rule for levels without samples: point estimates against the thresholds."""
    checks = []
    speedup = cand["output_tok_s"] / base["output_tok_s"]
    checks.append({
        "level": level, "figure": "output_tok_s", "baseline": base["output_tok_s"],
        "candidate": cand["output_tok_s"], "ratio": speedup, "ci": None, "limit": limits["min_speedup"],
        "method": "point", "status": "pass" if speedup >= limits["min_speedup"] else "fail",
        "ok": speedup >= limits["min_speedup"],
        "why": "output %.1f vs %.1f tok/s = x%.2f, needs >= x%.2f" % (
            cand["output_tok_s"], base["output_tok_s"], speedup, limits["min_speedup"]),
    })
    for figure, key in (("tpot_ms", "max_tpot_regression"), ("ttft_ms", "max_ttft_regression")):
        if base.get(figure) is None or cand.get(figure) is None or base[figure] <= 0:
            continue
        ratio = cand[figure] / base[figure]
        ok = ratio <= 1 + limits[key]
        checks.append({
            "level": level, "figure": figure, "baseline": base[figure], "candidate": cand[figure],
            "ratio": ratio, "ci": None, "limit": 1 + limits[key], "method": "point",
            "status": "pass" if ok else "fail", "ok": ok,
            "why": "%s %.1f vs %.1f ms = x%.2f, allowed <= x%.2f" % (
                _label(figure), cand[figure], base[figure], ratio, 1 + limits[key]),
        })
    return checks


def _error_check(level, base, cand, limits, confidence):
    requests = cand["ok"] + cand["errors"]
    low, high = _stats.wilson(cand["errors"], requests, confidence) if requests else (None, None)
    return {
        "level": level, "figure": "error_rate", "baseline": base["error_rate"], "candidate": cand["error_rate"],
        "ratio": None, "ci": None if low is None else [low, high], "limit": limits["max_error_rate"],
        "method": "count", "status": "pass", "ok": True,
        "why": "errors %.1f%%%s, allowed <= %.1f%%" % (
            100 * cand["error_rate"], "" if low is None else " [%.1f%%, %.1f%%]" % (100 * low, 100 * high),
            100 * limits["max_error_rate"]),
    }


# --------------------------------------------------------------------------- the sequential verdict

def _alpha_by(settings, k, final):
    """alpha this look may spend: the spending function's increment, or all that is left when final."""
    rounds, alpha = settings["rounds"], settings["alpha"]
    total = float(settings["max_requests"])

    def spent(j):
        if j <= 0:
            return 0.0
        return alpha * min(1.0, rounds[min(j, len(rounds)) - 1] / total) ** settings["spending"]
    before = spent(k - 1)
    if k > len(rounds):
        return 0.0
    return max(0.0, (alpha if final else spent(k)) - before)


def _seconds_per_request(acc):
    requests = acc["ok"] + acc["errors"]
    if not acc["duration_s"] or not requests:
        return None
    return acc["duration_s"] / requests


def decide(baseline, candidate, overrides=None, plan_overrides=None, max_tokens=None, final=True, lossy=False):
    """Judge candidate rounds against the baseline.

    baseline: a bench result or summary (or a list of them, merged). candidate: the same, or a list of
    rounds in the order run. With ``final`` (verdict_decide) the last round given is the last one
    (no more will run): what is not decided is inconclusive. Without it (verdict_round) the answer may
    be ``continue`` with ``next`` = {"requests", "concurrency", "final"} for the next round.

    Returns ``{"decision": keep|rollback|continue, "verdict": keep|rollback|inconclusive|invalid|continue,
    "reason", "speedup", "speedup_ci", "checks", "invalid", "next", "round", "requests", "elapsed_s",
    "method", "thresholds", "plan", "lossless"}``; ``decision`` is the action (invalid and inconclusive roll back).

    ``lossless``: the lossless check (``_verdict_lossless.compare``: the candidate's greedy outputs against the
    baseline's, per prompt), or ``{"skipped": why}``; it is the first check, and a failed one rolls back
    ("outputs differ from the baseline"). ``lossy``: the operator's opt-in for a sampler that is lossy by
    design; its divergence is reported, never a reason to roll back.
    """
    limits = thresholds(overrides)
    settings = plan(plan_overrides)
    base_rounds = _rounds(baseline, max_tokens)
    cand_rounds = _rounds(candidate, max_tokens)
    limit_tokens = _max_tokens(max_tokens if max_tokens is not None else next(
        (r.get("max_tokens") for r in base_rounds + cand_rounds if r.get("max_tokens") is not None), None))

    base_acc = {}
    for rnd in base_rounds:
        for level, figures in rnd["levels"].items():
            _merge(base_acc.setdefault(level, _new_acc()), figures)
    # The levels judged are the first round's (that the baseline has too); later rounds may leave out a
    # level whose checks have all passed (next.concurrency), not add one.
    cand_levels = sorted(cand_rounds[0]["levels"])
    common = [level for level in cand_levels if level in base_acc]
    if not common:
        raise VerdictError(
            "baseline levels %s and candidate levels %s share no concurrency" % (sorted(base_acc), cand_levels))
    base_fig = {level: _figures(base_acc[level]) for level in common}
    result = {"thresholds": limits, "plan": settings, "invalid": [], "next": None}
    base_outputs = _verdict_lossless.merge([r.get("outputs") for r in base_rounds])

    invalid = [{"side": "baseline", "level": level, "why": why}
               for level in common for why in _level_problems(base_fig[level], base_acc[level], at_level(limits, level), limit_tokens)]
    cand_acc = {level: _new_acc() for level in common}
    passed = {}
    planned_final = len(settings["rounds"]) == 1
    alpha_spent = 0.0
    for k, rnd in enumerate(cand_rounds, 1):
        for level in common:
            if level in rnd["levels"]:
                _merge(cand_acc[level], rnd["levels"][level])
        last_given = k == len(cand_rounds)
        is_final = planned_final or (final and last_given) or k >= len(settings["rounds"])
        a_keep = _alpha_by(settings, k, is_final)
        cand_fig = {level: _figures(cand_acc[level]) for level in common}
        invalid_now = invalid + [
            {"side": "candidate", "level": level, "why": why}
            for level in common for why in _level_problems(cand_fig[level], cand_acc[level], at_level(limits, level), limit_tokens)]
        result.update(round=k, requests={level: cand_fig[level]["ok"] + cand_fig[level]["errors"] for level in common},
                      elapsed_s=_elapsed(cand_acc))
        lossless = _verdict_lossless.compare(base_outputs, _verdict_lossless.merge([r.get("outputs") for r in cand_rounds[:k]]),
                                             limits["max_output_divergence"], lossy)
        result["lossless"] = lossless
        if invalid_now:
            return _finish(result, "invalid", [], invalid_now, base_fig, cand_fig, common)
        checks = [c for c in [_verdict_lossless.as_check(lossless)] if c is not None]
        for level in common:
            checks.extend(_level_checks(level, base_fig[level], cand_fig[level], base_acc[level], cand_acc[level],
                                        at_level(limits, level), settings, a_keep, passed))
        alpha_spent += a_keep
        result["alpha_spent"] = alpha_spent
        if any(c["status"] == "fail" for c in checks):
            return _finish(result, "rollback", checks, [], base_fig, cand_fig, common)
        if all(c["status"] == "pass" for c in checks):
            return _finish(result, "keep", checks, [], base_fig, cand_fig, common)
        if is_final:
            return _finish(result, "inconclusive", checks, [], base_fig, cand_fig, common)
        # Plan the next round; whether it is the last is decided now, from what is known before it runs.
        open_levels = sorted({c["level"] for c in checks if c["status"] == "open"})
        rounds = settings["rounds"]
        next_n = rounds[k] - rounds[k - 1]
        per_round = _projected(cand_acc, open_levels, next_n)
        after_next = _projected(cand_acc, open_levels, rounds[k + 1] - rounds[k]) if k + 1 < len(rounds) else 0.0
        elapsed = result["elapsed_s"] or 0.0
        if per_round is not None and elapsed + per_round > settings["max_seconds"]:
            result["budget"] = "seconds"
            return _finish(result, "inconclusive", checks, [], base_fig, cand_fig, common)
        planned_final = k + 1 >= len(rounds) or (per_round is not None and elapsed + per_round + after_next > settings["max_seconds"])
        result["next"] = {"requests": next_n, "concurrency": open_levels, "final": planned_final}
        if last_given:
            return _finish(result, "continue", checks, [], base_fig, cand_fig, common)
    raise AssertionError("unreachable")  # pragma: no cover


def _elapsed(accs):
    total = [acc["duration_s"] for acc in accs.values()]
    if any(t is None for t in total):
        return None
    return math.fsum(total)


def _projected(accs, levels, requests):
    seconds = []
    for level in levels:
        per = _seconds_per_request(accs[level])
        if per is None:
            return None
        seconds.append(per * requests)
    return math.fsum(seconds)


def _level_checks(level, base, cand, base_acc, cand_acc, limits, settings, a_keep, passed):
    """Checks of one level at one look; a check once shown within its bar stays passed."""
    base_samples, cand_samples = base_acc["samples"], cand_acc["samples"]
    if not base_samples or not cand_samples or not base_samples.get("e2e_ms") or not cand_samples.get("e2e_ms"):
        return _point_checks(level, base, cand, limits) + [_error_check(level, base, cand, limits, settings["confidence"])]
    checks = []
    block = level
    estimates = {
        "output_tok_s": lambda: _speedup_estimate(base_samples, cand_samples, block),
        "tpot_ms": lambda: _median_estimate(base_samples, cand_samples, "tpot_ms", block),
        "ttft_ms": lambda: _median_estimate(base_samples, cand_samples, "ttft_ms", block),
    }
    for figure in ("output_tok_s", "tpot_ms", "ttft_ms"):
        if figure != "output_tok_s" and not (base_samples.get(figure) and cand_samples.get(figure)):
            continue  # not measured (as today: a missing figure is not checked)
        if (level, figure) in passed:
            checks.append(passed[(level, figure)])
            continue
        check = _sample_check(level, figure, base[figure], cand[figure], estimates[figure](), limits, settings,
                              a_keep, settings["futility"])
        if check["status"] == "pass":
            passed[(level, figure)] = check
        checks.append(check)
    checks.append(_error_check(level, base, cand, limits, settings["confidence"]))
    return checks


def _finish(result, verdict, checks, invalid, base_fig, cand_fig, common):
    first = common[0]
    result["verdict"] = verdict
    result["decision"] = {"keep": "keep", "continue": "continue"}.get(verdict, "rollback")
    result["checks"] = checks
    result["invalid"] = invalid
    result["method"] = "samples" if any(c.get("method") == "samples" for c in checks) else (
        "point" if checks else None)
    speed = next((c for c in checks if c["level"] == first and c["figure"] == "output_tok_s"), None)
    if speed is None and not invalid:
        base, cand = base_fig[first], cand_fig[first]
        ratio = cand["output_tok_s"] / base["output_tok_s"] if base["output_tok_s"] else None
        speed = {"ratio": ratio, "ci": None}
    result["speedup"] = None if speed is None or invalid else speed["ratio"]
    result["speedup_ci"] = None if speed is None or invalid else speed.get("ci")
    if verdict != "continue":
        result["next"] = None
    result["reason"] = _reason(result, verdict, checks, invalid)
    return _json_safe(result)


def _reason(result, verdict, checks, invalid):
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


def _json_safe(value):
    """No inf / NaN in what goes to JSON: None instead."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------- host drift

def drift(before, after, plan_overrides=None):
    """Do two measurements of the same configuration differ beyond the allowed host shift?

    For the baseline before a switch and again after a rollback (or the nightly check): per common level,
    the output tok/s ratio after/before (and the TPOT ratio) with its interval at the plan's confidence.
    ``unstable`` when an interval lies wholly outside [1/(1+host_shift), 1+host_shift], i.e. the host moved
    by more than the verdict allows for. Without samples the point ratio is compared with that band.
    Returns ``{"unstable": bool, "levels": [{"level", "figure", "ratio", "ci", "beyond"}], "reason"}``.
    """
    settings = plan(plan_overrides)
    shift = math.log1p(settings["host_shift"])
    accs = []
    for data in (before, after):
        acc = {}
        for rnd in _rounds(data):
            for level, figures in rnd["levels"].items():
                _merge(acc.setdefault(level, _new_acc()), figures)
        accs.append(acc)
    common = sorted(set(accs[0]) & set(accs[1]))
    if not common:
        raise VerdictError("the two measurements share no concurrency level")
    rows = []
    for level in common:
        one, two = accs[0][level], accs[1][level]
        fig_one, fig_two = _figures(one), _figures(two)
        for figure in ("output_tok_s", "tpot_ms"):
            est = None
            if one["samples"] and two["samples"]:
                if figure == "output_tok_s":
                    est = _speedup_estimate(one["samples"], two["samples"], level)
                else:
                    est = _median_estimate(one["samples"], two["samples"], figure, level)
            if est is not None:
                low, high = _stats.interval(est, settings["confidence"])
                ratio, ci = math.exp(est.value), [math.exp(low), math.exp(high)]
                beyond = low > shift or high < -shift
            else:
                a, b = fig_one.get(figure), fig_two.get(figure)
                if not (_positive(a) and _positive(b)):
                    continue
                ratio, ci = b / a, None
                beyond = abs(math.log(ratio)) > shift
            # worse: beyond the band on the slow side (less throughput, longer TPOT)
            worse = beyond and ((ratio < 1) if figure == "output_tok_s" else (ratio > 1))
            rows.append({"level": level, "figure": figure, "ratio": ratio, "ci": ci, "beyond": beyond, "worse": worse})
    moved = [r for r in rows if r["beyond"]]
    reason = "; ".join("c=%d %s after/before x%.3f%s beyond the %g%% host shift allowed" % (
        r["level"], _label(r["figure"]), r["ratio"], "" if r["ci"] is None else " [%.3f, %.3f]" % tuple(r["ci"]),
        100 * settings["host_shift"]) for r in moved)
    if not moved:
        reason = "within the %g%% host shift: %s" % (100 * settings["host_shift"], "; ".join(
            "c=%d %s x%.3f" % (r["level"], _label(r["figure"]), r["ratio"]) for r in rows))
    return _json_safe({"unstable": bool(moved), "regressed": any(r["worse"] for r in rows), "levels": rows,
                       "reason": reason})


# --------------------------------------------------------------------------- stored baselines

# What must be equal for a stored baseline to stand for a fresh one (the role's __spec_switch_baseline_settings).
# unit_sha256: the unit file that ran, so a baseline stored before the unit changed (a rollback, a change
# outside the switch) never stands for the configuration that runs now.
BASELINE_SETTINGS = ("host", "engine", "model", "suite", "api", "concurrency", "max_tokens", "warmup", "ignore_eos",
                     "unit_sha256")


def _setting(key, value):
    if key == "concurrency" and isinstance(value, (list, tuple)):
        try:
            return sorted(int(v) for v in value)
        except (TypeError, ValueError):
            return list(value)
    if key in ("max_tokens", "warmup") and not isinstance(value, bool):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value
    return value


def _int_or_zero(value):
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _hours(seconds):
    return "%.1f h" % (seconds / 3600.0) if seconds >= 360 else "%d s" % round(seconds)


# What a switch does when the stored baseline cannot stand (spec_switch_missing_baseline).
MISSING_BASELINE = ("measure", "fail")


def baseline_check(stored, settings, max_age=None, now=None, overrides=None, min_requests=None, missing=None,
                   key=None, state_dir=None, host=None):
    """May a stored baseline stand for the running configuration, instead of measuring it now?

    ``stored``: the baseline file's content (``measured_epoch``, ``settings``, ``summary``), None when
    there is no file; ``settings``: what this run would measure with (:data:`BASELINE_SETTINGS`);
    ``max_age``: seconds (None: any age, for the nightly comparison); ``min_requests``: requests per
    level the plan measures a baseline with. Usable only when every setting is equal, it is at most
    ``max_age`` old, every level has samples and at least ``min_requests`` requests, and :func:`problems`
    finds nothing. Returns ``{"usable": bool, "age_s": float or None, "why": str}``.

    ``missing`` (one of :data:`MISSING_BASELINE`) adds what a switch does: ``action`` ``use``, ``measure``
    or ``fail``, and ``msg``, the refusal when it fails (else None), naming the baseline ``key``, the
    ``state_dir`` it is kept under and the ``host`` (default: the settings' host). ``fail`` means "use
    what is stored": ``max_age`` is not applied, a stored baseline that cannot be judged is not used.
    """
    if not isinstance(settings, dict):
        raise VerdictError("baseline settings must be a mapping, got %r" % (settings,))
    if max_age is not None:
        max_age = _number("baseline", "max_age", max_age)
    if missing is not None and missing not in MISSING_BASELINE:
        raise VerdictError("missing_baseline must be one of %s, got %r" % (", ".join(MISSING_BASELINE), missing))
    if missing == "fail":
        host = settings.get("host") if host is None else host
        unnamed = [name for name, value in (("key", key), ("state_dir", state_dir), ("host", host)) if value in (None, "")]
        if unnamed:
            raise VerdictError("missing_baseline=fail needs %s for its message" % " and ".join(unnamed))
        max_age = None
    out = _stored_check(stored, settings, max_age, now, overrides, min_requests)
    if missing is None:
        return out
    if out["usable"] or missing == "measure":
        return dict(out, action="use" if out["usable"] else "measure", msg=None)
    if stored is None:
        refusal = "no baseline for %s in %s/baselines on %s; run playbooks/baseline.yml first" % (key, state_dir, host)
    else:
        refusal = "%s on %s: %s; run playbooks/baseline.yml" % (key, host, out["why"])
    return dict(out, action="fail", msg=refusal + ", or set spec_switch_missing_baseline=measure. Nothing was changed.")


def _stored_check(stored, settings, max_age, now, overrides, min_requests):
    """baseline_check's usable, age_s and why (arguments checked)."""
    out = {"usable": False, "age_s": None}
    if not isinstance(stored, dict) or not _is_summary(stored.get("summary")) or not stored["summary"]["levels"]:
        return dict(out, why="no stored baseline")
    epoch = _float_or_none(stored.get("measured_epoch"))
    age = None
    if epoch is not None and math.isfinite(epoch):
        age = (time.time() if now is None else float(now)) - epoch
        out["age_s"] = age
    kept = stored.get("settings")
    if not isinstance(kept, dict):
        return dict(out, why="the stored baseline has no benchmark settings (stored by an older version)")
    differ = ["%s %s, now %s" % (key, _setting(key, kept.get(key)), _setting(key, settings.get(key)))
              for key in BASELINE_SETTINGS if _setting(key, kept.get(key)) != _setting(key, settings.get(key))]
    if differ:
        return dict(out, why="the stored baseline was measured with other settings (%s)" % "; ".join(differ))
    if max_age is not None and age is None:
        return dict(out, why="the stored baseline has no measurement time")
    if max_age is not None and age is not None:
        if age > max_age:
            return dict(out, why="the stored baseline is %s old (at most %s)" % (_hours(age), _hours(max_age)))
        if age < -300:
            return dict(out, why="the stored baseline was measured %s in the future (clock skew)" % _hours(abs(age)))
    levels = stored["summary"]["levels"]
    for key in sorted(levels, key=int):
        fig = levels[key] if isinstance(levels[key], dict) else {}
        if not (fig.get("samples") or {}).get("e2e_ms"):
            return dict(out, why="the stored baseline has no per-request samples at c=%s" % key)
        count = int(fig.get("ok", 0) or 0) + int(fig.get("errors", 0) or 0)
        # settings' min_waves (spec_bench's): this run measures at least that many waves of each level.
        needed = max(int(min_requests or 0), int(settings.get("min_waves") or 0) * int(key))
        if needed and count < needed:
            return dict(out, why="the stored baseline has %d request(s) at c=%s, the plan measures %d" % (
                count, key, needed))
    # settings' lossless_prompts (spec_bench's): with the lossless check on, a baseline without output digests
    # cannot stand for one that has them (it was stored by a version before the check).
    if _int_or_zero(settings.get("lossless_prompts")) > 0 and not _bench_outputs.usable(stored["summary"].get("outputs")):
        return dict(out, why="the stored baseline has no output digests for the lossless check (%s)" % (
            (stored["summary"].get("outputs") or {}).get("skipped") or "stored by an older version"))
    found = problems(stored["summary"], overrides)
    if found:
        return dict(out, why="the stored baseline cannot be judged: %s" % "; ".join(
            "c=%d %s" % (p["level"], p["why"]) for p in found))
    return dict(out, usable=True, why="stored baseline, %s old, same settings" % (
        "unknown" if age is None else _hours(max(age, 0.0))))


# --------------------------------------------------------------------------- the one verdict line

_WORDS = {"keep": "KEPT", "rollback": "ROLLED BACK", "inconclusive": "INCONCLUSIVE", "invalid": "INVALID",
          "continue": "MEASURING"}


def verdict_line(rec):
    """The one-line verdict for the job log, the report and the history.

    ``HOST: OUTCOME LABEL on SUITE (xS.SS [LO, HI]) - REASON``; OUTCOME is the record's ``outcome``
    (kept, rolled_back, unchanged, failed) in capitals, or the verdict's word when there is none. An
    inconclusive verdict rolled back reads ``ROLLED BACK ... not shown faster ...``. A drift check
    (``drift``: the result of :func:`drift`) that found the host unstable is appended.
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
    return line
