# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tuner's policy: the grid from real verdicts, the choice per level, the next K, the schedule."""
from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _report, _spec
from ansible_collections.llmops.specdec.plugins.module_utils import _tune as t
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v

SIGMA = math.sqrt(math.log(1 + 0.05 ** 2))
TOKENS = 256
REQUEST = {"method": "eagle3", "draft_model": "org/eagle3-head"}


def level(rng, c, n, speedup=1.0):
    """n requests at concurrency c with 5 % per-request jitter (the verdict's noise model)."""
    e2e = [3000.0 / speedup * math.exp(rng.gauss(0, SIGMA)) for _i in range(n)]
    tpots = [x / 260.0 for x in e2e]
    ttfts = [50.0 * math.exp(rng.gauss(0, SIGMA)) for _i in range(n)]
    return {"concurrency": c, "ok": n, "errors": 0, "duration_s": sum(e2e) / 1000.0 / c,
            "output_tok_s": TOKENS * n * c / (sum(e2e) / 1000.0), "tpot_ms": {"median": sorted(tpots)[n // 2]},
            "ttft_ms": {"median": sorted(ttfts)[n // 2]},
            "samples": {"e2e_ms": e2e, "output_tokens": [TOKENS] * n, "tpot_ms": tpots, "ttft_ms": ttfts}}


def bench(rng, n, truth):
    return {"max_tokens": TOKENS, "levels": [level(rng, c, n, s) for c, s in sorted(truth.items())]}


def try_k(rng, base, k, truth, thresholds=None):
    """One K loaded and judged as sweep_try.yml does it: rounds until the verdict, its checks kept."""
    plan = v.plan()
    rounds, before = [], 0
    for total in plan["rounds"]:
        rounds.append(bench(rng, total - before, truth))
        before = total
    out = v.decide(base, rounds, thresholds, final=False)
    spec = dict(REQUEST, num_speculative_tokens=k)
    return {"spec": spec, "decision": out["decision"], "checks": out["checks"], "label": "k=%d" % k}


# True speed-up per K per level: K=3 best single-stream, K=1 enough at 8, nothing wins at 32.
TRUTH = {1: {1: 1.25, 8: 1.15, 32: 0.85}, 2: {1: 1.35, 8: 1.12, 32: 0.80}, 3: {1: 1.45, 8: 1.05, 32: 0.75},
         4: {1: 1.46, 8: 0.95, 32: 0.70}, 5: {1: 1.40, 8: 0.90, 32: 0.65}}


def test_settings_defaults_and_refusals():
    assert t.settings() == {"k": [1, 2, 3, 4, 5], "max_loads": 5, "coarse": True}
    assert t.settings({"k": [4, 0, 2, 2]})["k"] == [2, 4]
    for bad, word in (({"k": [0]}, "at least one K"), ({"k": [17]}, "between 0 and 16"), ({"max_loads": 1}, "between 2"),
                      ({"k": "1,2"}, "list"), ({"coarse": "yes"}, "true or false"), ({"kk": 1}, "unknown tune setting"),
                      ({"k": [True]}, "whole number")):
        with pytest.raises(t.TuneError, match=word):
            t.settings(bad)


def test_the_choice_prefers_the_smaller_k_within_noise_and_zero_on_a_tie_with_the_baseline():
    grid = {1: {1: {"ratio": 1.30, "ci": [1.25, 1.35]}, 8: {"ratio": 1.02, "ci": [0.98, 1.06]}},
            2: {1: {"ratio": 1.34, "ci": [1.29, 1.39]}, 8: {"ratio": 0.97, "ci": [0.93, 1.01]}},
            4: {1: {"ratio": 1.50, "ci": [1.45, 1.55]}, 8: {"ratio": 0.90, "ci": [0.86, 0.94]}}}
    choice = t.choose(grid, [1, 8])
    # At c=1 K=4 is best and its lower bound 1.45 is above K=2's upper 1.39: K=4.
    assert choice[1]["k"] == 4 and choice[1]["best_k"] == 4
    # At c=8 K=1 is best at x1.02 but its interval reaches 1.0: no drafting.
    assert choice[8]["k"] == 0 and choice[8]["best_k"] == 1
    grid[2][1] = {"ratio": 1.48, "ci": [1.43, 1.53]}
    assert t.choose(grid, [1, 8])[1]["k"] == 2  # within noise of K=4: the smaller K


def test_bands_lie_at_the_geometric_middle_snapped_for_sglang_and_merge():
    choice = {1: {"k": 3}, 8: {"k": 1}, 32: {"k": 0}}
    out = t.schedule(choice, "vllm")
    assert out["text"] == "1-2:3,3-16:1,17+:0" and out["speculate"] and out["no_draft_levels"] == [32]
    # The canonical form _spec takes, for both engines.
    assert _spec.normalize(dict(REQUEST, schedule=out["schedule"]), "vllm")["num_speculative_tokens"] == 3
    choice = {1: {"k": 2}, 12: {"k": 2}, 48: {"k": 1}}
    # sqrt(12 * 48) = 24: a CUDA-graph size; sqrt(12) = 3.46 -> 3, merged with the next band anyway.
    assert t.schedule(choice, "sglang")["text"] == "1-24:2,25+:1"
    assert t.schedule({1: {"k": 2}, 90: {"k": 0}}, "sglang")["text"] == "1-8:2,9+:0"  # sqrt(90) = 9.49 -> 8 on SGLang
    assert t.schedule({1: {"k": 2}, 90: {"k": 0}}, "vllm")["text"] == "1-9:2,10+:0"
    same = t.schedule({1: {"k": 2}, 8: {"k": 2}}, "vllm")
    assert same["schedule"] is None and same["fixed_k"] == 2
    none = t.schedule({1: {"k": 0}, 8: {"k": 0}}, "vllm")
    assert not none["speculate"]


def test_a_coarse_pass_then_the_neighbours_of_each_choice_within_the_budget():
    tune = t.settings({"max_loads": 6})
    grid = {}
    order = []
    fake = {1: 1.2, 2: 1.3, 3: 1.4, 4: 1.35, 5: 1.1}
    while True:
        k = t.next_k(tune, grid, [1])
        if k is None:
            break
        order.append(k)
        grid[k] = {1: {"ratio": fake[k], "ci": [fake[k] - 0.02, fake[k] + 0.02]}}
    # 1, 3, 5 first; K=3 is chosen: its neighbours 2 and 4; then the budget (6 loads, 1 kept) is spent.
    assert order == [1, 3, 5, 2, 4]
    assert len(order) == tune["max_loads"] - 1
    assert t.next_k(t.settings({"max_loads": 3}), {}, [1]) == 1
    assert t.next_k(t.settings({"max_loads": 3}), {1: {}, 3: {}}, [1]) is None  # one load left: the final
    assert t.next_k(t.settings({"coarse": False, "k": [1, 2]}), {1: {}}, [1]) == 2


def test_a_failed_try_counts_as_tried_and_is_never_chosen():
    tried = [{"spec": dict(REQUEST, num_speculative_tokens=1), "decision": "failed", "checks": []}]
    grid = t.cells(tried)
    assert grid == {1: {}}
    assert t.choose(grid, [1, 8])[1]["k"] == 0


def test_the_grid_from_real_verdicts_implies_the_true_schedule():
    rng = random.Random(7)
    base = bench(rng, 72, {1: 1.0, 8: 1.0, 32: 1.0})
    tune = t.settings({"max_loads": 6})
    tried = []
    while True:
        k = t.next_k(tune, t.cells(t.fixed_k(tried)), [1, 8, 32])
        if k is None:
            break
        tried.append(try_k(rng, base, k, TRUTH[k]))
    picked = t.pick(tried, [1, 8, 32], "vllm", REQUEST)
    # At c=1 K=3 and K=4 are within noise (1.45 / 1.46): the smaller; K=1 at 8; no drafting at 32.
    assert picked["choice"]["1"]["k"] == 3
    assert picked["choice"]["8"]["k"] == 1
    assert picked["choice"]["32"]["k"] == 0
    assert picked["schedule_text"] == "1-2:3,3-16:1,17+:0"
    assert picked["final"]["schedule"][0] == {"batch": [1, 2], "k": 3}
    assert picked["thresholds_by_level"] == {"32": t.NO_DRAFT_BARS}
    # Every loser cost one round at most where it clearly lost; the budget held.
    assert len(tried) <= tune["max_loads"] - 1


def test_the_final_verdict_asks_only_not_slower_where_the_schedule_does_not_draft():
    rng = random.Random(11)
    truth = {1: 1.40, 8: 1.12, 32: 1.0}
    base = bench(rng, 72, {1: 1.0, 8: 1.0, 32: 1.0})
    strict = try_k(rng, base, 3, truth)
    assert strict["decision"] == "rollback"  # x1.00 at 32 can never clear min_speedup 1.05
    relaxed = try_k(rng, base, 3, truth, {"by_level": {"32": t.NO_DRAFT_BARS}})
    assert relaxed["decision"] == "keep"
    slower = try_k(rng, base, 3, {1: 1.40, 8: 1.12, 32: 0.85}, {"by_level": {32: t.NO_DRAFT_BARS}})
    assert slower["decision"] == "rollback"


def test_thresholds_by_level_are_validated():
    assert v.at_level(v.thresholds({"by_level": {"8": {"min_speedup": 1.0}}}), 8)["min_speedup"] == 1.0
    assert v.at_level(v.thresholds({"by_level": {"8": {"min_speedup": 1.0}}}), 1)["min_speedup"] == 1.05
    for bad, word in (({"by_level": {"x": {}}}, "concurrency"), ({"by_level": {"0": {}}}, ">= 1"),
                      ({"by_level": {"8": {"min_speed": 1}}}, "unknown threshold"),
                      ({"by_level": {"8": 1.0}}, "mapping"), ({"by_level": [1]}, "mapping")):
        with pytest.raises(v.VerdictError, match=word):
            v.thresholds(bad)


def test_requests_refuse_a_method_without_a_schedule_before_any_load():
    reqs = t.requests(REQUEST, t.settings({"k": [1, 3]}), "vllm")
    assert [r["num_speculative_tokens"] for r in reqs] == [1, 3]
    with pytest.raises(t.TuneError, match="cannot tune ngram on sglang: schedule is not possible"):
        t.requests({"method": "ngram"}, t.settings(), "sglang")
    with pytest.raises(t.TuneError, match="leave both out"):
        t.requests(dict(REQUEST, num_speculative_tokens=2), t.settings(), "vllm")


def test_markdown_and_heatmap_of_a_tuning_record():
    rng = random.Random(3)
    base = bench(rng, 72, {1: 1.0, 8: 1.0})
    tried = [try_k(rng, base, k, {1: TRUTH[k][1], 8: TRUTH[k][8]}) for k in (1, 3)]
    picked = t.pick(tried, [1, 8], "vllm", REQUEST)
    rec = {"host": "gpu1", "outcome": "kept", "tune": {
        "method": "eagle3", "levels": picked["levels"], "grid": picked["grid"], "choice": picked["choice"],
        "schedule_text": picked["schedule_text"], "loads": 3, "max_loads": 5, "restarts": 3}}
    text = t.markdown([rec, {"host": "gpu2"}])
    assert "## Tuning eagle3 on gpu1" in text and "| 0 (baseline) | x1.00 | x1.00 |" in text
    assert "Chosen: %s; engine loads 3 (budget 5)" % picked["schedule_text"] in text
    assert t.markdown([{"host": "gpu2"}]) == ""
    if _report.FIGURE.get() is None:
        pytest.skip("matplotlib is not installed")
    png = t.heatmap_png(rec)
    assert png.startswith(b"\x89PNG")
