# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_verdict_paired: pairing by prompt, the stratified estimate, and its coverage against simulated truth.

The simulation is the paired noise model of docs/verdict.md: each prompt has its own time (shared by both
sides: its length, its content), each request a 5 % lognormal jitter; prompts are sent round-robin.
"""
from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _stats, _verdict_paired as vp

SIMS = 1000
SIGMA = math.sqrt(math.log(1 + 0.05 ** 2))
TOKENS = 256


def side(rng, n, factors, speedup=1.0, start=0, sigma=SIGMA):
    """n requests sent round-robin over the prompts (from ``start``): samples as spec_bench returns them."""
    ids = [(start + j) % len(factors) for j in range(n)]
    e2e = [3000.0 * factors[p] / speedup * math.exp(rng.gauss(0, sigma)) for p in ids]
    ttft = [50.0 * factors[p] * math.exp(rng.gauss(0, sigma)) for p in ids]
    return {"e2e_ms": e2e, "output_tokens": [TOKENS] * n, "ttft_ms": ttft,
            "tpot_ms": [e / TOKENS for e in e2e], "prompt": ids}


def prompt_factors(rng, count=8, cv=0.3):
    spread = math.sqrt(math.log(1 + cv ** 2))
    return [math.exp(rng.gauss(0, spread)) for _p in range(count)]


def test_pairing_needs_prompt_indexes_on_both_sides_and_the_same_prompts():
    one = {"e2e_ms": [1.0, 2.0], "prompt": [0, 1]}
    assert vp.pairing(one, dict(one)) == (True, None)
    assert vp.pairing(one, dict(one), "aaaa", "aaaa") == (True, None)
    ok, why = vp.pairing({"e2e_ms": [1.0, 2.0]}, one)
    assert not ok and why == "the baseline's samples name no prompt (measured before the paired design)"
    ok, why = vp.pairing(one, {"e2e_ms": [1.0, 2.0], "prompt": [0]})
    assert not ok and why == "the candidate's samples name the prompt of 1 request(s) out of 2"
    ok, why = vp.pairing(one, dict(one), "aaaa", "bbbb")
    assert not ok and "other prompts" in why
    ok, why = vp.pairing(one, {"e2e_ms": [1.0], "prompt": [5]})
    assert not ok and why == "the two sides share no prompt"
    assert not vp.pairing(one, {"e2e_ms": [1.0, 2.0], "prompt": [0, None]})[0]
    assert not vp.pairing(one, {"e2e_ms": [1.0, 2.0], "prompt": [0, True]})[0]


def test_the_stratified_difference_by_hand():
    # two prompts, two baseline and three candidate requests each; every mean and variance exact
    base = {0: [0.0, 0.2], 1: [1.0, 1.2]}
    assert vp.stratified_difference(base, {0: [0.3, 0.5], 1: [1.1]})[1] == "residuals"  # prompt 1: one request
    est, how = vp.stratified_difference(base, {0: [0.3, 0.5, 0.4], 1: [1.1, 1.3, 1.2]})
    assert how == "stratified"
    # d_0 = 0.4 - 0.1 = 0.3, d_1 = 1.2 - 1.1 = 0.1, weights 1/2
    assert est.value == pytest.approx(0.2)
    # pooled within variances: candidate (0.02 + 0.02) / 4 = 0.01, baseline (0.02 + 0.02) / 2 = 0.02
    # var = 0.01 / 6 + 0.02 * (0.25 / 2 + 0.25 / 2)
    assert est.var == pytest.approx(0.01 / 6 + 0.02 * 0.25)
    parts = [(0.01 / 6, 4), (0.005, 2)]
    assert est.df == pytest.approx(sum(v for v, _d in parts) ** 2 / sum(v * v / d for v, d in parts))


def test_one_candidate_request_per_prompt_takes_the_residuals():
    base = {0: [0.0, 0.2], 1: [1.0, 1.2], 2: [2.0, 2.2]}
    cand = {0: [0.4], 1: [1.1], 2: [2.4]}
    est, how = vp.stratified_difference(base, cand)
    assert how == "residuals" and est.df == 2.0
    # residuals 0.3, 0.0, 0.3 against the baseline means 0.1, 1.1, 2.1
    assert est.value == pytest.approx(0.2)
    assert est.var == pytest.approx(_stats.variance([0.3, 0.0, 0.3]) / 3)
    assert vp.stratified_difference(base, {0: [0.4]}) == (None, "fewer than 2 paired requests")


def test_unpaired_requests_are_dropped_and_counted():
    rng = random.Random(3)
    factors = prompt_factors(rng)
    base, cand = side(rng, 72, factors), side(rng, 24, factors, 1.1)
    # the candidate's requests of prompt 7 failed; the baseline has a prompt the suite no longer has
    keep = [i for i, p in enumerate(cand["prompt"]) if p != 7]
    cand = {k: [v[i] for i in keep] for k, v in cand.items()}
    base["prompt"] = [9 if p == 6 else p for p in base["prompt"]]
    est, info = vp.speedup(base, cand)
    assert info == {"pairs": 18, "prompts": 6, "unpaired": 3, "how": "stratified"}  # prompt 6's, the baseline's now 9
    assert math.exp(est.value) == pytest.approx(1.1, abs=0.05)


def _coverage(make, sims=SIMS, seed=1):
    rng = random.Random(seed)
    hits, widths = 0, []
    for _sim in range(sims):
        est, truth = make(rng)
        low, high = _stats.interval(est, 0.95)
        hits += low <= truth <= high
        widths.append(high - low)
    return hits / float(sims), _stats.mean(widths)


def test_the_paired_speedup_covers_the_truth_and_is_narrower_than_the_unpaired_one():
    """Prompts whose own times spread 30 %, 5 % jitter: 72 baseline, 24 candidate requests over 8 prompts."""
    factors = prompt_factors(random.Random(7))
    truth = math.log(1.1)

    def paired(rng):
        base, cand = side(rng, 72, factors), side(rng, 24, factors, 1.1, start=1)
        return vp.speedup(base, cand)[0], truth

    def unpaired(rng):
        base, cand = side(rng, 72, factors), side(rng, 24, factors, 1.1, start=1)
        ests = [_stats.log_ratio_of_means(s["output_tokens"], [e / 1000.0 for e in s["e2e_ms"]]) for s in (cand, base)]
        # the ratio of throughputs of a balanced suite: the true ratio of means is the speed-up
        return _stats.difference(ests[0], ests[1]), truth

    coverage, width = _coverage(paired)
    assert 0.93 <= coverage <= 0.97
    unpaired_coverage, unpaired_width = _coverage(unpaired)
    assert unpaired_coverage > 0.99  # the prompts' spread counted as noise: too wide
    assert width < unpaired_width / 3


def test_the_first_look_of_four_requests_covers_the_truth():
    """Four candidate requests, four prompts, one each: the residuals (conservative)."""
    factors = prompt_factors(random.Random(8))
    truth = math.log(0.5)

    def probe(rng):
        base, cand = side(rng, 72, factors), side(rng, 4, factors, 0.5)
        est, info = vp.speedup(base, cand)
        assert info["how"] == "residuals" and info["pairs"] == 4
        return est, truth

    coverage, width = _coverage(probe)
    assert coverage >= 0.93
    # a half-speed candidate: the interval is a few per cent wide, far below any bar
    assert math.exp(truth + width / 2) < 0.6


def test_the_centred_ttft_ratio_covers_the_truth():
    factors = prompt_factors(random.Random(9), cv=0.5)

    def ttft(rng):
        base, cand = side(rng, 72, factors), side(rng, 24, factors, 1.1)
        est, info = vp.median_ratio(base, cand, "ttft_ms")
        assert info["pairs"] == 24 and info["how"] == "centred"
        return est, 0.0  # TTFT does not move with the speed-up

    coverage, _width = _coverage(ttft)
    assert 0.93 <= coverage <= 0.995  # Price-Bonett is conservative at small n (docs/verdict.md)
    assert vp.median_ratio({"ttft_ms": [1.0], "prompt": [0]}, {"ttft_ms": [1.0], "prompt": [0]}, "ttft_ms")[0] is None


# ---------------------------------------------------------------- the decision (_verdict.decide) with pairs and the probe

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v  # noqa: E402
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats as vs  # noqa: E402


def level_of(rng, c, n, factors, speedup=1.0, start=0, prompts=True):
    """A spec_bench level (c=1 paired by prompt when ``prompts``)."""
    samples = side(rng, n, factors, speedup, start)
    if not prompts:
        del samples["prompt"]
    e2e = samples["e2e_ms"]
    return {"concurrency": c, "ok": n, "errors": 0, "output_tok_s": c * TOKENS * n / (sum(e2e) / 1000.0),
            "duration_s": sum(e2e) / 1000.0 / c, "tpot_ms": {"median": _stats.median(samples["tpot_ms"])},
            "ttft_ms": {"median": _stats.median(samples["ttft_ms"])}, "samples": samples}


def bench(rng, n, factors, levels=(1, 8), speedup=1.0, prompts=True, digest="abcd"):
    out = {"max_tokens": TOKENS, "levels": [level_of(rng, c, n, factors, speedup, prompts=prompts) for c in levels]}
    if digest:
        out["prompts_sha256"] = digest
    return out


def probe(rng, factors, speedup, n=4):
    return dict(vs.summarize(bench(rng, n, factors, levels=(1,), speedup=speedup)), probe=True)


def test_a_half_speed_candidate_is_rolled_back_by_the_probe_paired_by_prompt():
    rng = random.Random(11)
    factors = prompt_factors(rng)
    base = bench(rng, 72, factors)
    out = v.decide(base, [probe(rng, factors, 0.5)], final=False)
    assert (out["decision"], out["verdict"], out["round"]) == ("rollback", "rollback", 1)
    assert out["requests"] == {1: 4, 8: 0}
    assert out["design"] == {1: {"design": "paired"}}
    speed = [c for c in out["checks"] if c["figure"] == "output_tok_s"]
    assert [(c["level"], c["status"]) for c in speed] == [(1, "fail"), (8, "open")]
    assert speed[0]["design"] == "paired" and speed[0]["pairs"] == {"pairs": 4, "prompts": 4, "unpaired": 0, "how": "residuals"}
    assert 0.45 < out["speedup"] < 0.55 and out["speedup_ci"][1] < 0.6
    assert out["reason"].startswith("c=1 output ") and "cannot be shown >= x1.02" in out["reason"]
    # the lowest level plans the probe's 4 requests and the rounds' 72: the probe spends by 4 of 76
    assert out["alpha_spent"] == pytest.approx(0.05 * (4 / 76.0) ** 2)


def test_after_the_probe_every_level_is_measured_and_the_paired_level_decides_first():
    rng = random.Random(12)
    factors = prompt_factors(rng)
    base = bench(rng, 72, factors)
    rounds = [probe(rng, factors, 1.25)]
    first = v.decide(base, rounds, final=False)
    assert first["decision"] == "continue"
    assert first["next"] == {"requests": 24, "concurrency": [1, 8], "final": False}
    assert "c=8 not measured yet" in first["reason"]
    rounds.append(bench(rng, 24, factors, speedup=1.25))
    out = v.decide(base, rounds, final=False)
    assert (out["round"], out["requests"]) == (2, {1: 28, 8: 24})
    # c=1, paired, is shown in this round; c=8, unpaired, carries the prompts' 30 % spread as noise
    assert {c["status"] for c in out["checks"] if c["level"] == 1} == {"pass"}
    assert (out["decision"], out["next"]["concurrency"]) == ("continue", [8])
    assert out["design"][1] == {"design": "paired"}
    assert out["design"][8]["design"] == "unpaired" and "share batches" in out["design"][8]["why"]
    speed = {c["level"]: c for c in out["checks"] if c["figure"] == "output_tok_s"}
    assert speed[1]["design"] == "paired" and speed[1]["pairs"]["how"] == "stratified"
    assert "design" not in speed[8]


def test_the_looks_after_a_probe_and_their_alpha_add_up_to_alpha():
    rng = random.Random(13)
    factors = prompt_factors(rng, cv=0.0)
    base = bench(rng, 72, factors)
    # x1.03: neither shown nor ruled out for a while; final at the last look whatever happens
    rounds = [probe(rng, factors, 1.045)] + [bench(rng, 24, factors, speedup=1.045) for _k in range(3)]
    seen = []
    for k in range(1, 5):
        out = v.decide(base, rounds[:k], final=False)
        seen.append(out["decision"])
        if out["decision"] != "continue":
            break
        assert out["next"]["requests"] == 24 and out["next"]["final"] == (k == 3)
    # a run to the end has spent exactly alpha at the lowest level (probe, then 28, 52, 76 requests there)
    out = v.decide(base, rounds, final=True)
    if out["round"] == 4:
        assert out["alpha_spent"] == pytest.approx(0.05)
    assert out["verdict"] in ("keep", "rollback", "inconclusive")
    # per level: the spends of a level's looks never exceed alpha
    spends = [vs.alpha_at(v.plan(), a, b, False) for a, b in ((0, 4), (4, 28), (28, 52))]
    assert sum(spends) + vs.alpha_at(v.plan(), 52, 76, True) == pytest.approx(0.05)


def test_old_baselines_without_prompts_are_judged_unpaired_and_say_why():
    rng = random.Random(14)
    factors = prompt_factors(rng, cv=0.0)
    base = bench(rng, 72, factors, prompts=False, digest=None)
    out = v.decide(base, [bench(rng, 24, factors, speedup=1.3)], final=False)
    assert out["decision"] == "keep"
    assert out["design"][1] == {"design": "unpaired",
                                "why": "the baseline's samples name no prompt (measured before the paired design)"}
    assert all("design" not in c for c in out["checks"])
    # other prompts on the two sides: unpaired too
    base = bench(rng, 72, factors, digest="one")
    out = v.decide(base, [bench(rng, 24, factors, speedup=1.3, digest="two")], final=False)
    assert out["design"][1]["design"] == "unpaired" and "other prompts" in out["design"][1]["why"]
    # the plan can turn pairing off
    out = v.decide(bench(rng, 72, factors), [bench(rng, 24, factors, speedup=1.3)], plan_overrides={"paired": False})
    assert out["design"][1] == {"design": "unpaired", "why": "the plan's paired is 0"}


def test_a_candidate_round_without_prompt_indexes_makes_the_level_unpaired_not_invalid():
    rng = random.Random(15)
    factors = prompt_factors(rng, cv=0.0)
    base = bench(rng, 72, factors)
    rounds = [bench(rng, 24, factors, speedup=1.05), bench(rng, 24, factors, speedup=1.05, prompts=False)]
    out = v.decide(base, rounds, final=True)
    assert out["verdict"] != "invalid"
    assert out["design"][1]["design"] == "unpaired"
    merged = vs.summarize(rounds)
    assert "prompt" not in merged["levels"][1]["samples"]


def test_plan_probe_and_paired_settings():
    assert (v.plan()["probe_requests"], v.plan()["paired"]) == (4, 1)
    assert v.plan({"probe_requests": 0, "paired": True})["probe_requests"] == 0
    assert v.plan({"paired": False})["paired"] == 0
    with pytest.raises(v.VerdictError, match="plan setting paired must be a whole number >= 0 and <= 1"):
        v.plan({"paired": 2})
    with pytest.raises(v.VerdictError, match="plan setting probe_requests must be a whole number >= 0"):
        v.plan({"probe_requests": -1})
    with pytest.raises(v.VerdictError, match="plan setting probe_requests must be a number, not a boolean"):
        v.plan({"probe_requests": True})


# ---------------------------------------------------------------- operating characteristic of the paired design

def switch(rng, speedup, h, cv=0.1):
    """One switch: baseline 72 at c=1 paired by prompt, the probe, rounds of 24 up to 72; the candidate's host h."""
    factors = prompt_factors(rng, cv=cv)
    base = bench(rng, 72, factors, levels=(1,))
    rounds = [probe(rng, factors, speedup * h)] + [bench(rng, 24, factors, levels=(1,), speedup=speedup * h) for _k in range(3)]
    return v.decide(base, rounds, final=False)


def test_the_paired_design_keeps_its_error_rates_and_rolls_a_half_speed_candidate_back_after_the_probe():
    rng = random.Random(32)
    marginal = [switch(rng, 1.02, 1.02) for _sim in range(SIMS)]  # at the bar, on a 2 % faster host
    assert sum(o["decision"] == "keep" for o in marginal) / float(SIMS) <= 0.05
    better = [switch(rng, 1.10, 0.98) for _sim in range(SIMS)]  # 2 % slower host
    assert sum(o["decision"] == "keep" for o in better) / float(SIMS) >= 0.95
    half = [switch(rng, 0.5, 1.0) for _sim in range(200)]
    assert all(o["decision"] == "rollback" and o["round"] == 1 and o["requests"] == {1: 4} for o in half)
