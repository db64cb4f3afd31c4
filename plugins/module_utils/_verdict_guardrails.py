# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict's guardrails: checks that may stop a candidate at any round (docs/verdict.md, "Guardrails").

The speed checks of ``_verdict`` spend alpha over a fixed schedule of looks. A guardrail is for a failure
that should stop the experiment as soon as it is shown, at whatever look: its bound is *always valid*
(a confidence sequence), so looking after every round, or every request, does not raise the chance of
stopping a candidate that is in fact within the guardrail above ``guardrail_alpha``.

Per concurrency level, from the candidate's rounds so far:

- **error rate**: H0 "the candidate's error rate is at most ``max_error_rate``". The test martingale is
  the likelihood ratio of the errors mixed over a uniform prior on ``[limit, 1]`` (:func:`log_mixture`);
  under H0 it is a non-negative supermartingale, so by Ville's inequality it reaches ``1/alpha`` with
  probability at most alpha over all looks. The bound shown is the confidence sequence's lower bound of
  the rate (:func:`lower_bound`).
- **TTFT tail**: H0 "the candidate's p90 TTFT is at most (1 + ``max_ttft_tail_regression``) times the
  baseline's". The bar is that factor times an upper confidence bound of the baseline's p90 (an order
  statistic with exact binomial coverage); a candidate request whose TTFT is above the bar is a
  "success" of a Bernoulli whose rate is at most 10 % under H0, tested with the same martingale.
- **prefix-cache hit rate** (``prefix_cache`` of a level, read from the engine's own counters through its
  adapter): the candidate's hit rate against the baseline's. The counters count tokens, which are not
  independent trials, so this one is a point rule with a floor on the volume: it fires when the hit rate
  falls below (1 - ``max_prefix_cache_drop``) times the baseline's over at least ``MIN_PREFIX_REQUESTS``
  candidate requests. The failure it is for is a collapse (to near 0: vLLM issues 54360, 53670).

- **acceptance per position** against what the same method showed before (``prior``: the acceptance of the
  latest record of the same method, engine, model and suite on this host, :func:`prior_acceptance`): the
  nightly watch's per-position test (``_watch.judge``) at ``guardrail_alpha`` split over the planned looks (a
  union bound: valid for the plan's looks, not for unplanned ones), with a smallest drop of ``ACCEPT_DROP``.
  A draft that stopped working (a broken draft head, a tokenizer mismatch after an upgrade) shows here first.

Each row is a verdict check (``figure`` ``guardrail_*``), ``status`` ``fail`` (fired), ``pass`` (not fired
so far) or ``open`` (errors above the limit, not shown yet); the verdict rolls back in the round one fires, with its ``why`` first.

Standard library only.
"""
from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import _stats


def _watch():
    """The acceptance watch's module, imported when the acceptance guardrail runs (a verdict filter that does not
    compare acceptance imports no more than it runs: tests/unit/plugins/filter/test_filter_lookup_imports.py)."""
    from ansible_collections.llmops.specdec.plugins.module_utils import _watch as watch  # pylint: disable=import-outside-toplevel
    return watch


# The thresholds the guardrails add to the verdict's (``_verdict.DEFAULT_THRESHOLDS``).
DEFAULT_THRESHOLDS = {
    # The candidate's p90 TTFT may be at most this share above the baseline's (0.5: x1.5) before it is stopped.
    "max_ttft_tail_regression": 0.5,
    # The candidate's prefix-cache hit rate may fall at most this share below the baseline's (0.5: to half).
    "max_prefix_cache_drop": 0.5,
}

# The plan setting (``_verdict.DEFAULT_PLAN``): false-stop probability of each guardrail at each level, over all looks.
DEFAULT_PLAN = {"guardrail_alpha": 0.01}

# The tail judged by the TTFT guardrail.
TAIL = 0.9
# Fewest candidate TTFT samples a tail check is made on; below it the row is open.
MIN_TAIL_SAMPLES = 8
# Fewest candidate requests of a level before its hit rate is judged, and the lowest baseline hit rate worth
# guarding (below it there is nothing to lose).
MIN_PREFIX_REQUESTS = 16
MIN_BASE_HIT_RATE = 0.1
# Smallest absolute drop of a draft position's acceptance against the same method's earlier record that stops a
# candidate, and fewest drafts on either side.
ACCEPT_DROP = 0.15
ACCEPT_MIN_DRAFTS = 50


def log_mixture(k, n, p0):
    """log of the test martingale against "rate <= p0" after ``k`` events in ``n`` trials.

    The likelihood ratio ``(p/p0)^k ((1-p)/(1-p0))^(n-k)`` mixed over ``p`` uniform on ``[p0, 1]``:
    ``B(k+1, n-k+1) (1 - I_p0(k+1, n-k+1)) / ((1-p0) p0^k (1-p0)^(n-k))``. For any true rate at most p0
    each ratio with ``p >= p0`` is a supermartingale, so the mixture is one as well.
    """
    if n <= 0:
        return 0.0
    if p0 >= 1.0:
        return -math.inf
    if p0 <= 0.0:
        return math.inf if k > 0 else -math.log(n + 1.0)
    a, b = k + 1.0, n - k + 1.0
    tail = 1.0 - _stats.betainc(a, b, p0)
    if tail <= 0.0:
        return -math.inf
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return log_beta + math.log(tail) - math.log1p(-p0) - k * math.log(p0) - (n - k) * math.log1p(-p0)


def fires(k, n, p0, alpha):
    """Is "rate <= p0" rejected by the always-valid test at level alpha?"""
    return log_mixture(k, n, p0) >= math.log(1.0 / alpha)


def lower_bound(k, n, alpha):
    """The confidence sequence's lower bound of the rate: the smallest p0 not rejected (0 when none is)."""
    if n <= 0 or k <= 0 or not fires(k, n, 1e-12, alpha):
        return 0.0
    low, high = 1e-12, k / float(n)
    for _step in range(60):
        mid = (low + high) / 2.0
        if fires(k, n, mid, alpha):
            low = mid
        else:
            high = mid
    return low


def quantile_upper(values, q, confidence):
    """An upper bound of the q-quantile: the smallest order statistic above it with probability >= confidence.

    Returns ``(value, exact)``; with too few values for that coverage, the largest value and ``False``.
    """
    s = sorted(values)
    n = len(s)
    cdf = 0.0
    for r in range(1, n + 1):
        # P(X_(r) >= Q_q) = P(Binomial(n, q) <= r - 1)
        cdf += math.comb(n, r - 1) * q ** (r - 1) * (1.0 - q) ** (n - r + 1)
        if cdf >= confidence:
            return s[r - 1], True
    return s[-1], False


def _positive(values):
    return [v for v in values or [] if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0]


def _empirical(values, q):
    """The empirical q-quantile (the order statistic at rank ceil(q n))."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(math.ceil(q * len(s))) - 1))]


def _row(level, figure, status, why, **figures):
    row = {"level": level, "figure": figure, "baseline": None, "candidate": None, "ratio": None, "ci": None,
           "limit": None, "method": "always_valid", "status": status, "ok": status != "fail", "why": why}
    row.update(figures)
    return row


def error_check(level, errors, requests, limit, alpha):
    """The error-rate guardrail of one level (``errors`` of ``requests`` so far).

    ``fail`` when the always-valid bound shows the rate above ``limit``; ``open`` when the rate is above it but
    not shown yet (the candidate cannot be kept, and is measured on: the point rule judges it at the last look);
    else ``pass``.
    """
    rate = errors / float(requests) if requests else 0.0
    bound = lower_bound(errors, requests, alpha)
    fired = requests > 0 and fires(errors, requests, limit, alpha)
    status = "fail" if fired else ("open" if rate > limit else "pass")
    why = "guardrail error rate: %d/%d errors (%.1f%%), always-valid lower bound %.1f%% %s the limit %.1f%%%s" % (
        errors, requests, 100 * rate, 100 * bound, ">" if fired else "<=", 100 * limit,
        ", above it but not shown yet" if status == "open" else "")
    return _row(level, "guardrail_error_rate", status, why, candidate=rate, bound=bound,
                limit=limit, events=errors, trials=requests)


def ttft_tail_check(level, base_ttft, cand_ttft, regression, alpha):
    """The TTFT-tail guardrail of one level, from the per-request TTFT samples (ms) of both sides."""
    base, cand = _positive(base_ttft), _positive(cand_ttft)
    if len(base) < MIN_TAIL_SAMPLES or len(cand) < MIN_TAIL_SAMPLES:
        return _row(level, "guardrail_ttft_tail", "pass", "guardrail TTFT p%d: too few samples (%d baseline, %d candidate)" % (
            round(100 * TAIL), len(base), len(cand)))
    base_q, exact = quantile_upper(base, TAIL, 1.0 - alpha)
    limit_ms = (1.0 + regression) * base_q
    over = sum(1 for v in cand if v > limit_ms)
    share = 1.0 - TAIL
    bound = lower_bound(over, len(cand), alpha)
    fired = fires(over, len(cand), share, alpha)
    cand_q = _empirical(cand, TAIL)
    why = ("guardrail TTFT p%d: %d/%d requests above %.0f ms (x%.2f the baseline's p%d %s %.0f ms), always-valid lower bound "
           "of that share %.1f%% %s %.0f%%" % (
               round(100 * TAIL), over, len(cand), limit_ms, 1.0 + regression, round(100 * TAIL),
               "bound" if exact else "(its largest sample, too few for a bound)", base_q, 100 * bound,
               ">" if fired else "<=", 100 * share))
    return _row(level, "guardrail_ttft_tail", "fail" if fired else "pass", why, baseline=base_q, candidate=cand_q,
                ratio=cand_q / base_q, limit=1.0 + regression, bar_ms=limit_ms, bound=bound, events=over, trials=len(cand))


def hit_rate(prefix):
    """``(hits, queries, rate)`` of a level's ``prefix_cache`` entry, or None when it has none usable."""
    if not isinstance(prefix, dict) or prefix.get("error"):
        return None
    rate = prefix.get("hit_rate")
    queries = prefix.get("queries")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not math.isfinite(rate):
        return None
    return prefix.get("hits"), queries, float(rate)


def merge_prefix(entries):
    """Several rounds' ``prefix_cache`` entries of one level as one: counters summed, else the last gauge."""
    usable = [e for e in entries if hit_rate(e) is not None]
    if not usable:
        return None
    if all(isinstance(e.get("queries"), (int, float)) and isinstance(e.get("hits"), (int, float)) for e in usable):
        hits = math.fsum(e["hits"] for e in usable)
        queries = math.fsum(e["queries"] for e in usable)
        return dict(usable[-1], hits=hits, queries=queries, hit_rate=hits / queries if queries else 0.0)
    return dict(usable[-1])


def prefix_check(level, base, cand, drop, requests):
    """The prefix-cache guardrail of one level after ``requests`` candidate requests (None when either side has
    no figure)."""
    b, c = hit_rate(base), hit_rate(cand)
    if b is None or c is None:
        return None
    floor = (1.0 - drop) * b[2]
    queries = c[1]
    enough = requests >= MIN_PREFIX_REQUESTS
    fired = b[2] >= MIN_BASE_HIT_RATE and enough and c[2] < floor
    volume = "" if queries is None else " over %d queried tokens" % queries
    why = "guardrail prefix-cache hit rate: %.1f%% vs the baseline's %.1f%%%s, %s %.1f%% (%.0f%% of the baseline's)" % (
        100 * c[2], 100 * b[2], volume, "below" if fired else "allowed down to", 100 * floor, 100 * (1.0 - drop))
    if not enough:
        why += "; not judged before %d requests" % MIN_PREFIX_REQUESTS
    return _row(level, "guardrail_prefix_cache", "fail" if fired else "pass", why, baseline=b[2], candidate=c[2],
                ratio=(c[2] / b[2]) if b[2] else None, limit=1.0 - drop, method="counters")


def inputs(levels, base_acc, cand_acc, base_rounds, cand_rounds):
    """The per-level inputs of :func:`check` from the verdict's accumulators (``_verdict_stats``) and round summaries."""
    out = {}
    for level in levels:
        base_samples, cand_samples = base_acc[level].get("samples") or {}, cand_acc[level].get("samples") or {}
        out[level] = {
            "errors": cand_acc[level]["errors"], "requests": cand_acc[level]["ok"] + cand_acc[level]["errors"],
            "base_ttft": base_samples.get("ttft_ms"), "cand_ttft": cand_samples.get("ttft_ms"),
            "base_prefix": merge_prefix([r["levels"][level].get("prefix_cache") for r in base_rounds if level in r["levels"]]),
            "cand_prefix": merge_prefix([r["levels"][level].get("prefix_cache") for r in cand_rounds if level in r["levels"]]),
        }
    return out


def _same(a, b):
    return isinstance(a, dict) and isinstance(b, dict) and {k: v for k, v in a.items() if v is not None} == {
        k: v for k, v in b.items() if v is not None}


def prior_acceptance(records, engine, model, suite, spec):
    """The acceptance the same method showed before: from the latest of ``records`` (history, oldest first) of the
    same engine, served model, suite and candidate spec with counted drafts, ``{"at", "label", "outcome",
    "acceptance"}``; None without one."""
    for rec in reversed([r for r in records or [] if isinstance(r, dict)]):
        acc = rec.get("acceptance")
        if (rec.get("engine") == engine and rec.get("model") == model and rec.get("suite") == suite
                and _same(rec.get("candidate"), spec) and isinstance(acc, dict) and acc.get("drafts")
                and acc.get("source") in _watch().COUNTED):
            return {"at": rec.get("at"), "label": rec.get("label"), "outcome": rec.get("outcome"), "acceptance": acc}
    return None


def acceptance_check(level, prior, cand_levels, alpha, looks):
    """The acceptance guardrail (None without a prior record): the candidate's acceptance so far, pooled over its
    levels and rounds (``cand_levels``: spec_bench levels with their ``acceptance``), against ``prior``."""
    if not isinstance(prior, dict) or not prior.get("acceptance"):
        return None
    now = _watch().summarize(list(cand_levels))
    config = {"alpha": min(0.49, alpha / max(1, looks)), "min_drop": ACCEPT_DROP, "min_drafts": ACCEPT_MIN_DRAFTS}
    out = _watch().judge(prior["acceptance"], now, config)
    fired = bool(out["judged"] and out["dropped"])
    before = "what %s showed on %s (%s)" % (prior.get("label") or "the same method", prior.get("at") or "-",
                                            str(prior.get("outcome") or "-").replace("_", " "))
    if fired:
        why = "guardrail acceptance: below %s, over all levels: %s" % (before, out["line"].replace("acceptance dropped ", ""))
    elif out["judged"]:
        why = "guardrail acceptance: as %s, over all levels: %s" % (before, out["line"].replace("acceptance ", ""))
    else:
        why = "guardrail acceptance: not judged against %s: %s" % (before, out["reason"].replace("when kept", "before").replace(
            "tonight", "now"))
    lengths = out.get("mean_acceptance_length") or {}
    return _row(level, "guardrail_acceptance", "fail" if fired else "pass", why, baseline=lengths.get("kept"),
                candidate=lengths.get("now"), method="per_position", positions=out.get("positions") or [])


def check(levels, limits_at, alpha, prior=None, cand_levels=(), looks=1):
    """The guardrails of one look.

    levels: ``{level: {"errors", "requests", "base_ttft", "cand_ttft", "base_prefix", "cand_prefix"}}``;
    limits_at: level -> thresholds (``_verdict.at_level``); ``prior``: :func:`prior_acceptance`, with
    ``cand_levels`` (the candidate's spec_bench levels so far) and ``looks`` (the plan's). Returns ``{"checks": [...], "fired": [...],
    "alpha": alpha}``; ``fired`` lists the rows whose status is ``fail``.
    """
    rows = []
    for level in sorted(levels):
        data, limits = levels[level], limits_at(level)
        rows.append(error_check(level, int(data.get("errors") or 0), int(data.get("requests") or 0),
                                limits["max_error_rate"], alpha))
        rows.append(ttft_tail_check(level, data.get("base_ttft"), data.get("cand_ttft"),
                                    limits["max_ttft_tail_regression"], alpha))
        prefix = prefix_check(level, data.get("base_prefix"), data.get("cand_prefix"), limits["max_prefix_cache_drop"],
                              int(data.get("requests") or 0))
        if prefix is not None:
            rows.append(prefix)
    accept = acceptance_check(min(levels), prior, cand_levels, alpha, looks) if levels else None
    if accept is not None:
        rows.append(accept)
    return {"checks": rows, "fired": [row for row in rows if row["status"] == "fail"], "alpha": alpha}


def summary_line(guardrails):
    """Words for a record's guardrails: the ones that fired, else how many held."""
    if not isinstance(guardrails, dict) or not guardrails.get("checks"):
        return None
    fired = guardrails.get("fired") or []
    if fired:
        return "; ".join("c=%s %s" % (row["level"], row["why"]) for row in fired)
    return "%d guardrail check(s) held (always-valid, alpha %g each)" % (len(guardrails["checks"]), guardrails.get("alpha", 0))
