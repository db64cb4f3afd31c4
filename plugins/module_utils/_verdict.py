# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep or roll back: compare a candidate benchmark with the baseline under thresholds and noise.

The decision: the thresholds and the plan, :func:`decide`, :func:`drift` and :func:`baseline_check`. Its
statistics (summaries, the checks of one level at one look) are in ``_verdict_stats``, its words (the reason,
the one verdict line) in ``_verdict_explain``, the lossless check in ``_verdict_lossless``.

Inputs are ``spec_bench`` results (``bench``) or their summaries from ``_verdict_stats.summarize``:
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

from ansible_collections.llmops.specdec.plugins.module_utils import (
    _bench_outputs, _stats, _verdict_explain, _verdict_guardrails, _verdict_lossless, _verdict_stats)

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
# The guardrails' (_verdict_guardrails): max_ttft_tail_regression, max_prefix_cache_drop.
DEFAULT_THRESHOLDS.update(_verdict_guardrails.DEFAULT_THRESHOLDS)

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
    # The first look: this many candidate requests at the lowest level only, before the first round (0: none).
    # It can roll back a clearly slower candidate (x0.5 in 4 requests) and spends almost no alpha.
    "probe_requests": 4,
    # 1: at concurrency 1, judge the candidate's requests against the baseline's of the same prompt
    # (_verdict_paired) where both sides name their prompts; 0: the unpaired estimators everywhere.
    "paired": 1,
}
# The guardrails' (_verdict_guardrails): guardrail_alpha, each guardrail's false-stop probability at each level.
DEFAULT_PLAN.update(_verdict_guardrails.DEFAULT_PLAN)

_PLAN_INTS = ("first_round", "round_requests", "max_requests", "baseline_requests")
# Whole numbers that may be 0 (what turns the setting off); paired also takes a boolean.
_PLAN_COUNTS = {"probe_requests": None, "paired": 1}

# Raised here and by _verdict_stats (inputs that cannot be compared); the filters catch it here.
VerdictError = _verdict_stats.VerdictError


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
        if key in ("max_error_rate", "max_output_divergence", "max_prefix_cache_drop") and value > 1:
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
    "max_seconds": (0.0, None, False), "guardrail_alpha": (0.0, 0.5, False),
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
        if key == "paired" and isinstance(value, bool):
            value = int(value)
        value = _number("plan setting", key, value)
        if key in _PLAN_COUNTS:
            high = _PLAN_COUNTS[key]
            if value != int(value) or value < 0 or (high is not None and value > high):
                raise VerdictError("plan setting %s must be a whole number >= 0%s, got %s" % (
                    key, "" if high is None else " and <= %d" % high, value))
            value = int(value)
        elif key in _PLAN_INTS:
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


def problems(summary, overrides=None, max_tokens=None, side="baseline"):
    """Why a measurement cannot serve a verdict: ``[{"side", "level", "why"}]``, empty when it can.

    The role calls it on a fresh baseline before the switch (re-measure, or fail without touching the host).
    """
    limits = thresholds(overrides)
    rounds = _verdict_stats.rounds_of(summary, max_tokens)
    limit = _verdict_stats.token_limit(next((r.get("max_tokens") for r in rounds if r.get("max_tokens") is not None), None))
    accs = _verdict_stats.accumulate(rounds)
    return [{"side": side, "level": level, "why": why}
            for level in sorted(accs) for why in _verdict_stats.level_problems(_verdict_stats.level_figures(accs[level]), accs[level], limits, limit)]


# --------------------------------------------------------------------------- the sequential verdict

def decide(baseline, candidate, overrides=None, plan_overrides=None, max_tokens=None, final=True, lossy=False,
           prior_acceptance=None):
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

    ``guardrails`` (``_verdict_guardrails.check``): every guardrail of this look; one that fired rolls back at
    once (``guardrail`` names it). ``prior_acceptance``: what the same method showed before
    (``_verdict_guardrails.prior_acceptance``), for the acceptance guardrail.
    """
    limits = thresholds(overrides)
    settings = plan(plan_overrides)
    base_rounds = _verdict_stats.rounds_of(baseline, max_tokens)
    cand_rounds = _verdict_stats.rounds_of(candidate, max_tokens)
    limit_tokens = _verdict_stats.token_limit(max_tokens if max_tokens is not None else next(
        (r.get("max_tokens") for r in base_rounds + cand_rounds if r.get("max_tokens") is not None), None))

    base_acc = _verdict_stats.accumulate(base_rounds)
    # The levels judged are the first round's (that the baseline has too); later rounds may leave out a
    # level whose checks have all passed (next.concurrency), not add one. A first round marked ``probe``
    # (the plan's first look: probe_requests at the lowest level only) is followed by every baseline level.
    cand_levels = sorted(cand_rounds[0]["levels"])
    probing = bool(cand_rounds[0].get("probe"))
    common = sorted(base_acc) if probing else [level for level in cand_levels if level in base_acc]
    if not common or not set(cand_levels) & set(base_acc):
        raise VerdictError(
            "baseline levels %s and candidate levels %s share no concurrency" % (sorted(base_acc), cand_levels))
    base_fig = {level: _verdict_stats.level_figures(base_acc[level]) for level in common}
    result = {"thresholds": limits, "plan": settings, "invalid": [], "next": None}
    base_outputs = _verdict_lossless.merge([r.get("outputs") for r in base_rounds])
    base_prompts, cand_prompts = _verdict_stats.prompts_of(base_rounds), _verdict_stats.prompts_of(cand_rounds)

    invalid = [{"side": "baseline", "level": level, "why": why}
               for level in common for why in _verdict_stats.level_problems(base_fig[level], base_acc[level], at_level(limits, level), limit_tokens)]
    cand_acc = {level: _verdict_stats.new_acc() for level in common}
    passed = {}
    # Requests per level of each look: the probe's (lowest level only) first when there is one, then the rounds.
    sizes = [settings["rounds"][0]] + [b - a for a, b in zip(settings["rounds"], settings["rounds"][1:])]
    looks = ([settings["probe_requests"]] if probing else []) + sizes
    planned_final = len(looks) == 1
    alpha_spent = 0.0
    for k, rnd in enumerate(cand_rounds, 1):
        for level in common:
            if level in rnd["levels"]:
                _verdict_stats.merge(cand_acc[level], rnd["levels"][level])
        measured = [level for level in common if cand_acc[level]["rounds"]]
        last_given = k == len(cand_rounds)
        is_final = planned_final or (final and last_given) or k >= len(looks)
        cand_fig = {level: _verdict_stats.level_figures(cand_acc[level]) for level in measured}
        # Before the last look the candidate's error rate is the error guardrail's (an always-valid bound), not
        # the point rule's: an early look at a few requests must not stop a candidate within the limit.
        other_problems = invalid + _candidate_problems(measured, cand_fig, cand_acc, limits, limit_tokens, point_errors=False)
        invalid_now = other_problems if not is_final else (
            invalid + _candidate_problems(measured, cand_fig, cand_acc, limits, limit_tokens, point_errors=True))
        result.update(round=k, requests={level: (cand_fig[level]["ok"] + cand_fig[level]["errors"]) if level in cand_fig else 0
                                         for level in common},
                      elapsed_s=_verdict_stats.elapsed(cand_acc))
        lossless = _verdict_lossless.compare(base_outputs, _verdict_lossless.merge([r.get("outputs") for r in cand_rounds[:k]]),
                                             limits["max_output_divergence"], lossy)
        result["lossless"] = lossless
        guard = _verdict_guardrails.check(_verdict_guardrails.inputs(measured, base_acc, cand_acc, base_rounds, cand_rounds[:k]),
                                          lambda level: at_level(limits, level), settings["guardrail_alpha"],
                                          prior_acceptance, [dict(r["levels"][lv], concurrency=lv) for r in cand_rounds[:k]
                                                             for lv in common if lv in r["levels"]],
                                          len(looks))
        result["guardrails"] = guard
        if guard["fired"] and not other_problems:
            # a guardrail fired: stop now, whichever look this is; the guardrail is the reason (before the
            # point rule on errors of the last look)
            result["guardrail"] = guard["fired"][0]["figure"]
            return _finish(result, "rollback", guard["fired"], [], base_fig, cand_fig, common)
        if invalid_now:
            return _finish(result, "invalid", [], invalid_now, base_fig, cand_fig, common)
        checks = [c for c in [_verdict_lossless.as_check(lossless)] if c is not None]
        designs = {}
        checks.extend(row for row in guard["checks"] if row["status"] == "open")  # errors above the limit block a keep
        for level in common:
            if level not in cand_fig:
                checks.append(_not_measured(level, base_fig[level], limits))
                continue
            # the planned requests of this level before and at this look (the probe is the lowest level's
            # alone): what it may spend of alpha
            planned = [sum(looks[:j]) - (looks[0] if probing and level != common[0] and j else 0) for j in (k - 1, k)]
            # the lowest level's planned requests include the probe's: spread alpha over all of them
            level_total = settings["max_requests"] + (looks[0] if probing and level == common[0] else 0)
            a_keep = _verdict_stats.alpha_at(settings, planned[0], planned[1], is_final, level_total)
            if level == common[0]:
                alpha_spent += a_keep
            designs[level] = _verdict_stats.design(level, base_acc[level], cand_acc[level], settings, base_prompts, cand_prompts)
            checks.extend(_verdict_stats.level_checks(level, base_fig[level], cand_fig[level], base_acc[level], cand_acc[level],
                                                      at_level(limits, level), settings, a_keep, passed, designs[level]))
        result["alpha_spent"] = alpha_spent
        result["design"] = designs
        if any(c["status"] == "fail" for c in checks):
            return _finish(result, "rollback", checks, [], base_fig, cand_fig, common)
        if all(c["status"] == "pass" for c in checks):
            return _finish(result, "keep", checks, [], base_fig, cand_fig, common)
        if is_final:
            return _finish(result, "inconclusive", checks, [], base_fig, cand_fig, common)
        # Plan the next round; whether it is the last is decided now, from what is known before it runs.
        open_levels = sorted({c["level"] for c in checks if c["status"] == "open"})
        next_n = looks[k]
        per_round = _verdict_stats.projected(cand_acc, open_levels, next_n)
        after_next = _verdict_stats.projected(cand_acc, open_levels, looks[k + 1]) if k + 1 < len(looks) else 0.0
        elapsed = result["elapsed_s"] or 0.0
        if per_round is not None and elapsed + per_round > settings["max_seconds"]:
            result["budget"] = "seconds"
            return _finish(result, "inconclusive", checks, [], base_fig, cand_fig, common)
        planned_final = k + 1 >= len(looks) or (per_round is not None and elapsed + per_round + after_next > settings["max_seconds"])
        result["next"] = {"requests": next_n, "concurrency": open_levels, "final": planned_final}
        if last_given:
            return _finish(result, "continue", checks, [], base_fig, cand_fig, common)
    raise AssertionError("unreachable")  # pragma: no cover


def _not_measured(level, base, limits):
    """The open check of a level the candidate has not run yet (after the probe, which runs the lowest only)."""
    return {"level": level, "figure": "output_tok_s", "baseline": base["output_tok_s"], "candidate": None,
            "limit": limits["min_speedup"], "target": None, "method": "samples", "ratio": None, "ci": None,
            "bar": None, "bound": None, "status": "open", "ok": False,
            "why": "not measured yet (the first look runs the lowest level only)"}


def _candidate_problems(common, cand_fig, cand_acc, limits, limit_tokens, point_errors):
    """The candidate's problems (``_verdict_stats.level_problems``); without ``point_errors`` an error rate above
    ``max_error_rate`` is not one (the error guardrail judges it)."""
    out = []
    for level in common:
        level_limits = at_level(limits, level)
        if not point_errors:
            level_limits["max_error_rate"] = 1.0
        out.extend({"side": "candidate", "level": level, "why": why}
                   for why in _verdict_stats.level_problems(cand_fig[level], cand_acc[level], level_limits, limit_tokens))
    return out


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
    result["reason"] = _verdict_explain.reason(result, verdict, checks, invalid)
    return _verdict_explain.json_safe(result)


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
    accs = [_verdict_stats.accumulate(_verdict_stats.rounds_of(data)) for data in (before, after)]
    common = sorted(set(accs[0]) & set(accs[1]))
    if not common:
        raise VerdictError("the two measurements share no concurrency level")
    rows = []
    for level in common:
        one, two = accs[0][level], accs[1][level]
        fig_one, fig_two = _verdict_stats.level_figures(one), _verdict_stats.level_figures(two)
        for figure in ("output_tok_s", "tpot_ms"):
            est = None
            if one["samples"] and two["samples"]:
                if figure == "output_tok_s":
                    est = _verdict_stats.speedup_estimate(one["samples"], two["samples"], level)
                else:
                    est = _verdict_stats.median_estimate(one["samples"], two["samples"], figure, level)
            if est is not None:
                low, high = _stats.interval(est, settings["confidence"])
                ratio, ci = math.exp(est.value), [math.exp(low), math.exp(high)]
                beyond = low > shift or high < -shift
            else:
                a, b = fig_one.get(figure), fig_two.get(figure)
                if not (_verdict_stats.positive(a) and _verdict_stats.positive(b)):
                    continue
                ratio, ci = b / a, None
                beyond = abs(math.log(ratio)) > shift
            # worse: beyond the band on the slow side (less throughput, longer TPOT)
            worse = beyond and ((ratio < 1) if figure == "output_tok_s" else (ratio > 1))
            rows.append({"level": level, "figure": figure, "ratio": ratio, "ci": ci, "beyond": beyond, "worse": worse})
    moved = [r for r in rows if r["beyond"]]
    reason = "; ".join("c=%d %s after/before x%.3f%s beyond the %g%% host shift allowed" % (
        r["level"], _verdict_explain.label(r["figure"]), r["ratio"], "" if r["ci"] is None else " [%.3f, %.3f]" % tuple(r["ci"]),
        100 * settings["host_shift"]) for r in moved)
    if not moved:
        reason = "within the %g%% host shift: %s" % (100 * settings["host_shift"], "; ".join(
            "c=%d %s x%.3f" % (r["level"], _verdict_explain.label(r["figure"]), r["ratio"]) for r in rows))
    return _verdict_explain.json_safe({"unstable": bool(moved), "regressed": any(r["worse"] for r in rows), "levels": rows,
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
    if not isinstance(stored, dict) or not _verdict_stats.is_summary(stored.get("summary")) or not stored["summary"]["levels"]:
        return dict(out, why="no stored baseline")
    epoch = _verdict_stats.float_or_none(stored.get("measured_epoch"))
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
