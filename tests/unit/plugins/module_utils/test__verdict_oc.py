# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operating characteristics of the sequential verdict under the noise model of issue 14 (seeded).

Noise model: every request's times carry a lognormal jitter with a coefficient of variation of 5 %
(end-to-end time and TPOT share it, TTFT has its own); the candidate's whole measurement is shifted by a
factor h (the host runs h times faster or slower than while the baseline was measured), |h - 1| <= 2 %,
taken at its worst for the bound under test. Default thresholds and plan; concurrency 1 unless said.
"""
from __future__ import annotations

import math
import random

from ansible_collections.llmops.specdec.plugins.module_utils import _stats
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_explain as e
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats as vs

SIMS = 1000
SIGMA = math.sqrt(math.log(1 + 0.05 ** 2))
TOKENS = 256
PLAN = v.plan()
MIN = v.DEFAULT_THRESHOLDS["min_speedup"]


def level(rng, n, c=1, speedup=1.0, tpot=1.0, ttft=1.0, h=1.0):
    """One spec_bench level of n requests: speedup/tpot/ttft are true ratios against the baseline."""
    e2e, tpots, ttfts = [], [], []
    for _draw in range(n):
        jitter = math.exp(rng.gauss(0, SIGMA))
        e2e.append(3000.0 / speedup / h * jitter)
        tpots.append(11.5 * tpot / h * jitter)
        ttfts.append(50.0 * ttft / h * math.exp(rng.gauss(0, SIGMA)))
    return {"concurrency": c, "ok": n, "errors": 0, "output_tok_s": c * TOKENS * n / (sum(e2e) / 1000.0),
            "duration_s": sum(e2e) / 1000.0 / c, "tpot_ms": {"median": _stats.median(tpots)},
            "ttft_ms": {"median": _stats.median(ttfts)},
            "samples": {"e2e_ms": e2e, "output_tokens": [TOKENS] * n, "tpot_ms": tpots, "ttft_ms": ttfts}}


def bench(rng, n, levels=(1,), **truth):
    return {"max_tokens": TOKENS, "levels": [level(rng, n, c, **truth) for c in levels]}


def run(rng, levels=(1,), **truth):
    """Baseline, then the candidate's planned rounds; the verdict stops at the first decided round."""
    base = bench(rng, PLAN["baseline_requests"], levels)
    rounds, before = [], 0
    for total in PLAN["rounds"]:
        rounds.append(bench(rng, total - before, levels, **truth))
        before = total
    # One call over every planned round returns the verdict of the round where it stopped, exactly as
    # calling after each round would (test__verdict.py checks that equivalence).
    return v.decide(base, rounds, final=False)


def rates(seed, sims=SIMS, **truth):
    rng = random.Random(seed)
    out = {"keep": 0, "rollback": 0, "inconclusive": 0, "first_round_rollback": 0, "rounds": 0}
    for _draw in range(sims):
        verdict = run(rng, **truth)
        out[verdict["verdict"]] += 1
        out["first_round_rollback"] += verdict["verdict"] == "rollback" and verdict["round"] == 1
        out["rounds"] += verdict["round"]
        assert verdict["decision"] in ("keep", "rollback")
    return {k: n / float(sims) for k, n in out.items()}


def test_a_candidate_at_min_speedup_minus_003_is_kept_in_at_most_5_percent():
    # true x1.02, measured on a host 2 % faster than the baseline's: it looks like x1.0404
    out = rates(1, speedup=MIN - 0.03, tpot=1 / (MIN - 0.03), h=1.02)
    assert out["keep"] <= 0.05, out


def test_a_candidate_at_min_speedup_plus_005_is_kept_in_at_least_90_percent():
    # true x1.10, measured on a host 2 % slower: it looks like x1.078
    out = rates(2, speedup=MIN + 0.05, tpot=1 / (MIN + 0.05), h=0.98)
    assert out["keep"] >= 0.90, out


def test_a_clearly_slower_candidate_is_rolled_back_after_the_first_round():
    out = rates(3, speedup=0.9, tpot=1 / 0.9, h=1.02)
    assert out["first_round_rollback"] >= 0.95, out


def test_a_candidate_with_tpot_10_percent_worse_is_rolled_back_after_the_first_round():
    # throughput fine (x1.10), only TPOT worse: the TPOT check alone must catch it
    out = rates(4, speedup=1.10, tpot=1.10, h=0.98)
    assert out["first_round_rollback"] >= 0.95, out


def test_inconclusive_after_the_budget_rolls_back_saying_not_shown_faster_with_the_interval():
    rng = random.Random(5)
    found = None
    for _draw in range(200):
        verdict = run(rng, speedup=1.04, tpot=1 / 1.04, h=1.0)
        if verdict["verdict"] == "inconclusive":
            found = verdict
            break
    assert found is not None
    assert found["decision"] == "rollback" and found["round"] == len(PLAN["rounds"])
    assert found["reason"].startswith("not shown faster after %d request(s) at c=1: c=1 output " % PLAN["max_requests"])
    low, high = found["speedup_ci"]
    assert "x%.2f [%.2f, %.2f]" % (found["speedup"], low, high) in found["reason"]
    line = e.verdict_line(dict(found, host="h", label="ngram k=4", suite="chat", outcome="rolled_back"))
    assert line.startswith("h: ROLLED BACK ngram k=4 on chat (x%.2f [%.2f, %.2f]) - not shown faster" % (found["speedup"], low, high))


def test_early_stopping_does_not_inflate_the_keep_error():
    """At the edge itself (measured x1.0404, the worst case of x1.02 with a 2 % shift) the verdict keeps in
    at most alpha of runs over all its rounds; judging every round at a fixed 95 % would not."""
    rng = random.Random(6)
    edge = math.log(MIN - 0.03) + math.log1p(0.02)
    sequential = naive = 0
    for _draw in range(SIMS):
        base = bench(rng, PLAN["baseline_requests"])
        rounds, before = [], 0
        for total in PLAN["rounds"]:
            rounds.append(bench(rng, total - before, speedup=math.exp(edge), tpot=math.exp(-edge)))
            before = total
        sequential += v.decide(base, rounds, final=False)["verdict"] == "keep"
        for k in range(1, len(rounds) + 1):
            # all rounds so far as one measurement, judged as if it were the only one (full alpha)
            check = v.decide(base, vs.summarize(rounds[:k]), final=True)
            if check["verdict"] == "keep":
                naive += 1
                break
    assert sequential / float(SIMS) <= PLAN["alpha"]
    assert naive / float(SIMS) > PLAN["alpha"]


def test_two_levels_a_batch_loser_is_rolled_back_at_its_level():
    rng = random.Random(8)
    base = bench(rng, PLAN["baseline_requests"], (1, 8))
    cand = {"max_tokens": TOKENS, "levels": [level(rng, 24, 1, speedup=1.3, tpot=1 / 1.3), level(rng, 24, 8, speedup=0.8, tpot=1 / 0.8)]}
    out = v.decide(base, [cand], final=False)
    assert out["verdict"] == "rollback" and out["round"] == 1
    assert out["reason"].startswith("c=8 output ")
    assert [c["level"] for c in out["checks"] if c["status"] == "fail"] == [8, 8]
