# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict's statistics: summaries of benchmark rounds, the inputs that cannot be judged, and the checks.

Used by ``_verdict`` (the decision, docs/verdict.md). A benchmark (``spec_bench``'s result), its summary
(:func:`summarize`) or a list of either (rounds in order) is reduced per concurrency level to the figures a
verdict needs; :func:`level_problems` says why a level cannot be judged (every request failed, 0 tok/s,
errors above the limit, non-finite figures, impossible token counts); :func:`level_checks` judges one level
at one look: from per-request samples the speed-up of output tok/s and the TPOT and TTFT ratios, each as an
interval (``_stats``) against its bar moved by the host shift, with the alpha of that look
(:func:`alpha_by`, the spending function); without samples the point estimates against the thresholds.

Standard library only.
"""
from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import (
    _stats, _verdict_explain, _verdict_guardrails, _verdict_lossless, _verdict_paired)


class VerdictError(ValueError):
    """Inputs that cannot be compared (missing levels, bad thresholds or plan)."""


# --------------------------------------------------------------------------- summaries

SAMPLE_KEYS = ("e2e_ms", "output_tokens", "tpot_ms", "ttft_ms", "prompt")
# The figures among them; ``prompt`` (the index of the prompt each request sent) only pairs the two sides
# (_verdict_paired), and a side that lacks it is judged unpaired, never invalid.
FIGURE_KEYS = ("e2e_ms", "output_tokens", "tpot_ms", "ttft_ms")


def float_or_none(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _median(stats):
    if isinstance(stats, dict):
        return float_or_none(stats.get("median"))
    return float_or_none(stats)


def _level_summary(level):
    ok = int(level.get("ok", 0) or 0)
    errors = int(level.get("errors", 0) or 0)
    requests = ok + errors
    out = {
        "output_tok_s": float_or_none(level.get("output_tok_s")) or 0.0,
        "tpot_ms": _median(level.get("tpot_ms")),
        "ttft_ms": _median(level.get("ttft_ms")),
        "error_rate": (float(errors) / requests) if requests else 1.0,
        "ok": ok,
        "errors": errors,
    }
    if level.get("error_kinds"):
        out["error_kinds"] = dict(level["error_kinds"])
    if level.get("duration_s") is not None:
        out["duration_s"] = float_or_none(level["duration_s"])
    samples = level.get("samples")
    if isinstance(samples, dict) and samples:
        out["samples"] = {key: list(samples.get(key) or []) for key in SAMPLE_KEYS if key in samples}
        out["samples_truncated"] = bool(level.get("samples_truncated", False))
    if isinstance(level.get("prefix_cache"), dict):  # the engine's counters, for the prefix-cache guardrail
        out["prefix_cache"] = dict(level["prefix_cache"])
    if isinstance(level.get("acceptance"), dict):  # the engine's acceptance, for the acceptance guardrail
        out["acceptance"] = dict(level["acceptance"])
    return out


def is_summary(data):
    return isinstance(data, dict) and isinstance(data.get("levels"), dict)


def _one_summary(bench, max_tokens=None):
    if is_summary(bench):
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
    if bench.get("prompts_sha256"):
        out["prompts_sha256"] = bench["prompts_sha256"]
    if bench.get("probe") is True:
        out["probe"] = True  # the plan's first look (probe_requests at the lowest level), marked by the role
    return out


def prompts_of(rounds):
    """The one ``prompts_sha256`` of summaries' rounds; None when none says, False when they differ."""
    digests = {r.get("prompts_sha256") for r in rounds}
    if len(digests) > 1:
        return False
    return digests.pop() or None


def rounds_of(data, max_tokens=None):
    """A benchmark, a summary, or a list of either (rounds in order) -> list of summaries."""
    if isinstance(data, (list, tuple)):
        if not data:
            raise VerdictError("no benchmark rounds given")
        return [_one_summary(item, max_tokens) for item in data]
    return [_one_summary(data, max_tokens)]


def merge(acc, level):
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
        for key in FIGURE_KEYS:
            acc["samples"][key].extend(samples.get(key) or [])
        prompts = samples.get("prompt") or []
        if acc["samples"].get("prompt") is not None:
            if len(prompts) == len(samples.get("e2e_ms") or []):
                acc["samples"]["prompt"].extend(prompts)
            else:  # a round without prompt indexes: the level is judged unpaired
                acc["samples"]["prompt"] = None
        acc["truncated"] = acc["truncated"] or bool(level.get("samples_truncated"))
    else:
        acc["samples"] = None
    return acc


def new_acc():
    return {"rounds": 0, "ok": 0, "errors": 0, "rates": [], "error_kinds": {}, "tok_s": [], "duration_s": 0.0,
            "tokens": 0.0, "tpot_med": [], "ttft_med": [], "samples": {key: [] for key in SAMPLE_KEYS},
            "truncated": False}


def level_figures(acc):
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
            values = [v for v in samples[key] if positive(v)]
            out[key] = _stats.median(values) if values else None
    return out


def _mean_or_none(values):
    values = [v for v in values if v is not None]
    return _stats.mean(values) if values else None


def positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def accumulate(rounds):
    """Summaries of rounds (in order) merged per level: ``{level: accumulator}``."""
    accs = {}
    for rnd in rounds:
        for level, figures in rnd["levels"].items():
            merge(accs.setdefault(level, new_acc()), figures)
    return accs


def summarize(bench, max_tokens=None):
    """Reduce a spec_bench result (or a list of rounds, merged) to the figures a verdict needs, per level.

    Levels keep their per-request ``samples`` (e2e_ms, output_tokens, tpot_ms, ttft_ms) so a stored
    baseline can be judged with intervals later; ``max_tokens`` is kept beside them.
    """
    rounds = rounds_of(bench, max_tokens)
    if len(rounds) == 1:
        return rounds[0]
    accs = accumulate(rounds)
    levels = {}
    for level, acc in accs.items():
        figures = level_figures(acc)
        if acc["duration_s"] is not None:
            figures["duration_s"] = acc["duration_s"]
        if acc["error_kinds"]:
            figures["error_kinds"] = acc["error_kinds"]
        if acc["samples"] is not None:
            figures["samples"] = dict((k, v) for k, v in acc["samples"].items() if v is not None)
            figures["samples_truncated"] = acc["truncated"]
        prefix = _verdict_guardrails.merge_prefix([r["levels"][level].get("prefix_cache") for r in rounds if level in r["levels"]])
        if prefix is not None:
            figures["prefix_cache"] = prefix
        levels[level] = figures
    out = {"levels": levels}
    limit = next((r["max_tokens"] for r in rounds if r.get("max_tokens") is not None), None)
    if limit is not None:
        out["max_tokens"] = limit
    outputs = _verdict_lossless.merge([r.get("outputs") for r in rounds])
    if outputs is not None:
        out["outputs"] = outputs
    if prompts_of(rounds):
        out["prompts_sha256"] = prompts_of(rounds)
    return out


# --------------------------------------------------------------------------- broken inputs

def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _sample_problems(samples, max_tokens):
    lengths = {key: len(samples[key]) for key in FIGURE_KEYS if samples.get(key)}
    if len(set(lengths.values())) > 1:
        return ["samples of unequal length (%s)" % ", ".join("%s %d" % kv for kv in sorted(lengths.items()))]
    problems = []
    for key in FIGURE_KEYS:
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


def level_problems(figures, acc, limits, max_tokens):
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


def token_limit(value):
    value = _stats.finite_or_none(value)
    return value if value is not None and value > 0 else None


# --------------------------------------------------------------------------- checks

def speedup_estimate(base, cand, block):
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


def median_estimate(base, cand, key, block):
    sides = []
    for samples in (cand, base):
        values = [v for v in samples.get(key) or [] if positive(v)]
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
                     why="%s: too few samples for an interval" % _verdict_explain.label(figure))
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
        head = "%s %s vs %s ms = %s [%.2f, %.2f]" % (_verdict_explain.label(figure), _ms(cand_fig), _ms(base_fig), _x(check["ratio"]),
                                                     check["ci"][0], check["ci"][1])
    if keep_bar is None:
        check["why"] = "%s, needs >= x%.2f" % (head, target)
    else:
        check["why"] = "%s, %s %s x%.2f%s (bound %s %s x%.3f)" % (
            head, word, relation, target, _shift_note(settings["host_shift"]),
            "-" if check["bound"] is None else "x%.3f" % check["bound"], beside, check["bar"])
    return check


def _ms(value):
    return "-" if value is None else "%.1f" % value


def _safe_exp(value):
    if value is None or not math.isfinite(value):
        return None
    return math.exp(value)


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
                _verdict_explain.label(figure), cand[figure], base[figure], ratio, 1 + limits[key]),
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


# --------------------------------------------------------------------------- one look

def alpha_by(settings, k, final):
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


def alpha_at(settings, before, now, final, total=None):
    """alpha one level's look may spend when the plan has it at ``now`` candidate requests after ``before``.

    The same spending function as :func:`alpha_by`, by the planned requests of that level (the first look of
    a few requests, ``probe_requests``, is its own look at the lowest level), so a level's spends over all its
    looks add up to at most alpha whatever stops the run. ``total``: the level's planned requests (default the
    plan's ``max_requests``; the lowest level's include the probe's).
    """
    alpha, total = settings["alpha"], float(total or settings["max_requests"])

    def spent(n):
        return alpha * min(1.0, n / total) ** settings["spending"] if n > 0 else 0.0
    return max(0.0, (alpha if final else spent(now)) - spent(before))


def _seconds_per_request(acc):
    requests = acc["ok"] + acc["errors"]
    if not acc["duration_s"] or not requests:
        return None
    return acc["duration_s"] / requests


def elapsed(accs):
    total = [acc["duration_s"] for acc in accs.values()]
    if any(t is None for t in total):
        return None
    return math.fsum(total)


def projected(accs, levels, requests):
    seconds = []
    for level in levels:
        per = _seconds_per_request(accs[level])
        if per is None:
            return None
        seconds.append(per * requests)
    return math.fsum(seconds)


def design(level, base_acc, cand_acc, settings, base_prompts=None, cand_prompts=None):
    """How a level is judged: ``{"design": "paired"}`` or ``{"design": "unpaired", "why": ...}``.

    Paired (_verdict_paired) at concurrency 1 when both sides' samples name their prompts and the prompts are
    the same (``prompts_sha256``, when known: None; False when a side's rounds differ); otherwise today's
    unpaired estimators.
    """
    base_samples, cand_samples = base_acc["samples"], cand_acc["samples"]
    if not settings.get("paired"):
        return {"design": "unpaired", "why": "the plan's paired is 0"}
    if int(level) != 1:
        return {"design": "unpaired", "why": "requests at c=%d share batches with other prompts' requests" % int(level)}
    if not base_samples or not cand_samples:
        return {"design": "unpaired", "why": "no samples"}
    if base_prompts is False or cand_prompts is False:
        return {"design": "unpaired", "why": "the rounds of the %s sent other prompts" % (
            "baseline" if base_prompts is False else "candidate")}
    ok, why = _verdict_paired.pairing(base_samples, cand_samples, base_prompts, cand_prompts)
    return {"design": "paired"} if ok else {"design": "unpaired", "why": why}


def level_checks(level, base, cand, base_acc, cand_acc, limits, settings, a_keep, passed, paired=None):
    """Checks of one level at one look; a check once shown within its bar stays passed.

    ``paired``: :func:`design`'s answer for the level; when paired, the figures are estimated from the
    candidate's requests against the baseline's of the same prompt (the checks say ``design: paired`` and
    ``pairs``: paired requests, prompts, requests left unpaired, how).
    """
    base_samples, cand_samples = base_acc["samples"], cand_acc["samples"]
    if not base_samples or not cand_samples or not base_samples.get("e2e_ms") or not cand_samples.get("e2e_ms"):
        return _point_checks(level, base, cand, limits) + [_error_check(level, base, cand, limits, settings["confidence"])]
    checks = []
    block = level
    info = {}
    if paired and paired.get("design") == "paired":
        def pair(figure):
            if figure == "output_tok_s":
                est, info[figure] = _verdict_paired.speedup(base_samples, cand_samples)
            else:
                est, info[figure] = _verdict_paired.median_ratio(base_samples, cand_samples, figure)
            return est
        estimates = dict((figure, (lambda f=figure: pair(f))) for figure in ("output_tok_s", "tpot_ms", "ttft_ms"))
    else:
        estimates = {
            "output_tok_s": lambda: speedup_estimate(base_samples, cand_samples, block),
            "tpot_ms": lambda: median_estimate(base_samples, cand_samples, "tpot_ms", block),
            "ttft_ms": lambda: median_estimate(base_samples, cand_samples, "ttft_ms", block),
        }
    for figure in ("output_tok_s", "tpot_ms", "ttft_ms"):
        if figure != "output_tok_s" and not (base_samples.get(figure) and cand_samples.get(figure)):
            continue  # not measured (as today: a missing figure is not checked)
        if (level, figure) in passed:
            checks.append(passed[(level, figure)])
            continue
        check = _sample_check(level, figure, base[figure], cand[figure], estimates[figure](), limits, settings,
                              a_keep, settings["futility"])
        if figure in info:
            check.update(design="paired", pairs=info[figure])
        if check["status"] == "pass":
            passed[(level, figure)] = check
        checks.append(check)
    checks.append(_error_check(level, base, cand, limits, settings["confidence"]))
    return checks
