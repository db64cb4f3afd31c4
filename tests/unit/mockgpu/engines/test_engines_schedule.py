# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Batch-size schedules in the mock engines (issue 15): K follows the running batch at every step, as
each engine reads its schedule (vLLM's dense lookup, SGLang's adaptive tiers), K=0 is a plain step,
the spec-decode counters move with the K used, and the shipped profile's calibration on the reasoning
suite (README "Batch-size schedules"), asserted on the closed form `timing.expected_speedup`."""
from __future__ import annotations

import json
import os
import random
import threading

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _suites
from conftest import ENGINES, REASONING, chunk_tokens, metric
from mockengine import textmodel, timing, vllm_spec
from mockengine.metrics import Stats
from mockengine.sglang_cli import build_parser, check_speculative

with open(os.path.join(ENGINES, "profile.json")) as f:
    PROFILE = json.load(f)

OPEN = 1048576  # what the collection renders for an open last band (33+)
REASONING_SUITE = _suites.SUITES["reasoning"]
SURE = {"accept_fresh": 1.0, "accept_repetitive": 1.0, "accept_decay": 1.0, "accept_cap": 1.0}  # every draft accepted


def vllm_shape(bands, k, method="eagle3"):
    cfg = {"method": method, "num_speculative_tokens": k, "num_speculative_tokens_per_batch_size": bands}
    if method == "eagle3":
        cfg["model"] = "org/EAGLE3-head"
    spec = vllm_spec.validate(cfg, "org/m", 1, lambda _m: None)
    return timing.SpecShape(method, spec["num_speculative_tokens"],
                            schedule=vllm_spec.schedule(spec, 1, True, lambda _m: None))


def sglang_shape(tmp_path, tiers, *extra, steps=None):
    """An EAGLE3 server with one candidate per tier, as the collection renders a schedule."""
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(dict((str(lo), {"candidate_steps": [k]}) for lo, k in tiers)))
    steps = max(k for _lo, k in tiers) if steps is None else steps
    args = build_parser().parse_args([
        "--model-path", "org/qwen", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
        "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
        str(steps + 1), "--speculative-adaptive", "--speculative-adaptive-config", str(path)] + list(extra))
    return check_speculative(args, lambda _m: None)


def params(method=None, engine="vllm", **override):
    return timing.resolve(PROFILE, engine, method, override)


def decoder(shape, engine="vllm", **override):
    return timing.Decoder(params(shape.method_key if shape else None, engine, **override), shape, REASONING,
                          textmodel.request_rng(REASONING))


# -- which K a batch gets -------------------------------------------------------------------------

def test_vllm_k_is_the_band_holding_the_batch():
    shape = vllm_shape([[1, 8, 3], [9, 16, 1], [17, OPEN, 0]], 3)
    assert [shape.k_for_batch(b) for b in (1, 8, 9, 16, 17, 64, 5000)] == [3, 3, 1, 1, 0, 0, 0]
    # a gap and the tail carry the previous band's k; every k is capped at num_speculative_tokens
    shape = vllm_shape([[1, 4, 5], [9, 16, 1]], 3)
    assert [shape.k_for_batch(b) for b in (1, 4, 5, 8, 9, 100)] == [3, 3, 3, 3, 1, 1]
    assert vllm_shape([[1, 8, 2]], 2).k_for_batch(0) == 2  # an idle engine counts as batch 1
    assert timing.SpecShape("eagle3", 3).k_for_batch(64) == 3  # no schedule: the fixed k


def test_sglang_k_is_the_tier_of_the_batch_padded_to_its_cuda_graph_size(tmp_path):
    shape = sglang_shape(tmp_path, [(1, 3), (9, 1), (17, 0)])
    assert (shape.depth, shape.verify_tokens) == (3, 3)
    assert [shape.k_for_batch(b) for b in (1, 8, 9, 16, 17, 64, 300)] == [3, 3, 1, 1, 0, 0, 0]
    # The speculative capture sizes step by 2 from 10 to 32: batch 9 pads to 10, batch 17 to 18.
    shape = sglang_shape(tmp_path, [(1, 3), (10, 1), (18, 0)])
    assert [shape.k_for_batch(b) for b in (8, 9, 10, 16, 17, 18)] == [3, 1, 1, 1, 0, 0]
    bands = vllm_shape([[1, 9, 3], [10, 17, 1], [18, OPEN, 0]], 3)  # vLLM reads the same bands exactly
    assert [bands.k_for_batch(b) for b in (8, 9, 10, 16, 17, 18)] == [3, 3, 1, 1, 1, 0]
    # Without CUDA graphs there is no padding; a batch below the first tier runs the first tier.
    shape = sglang_shape(tmp_path, [(1, 3), (10, 1), (18, 0)], "--disable-cuda-graph")
    assert [shape.k_for_batch(b) for b in (9, 17)] == [3, 1]
    assert sglang_shape(tmp_path, [(4, 2), (16, 1)]).k_for_batch(1) == 2
    # Past the largest capture size (--cuda-graph-max-bs) a batch is not padded.
    shape = sglang_shape(tmp_path, [(1, 3), (40, 1), (41, 0)], "--cuda-graph-max-bs", "32")
    assert [shape.k_for_batch(b) for b in (32, 33, 40, 41)] == [3, 3, 1, 0]


def test_sglang_default_tiers_adapt_their_steps_to_the_acceptance(tmp_path):
    """Several candidates per tier (SGLang's default config): the tier's EMA of accepted drafts moves it,
    after 10 warm-up verifies and every 5 verifies."""
    args = build_parser().parse_args(["--model-path", "org/qwen", "--speculative-algorithm", "EAGLE3",
                                      "--speculative-draft-model-path", "d", "--speculative-adaptive"])
    shape = check_speculative(args, lambda _m: None)
    tiers = shape.schedule
    assert args.speculative_num_steps == 3 and shape.depth == 7  # buffers for the largest candidate
    assert list(tiers) == [(1, 7, 3), (8, 31, 3), (32, 63, 1), (64, None, 0)]
    for _i in range(30):  # batch 1: every draft accepted -> steps climb 3 -> 5 -> 7
        tiers.observe(1, shape.k_for_batch(1), shape.k_for_batch(1))
    assert shape.k_for_batch(1) == 7 and tiers[0] == (1, 7, 7)
    seen = set()
    for _i in range(8 * 40):  # batch 8 (8 request steps make one verify): nothing accepted -> down to 0
        tiers.observe(8, shape.k_for_batch(8), 0)
        seen.add(shape.k_for_batch(8))
    assert seen == {3, 1, 0} and shape.k_for_batch(8) in (0, 1)  # at 0 it probes 1 now and then, as SGLang does
    assert shape.k_for_batch(1) == 7  # tiers adapt independently


# -- what a step costs and drafts -----------------------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_step_drafts_the_k_of_its_batch_and_costs_that_k(engine, tmp_path):
    shape = (vllm_shape([[1, 8, 3], [9, 16, 1], [17, OPEN, 0]], 3) if engine == "vllm"
             else sglang_shape(tmp_path, [(1, 3), (9, 1), (17, 0)]))
    dec = decoder(shape, engine, **SURE)
    base = decoder(None, engine)
    for batch, k in ((1, 3), (8, 3), (12, 1), (16, 1), (17, 0), (64, 0)):
        seconds, accepted = dec.step(batch)
        assert accepted == k and dec.spec.depth == k
        assert seconds * 1000 == pytest.approx(dec.step_ms(batch, k))
        if k:
            assert seconds > base.step(batch)[0]
    # a K=3 step costs what a fixed k=3 step costs at that batch
    fixed = decoder(timing.SpecShape("eagle3", 3), engine, **SURE)
    assert dec.step_ms(4) == fixed.step_ms(4)


@pytest.mark.parametrize("engine, counted", [("vllm", False), ("sglang", True)])
def test_a_k0_band_is_a_plain_decode_step_that_drafts_nothing(engine, counted, tmp_path):
    shape = (vllm_shape([[1, 8, 3], [9, OPEN, 0]], 3) if engine == "vllm"
             else sglang_shape(tmp_path, [(1, 3), (9, 0)]))
    dec, base = decoder(shape, engine, **SURE), decoder(None, engine)
    for batch in (9, 32, 64):
        assert dec.step(batch) == (base.step(batch)[0], 0)
        assert dec.spec.depth == 0
        # vLLM schedules no draft tokens there, so it counts no draft; SGLang's step is a trivial verify
        assert bool(dec.spec) is counted
    assert dec.expected_tokens_per_step(0) == 1.0
    assert timing.expected_speedup(params(), params("eagle3", engine), shape, REASONING, 32) == 1.0
    dec.step(1)
    assert dec.spec and dec.spec.depth == 3


def test_spec_counters_follow_the_k_used():
    """What server.py records per step (`if dec.spec: record_spec_step(dec.spec.depth, accepted)`)."""
    shape = vllm_shape([[1, 4, 4], [5, 8, 2], [9, OPEN, 0]], 4)
    dec = decoder(shape)
    stats = Stats(shape.depth)
    rng = random.Random(5)
    used = []
    for _i in range(3000):
        batch = rng.choice((1, 3, 6, 8, 12, 40))
        _seconds, accepted = dec.step(batch)
        used.append(shape.k_for_batch(batch))
        if dec.spec:
            stats.record_spec_step(dec.spec.depth, accepted)
    assert len(stats.accepted_per_pos) == 4
    assert stats.drafts == sum(1 for k in used if k)
    assert stats.draft_tokens == sum(used)
    # a position is counted only in steps that drafted it
    for pos, count in enumerate(stats.accepted_per_pos):
        assert count <= sum(1 for k in used if k > pos)
    assert stats.accepted_per_pos[2] <= sum(1 for k in used if k == 4)


def test_vllm_engine_drafts_only_in_its_k_bands(gpu_host, engines):
    """A real mock vLLM: K=3 while one request runs, K=0 (no drafts) while several do."""
    e = engines.vllm(gpu_host, "--speculative-config", json.dumps({
        "method": "eagle3", "model": "org/EAGLE3-head", "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, OPEN, 0]]}), env=gpu_host.env(CUDA_VISIBLE_DEVICES="0"))
    e.wait_ready()
    body = {"prompt": REASONING, "max_tokens": 40, "ignore_eos": True}
    events, complete = e.stream("/v1/completions", body)
    prom = e.metrics()
    drafts = metric(prom, "vllm:spec_decode_num_drafts_total")
    assert complete and drafts == len(chunk_tokens(events)) - 1  # alone: every step drafted
    assert metric(prom, "vllm:spec_decode_num_draft_tokens_total") == 3 * drafts
    results = []

    def one():
        results.append(e.stream("/v1/completions", body))

    threads = [threading.Thread(target=one) for _i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    after = e.metrics()
    steps = sum(len(chunk_tokens(ev)) - 1 for ev, _ok in results)
    new = metric(after, "vllm:spec_decode_num_drafts_total") - drafts
    assert len(results) == 4 and all(ok for _ev, ok in results)
    assert new < steps / 2  # batched, most steps drafted nothing
    assert metric(after, "vllm:spec_decode_num_draft_tokens_total") == 3 * metric(after, "vllm:spec_decode_num_drafts_total")
    per_pos = [metric(after, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=i) for i in range(3)]
    assert sum(per_pos) == metric(after, "vllm:spec_decode_num_accepted_tokens_total")
    assert metric(after, "vllm:generation_tokens_total") == 5 * 40


# -- the shipped calibration on the reasoning suite -----------------------------------------------

def suite_speedup(engine, method, shape, batch):
    base, cand = params(None, engine), params(method, engine)
    return sum(timing.expected_speedup(base, cand, shape, p, batch) for p in REASONING_SUITE) / len(REASONING_SUITE)


def test_the_reasoning_suite_is_fresh_text():
    # every prompt is below the repetition floor, so each sees the method's accept_fresh
    assert all(textmodel.repetitiveness(p) < PROFILE["repetition_floor"] for p in REASONING_SUITE)


@pytest.mark.parametrize("engine, k", [("vllm", 2), ("vllm", 5), ("sglang", 3), ("sglang", 11)])
def test_ngram_loses_at_every_batch_on_reasoning(engine, k):
    shape = timing.SpecShape("ngram", k)
    assert max(suite_speedup(engine, "ngram", shape, n) for n in range(1, 65)) < 1.0


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_eagle3_wins_up_to_a_moderate_batch_and_loses_beyond(engine):
    k3 = timing.SpecShape("eagle3", 3)  # SGLang's auto 3/1/4 and the collection's default k
    assert min(suite_speedup(engine, "eagle3", k3, n) for n in range(1, 9)) > 1.1
    assert suite_speedup(engine, "eagle3", k3, 16) < 1.0
    # beyond 32 every fixed k loses
    assert max(suite_speedup(engine, "eagle3", timing.SpecShape("eagle3", k), n)
               for k in range(1, 6) for n in range(32, 65)) < 1.0
    # on the repetitive suite it stays below n-gram at k=2 (molecule/switch sweep: the winner is not last)
    rep = _suites.SUITES["repetitive"]
    base, ngram, eagle = params(None, engine), params("ngram", engine), params("eagle3", engine)
    ng = sum(timing.expected_speedup(base, ngram, timing.SpecShape("ngram", 2), p, 1) for p in rep) / len(rep)
    ea = sum(timing.expected_speedup(base, eagle, k3, p, 1) for p in rep) / len(rep)
    assert ea < ng - 0.08


def test_eagle3_per_position_acceptance_decays_and_k2_beats_k4_at_8_streams():
    dec = decoder(timing.SpecShape("eagle3", 4))
    reach, run = [], 1.0
    for prob in dec.accept:
        run *= prob
        reach.append(run)
    assert reach == pytest.approx([0.84, 0.60, 0.39, 0.27], abs=0.05)
    # the engine's own per-position counters (accepted per position / drafts) say the same
    stats = Stats(4)
    for _i in range(4000):
        stats.record_spec_step(4, dec.step(8)[1])
    assert [c / stats.drafts for c in stats.accepted_per_pos] == pytest.approx(reach, abs=0.03)
    assert suite_speedup("vllm", "eagle3", timing.SpecShape("eagle3", 2), 8) > \
        suite_speedup("vllm", "eagle3", timing.SpecShape("eagle3", 4), 8)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_schedule_beats_every_fixed_k_over_a_mix_of_batches(engine, tmp_path):
    levels = (1, 8, 32)
    shape = (vllm_shape([[1, 8, 3], [9, 16, 1], [17, OPEN, 0]], 3) if engine == "vllm"
             else sglang_shape(tmp_path, [(1, 3), (9, 1), (17, 0)]))
    scheduled = [suite_speedup(engine, "eagle3", shape, n) for n in levels]
    assert scheduled[-1] == 1.0  # K=0 at 32: the baseline's speed
    for k in range(1, 6):
        fixed = [suite_speedup(engine, "eagle3", timing.SpecShape("eagle3", k), n) for n in levels]
        assert sum(scheduled) / 3 > sum(fixed) / 3 + 0.02, (k, fixed, scheduled)


def test_other_methods_keep_their_calibration():
    """The new knob (compute_ms_per_token) is eagle3's only: n-gram and MTP figures stay (molecule)."""
    assert params("ngram")["compute_ms_per_token"] == params("mtp")["compute_ms_per_token"] == 0.0
    assert timing.expected_speedup(params(), params("mtp"), timing.SpecShape("mtp", 1), REASONING, 1) == \
        pytest.approx(1.21, abs=0.02)
    assert timing.expected_speedup(params(), params("ngram"), timing.SpecShape("ngram", 5), REASONING, 1) == \
        pytest.approx(0.51, abs=0.01)
