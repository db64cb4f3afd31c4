# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The paired design of the verdict: the candidate's requests against the baseline's requests of the same prompt.

Both sides of a verdict send the same prompts in the same order (``spec_bench`` records per sample the index
of the prompt sent, ``samples.prompt``, and the run's ``prompts_sha256``). A prompt's own length and content
move its times on both sides alike (a long prompt has a long prefill, a repetitive one drafts well on every
engine), so comparing each candidate request with the baseline's requests of the same prompt takes that
between-prompt spread out of the comparison: on the log scale, per prompt ``p``,

    d_p = mean(log x, candidate requests of p) - mean(log x, baseline requests of p)

and the estimate is the candidate-weighted mean of the ``d_p`` (prompts sent round-robin: equal weights up to
one request). Prompts only one side has (failed requests, a round cut short, unequal counts) are dropped;
the candidate's requests dropped so are counted (``unpaired``).

- **Speed-up of output tok/s** (:func:`speedup`): ``x`` is each request's own rate, output tokens over its
  end-to-end seconds. Its variance is stratified by prompt (the prompts are the fixed suite, so only the
  within-prompt jitter is noise): pooled within-prompt variances of each side, ``s_c^2 / n_c + s_b^2 sum
  w_p^2 / n_bp``, with Welch's degrees of freedom (``n_c - P``, ``n_b - P``). While some prompt has a single
  candidate request (the first look, a suite larger than the round) the within variance of the candidate
  cannot be had; then the per-request residuals ``log x_i - mean(log x, baseline of p(i))`` are taken as
  independent (their variance includes the prompts' own speed-ups, wider: conservative), plus the share of
  the baseline means' variance they do not already count, with ``n_c - 1`` degrees of freedom.
- **TPOT and TTFT** (:func:`median_ratio`): every value of both sides is divided by its prompt's baseline
  geometric mean, and the ratio of the two medians of what is left is estimated as before
  (``_stats.log_median``, Price and Bonett): the ratio of medians with the prompts' spread taken out.
- Concurrency 1 only: above it requests share batches with other prompts' requests, and the verdict keeps
  today's cluster-robust unpaired estimators (``_stats``) there.

``pairing`` says whether two sides can be paired at all (both carry prompt indexes, and the same prompts).
Standard library only; docs/verdict.md states the design and its operating characteristic.
"""
from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import _stats


def _finite_positive(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def _prompt_ids(samples):
    ids = samples.get("prompt") if isinstance(samples, dict) else None
    if not ids:
        return None
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
        return None
    return ids


def pairing(base_samples, cand_samples, base_prompts=None, cand_prompts=None):
    """Can the two sides be paired by prompt? ``(True, None)`` or ``(False, why)``.

    ``*_samples``: a level's merged samples; ``*_prompts``: the sides' ``prompts_sha256`` (None when not
    known: the indexes are then trusted, as both sides of a switch run the same suite).
    """
    for side, samples in (("baseline", base_samples), ("candidate", cand_samples)):
        ids = _prompt_ids(samples)
        if ids is None:
            return False, "the %s's samples name no prompt (measured before the paired design)" % side
        if len(ids) != len(samples.get("e2e_ms") or []):
            return False, "the %s's samples name the prompt of %d request(s) out of %d" % (
                side, len(ids), len(samples.get("e2e_ms") or []))
    if base_prompts and cand_prompts and base_prompts != cand_prompts:
        return False, "the two sides sent other prompts (prompts_sha256 %s, %s)" % (base_prompts, cand_prompts)
    if not set(base_samples["prompt"]) & set(cand_samples["prompt"]):
        return False, "the two sides share no prompt"
    return True, None


def _by_prompt(ids, values):
    out = {}
    for prompt, value in zip(ids, values):
        if value is not None:
            out.setdefault(prompt, []).append(value)
    return out


def _log_rates(samples):
    out = []
    for tokens, e2e in zip(samples.get("output_tokens") or [], samples.get("e2e_ms") or []):
        out.append(math.log(tokens * 1000.0 / e2e) if _finite_positive(tokens) and _finite_positive(e2e) else None)
    return out


def _pooled(groups):
    """Pooled within-group variance and its degrees of freedom (0 when no group has two values)."""
    ss, df = 0.0, 0
    for values in groups:
        if len(values) > 1:
            m = _stats.mean(values)
            ss += math.fsum((v - m) ** 2 for v in values)
            df += len(values) - 1
    return (ss / df if df else 0.0), df


def _welch(parts):
    """Welch-Satterthwaite degrees of freedom of a sum of variance components [(var, df)]."""
    var = math.fsum(v for v, _df in parts)
    terms = [v * v / df for v, df in parts if v > 0]
    if var <= 0 or not terms:
        return math.inf
    if any(df <= 0 for v, df in parts if v > 0):
        return 0.0
    return var * var / math.fsum(terms)


def paired_logs(base_logs, cand_logs, base_ids, cand_ids):
    """Per prompt the two sides' log values: ``(base_groups, cand_groups, unpaired)`` over the common prompts;
    ``unpaired``: the candidate's requests of a prompt the baseline has none of (dropped)."""
    base, cand = _by_prompt(base_ids, base_logs), _by_prompt(cand_ids, cand_logs)
    common = sorted(set(base) & set(cand))
    unpaired = sum(len(v) for p, v in cand.items() if p not in base)
    return {p: base[p] for p in common}, {p: cand[p] for p in common}, unpaired


def stratified_difference(base, cand):
    """The candidate-weighted mean of per-prompt differences of mean logs, as an ``_stats.Estimate``.

    ``base`` and ``cand``: ``{prompt: [log values]}`` over the same prompts. Returns
    ``(estimate, how)``, ``how`` ``stratified`` or ``residuals`` (module doc); ``(None, why)`` when there is
    too little for a variance.
    """
    n_c = sum(len(v) for v in cand.values())
    if not cand or n_c < 2:
        return None, "fewer than 2 paired requests"
    weights = {p: len(v) / float(n_c) for p, v in cand.items()}
    base_means = {p: _stats.mean(v) for p, v in base.items()}
    value = math.fsum(weights[p] * (_stats.mean(cand[p]) - base_means[p]) for p in cand)
    s_b2, df_b = _pooled(base.values())
    s_c2, df_c = _pooled(cand.values())
    base_share = math.fsum(weights[p] ** 2 / len(base[p]) for p in cand)
    if all(len(v) > 1 for v in cand.values()) and all(len(v) > 1 for v in base.values()) and df_c >= 2:
        parts = [(s_c2 / n_c, df_c), (s_b2 * base_share, df_b)]
        return _stats.Estimate(value, math.fsum(v for v, _df in parts), _welch(parts)), "stratified"
    residuals = [x - base_means[p] for p in cand for x in cand[p]]
    var = _stats.variance(residuals) / n_c
    if df_b:
        # the residuals count each baseline mean's variance once per request as if independent; the rest of
        # its share (prompts with more than one candidate request) is added
        var += s_b2 * max(0.0, base_share - math.fsum(weights[p] / (n_c * len(base[p])) for p in cand))
    return _stats.Estimate(value, var, n_c - 1.0), "residuals"


def speedup(base_samples, cand_samples):
    """log speed-up of the candidate's per-request output tok/s, paired by prompt (concurrency 1).

    Returns ``(estimate or None, info)``; info: ``{"pairs", "prompts", "unpaired", "how"}``.
    """
    base, cand, unpaired = paired_logs(_log_rates(base_samples), _log_rates(cand_samples),
                                       base_samples["prompt"], cand_samples["prompt"])
    est, how = stratified_difference(base, cand)
    info = {"pairs": sum(len(v) for v in cand.values()), "prompts": len(cand), "unpaired": unpaired,
            "how": how if est is not None else None}
    if est is None:
        info["why"] = how
    return est, info


def median_ratio(base_samples, cand_samples, key):
    """log ratio of the medians of ``key`` (TPOT, TTFT) with each prompt's baseline geometric mean taken out.

    Returns ``(estimate or None, info)`` as :func:`speedup`.
    """
    def logs(samples):
        return [math.log(v) if _finite_positive(v) else None for v in samples.get(key) or []]
    base, cand, unpaired = paired_logs(logs(base_samples), logs(cand_samples), base_samples["prompt"],
                                       cand_samples["prompt"])
    info = {"pairs": sum(len(v) for v in cand.values()), "prompts": len(cand), "unpaired": unpaired, "how": "centred"}
    centre = {p: _stats.mean(v) for p, v in base.items()}
    sides = []
    for groups in (cand, base):
        values = [math.exp(x - centre[p]) for p in groups for x in groups[p]]
        est = _stats.log_median(values) if values else None
        if est is None:
            return None, dict(info, how=None, why="fewer than 4 paired values")
        sides.append(est)
    return _stats.difference(sides[0], sides[1]), info
