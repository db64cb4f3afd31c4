# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The timing model in isolation: deterministic per prompt, batch slow-down, acceptance from the text."""
from __future__ import annotations

import json
import os

import pytest

from conftest import ENGINES, REASONING, REPETITIVE
from mockengine import textmodel, timing

with open(os.path.join(ENGINES, "profile.json")) as f:
    PROFILE = json.load(f)


def decoder(method, depth, text, engine="vllm", override=None, verify=None, topk=1):
    params = timing.resolve(PROFILE, engine, method, override)
    spec = timing.SpecShape(method, depth, verify, topk) if method else None
    return timing.Decoder(params, spec, text, textmodel.request_rng(text))


def test_prompt_repetitiveness_is_measured_from_the_text():
    assert textmodel.repetitiveness(REASONING) < 0.1
    assert textmodel.repetitiveness(REPETITIVE) > 0.8
    assert textmodel.repetitiveness("one two") == 0.0


def test_same_prompt_same_steps():
    d1, d2 = decoder("ngram", 5, REPETITIVE), decoder("ngram", 5, REPETITIVE)
    assert [d1.step(1) for _i in range(50)] == [d2.step(1) for _i in range(50)]


def test_step_time_grows_with_the_batch():
    base = decoder(None, 0, REASONING)
    one, four = base.step(1)[0], base.step(4)[0]
    assert one == pytest.approx(12.2e-3)
    assert four == pytest.approx(12.2e-3 * (1 + 3 * 0.05))
    spec = decoder("ngram", 5, REASONING)
    overhead_1 = spec.step(1)[0] - one
    overhead_4 = spec.step(4)[0] - four
    assert overhead_4 == pytest.approx(overhead_1 * (1 + 3 * 0.15))  # verification costs more in a batch


def test_acceptance_depends_on_method_and_text():
    assert decoder("ngram", 5, REASONING).expected_tokens_per_step() < 1.1
    assert decoder("ngram", 5, REPETITIVE).expected_tokens_per_step() > 3.5
    eagle = decoder("eagle3", 3, REASONING)
    assert eagle.accept == sorted(eagle.accept, reverse=True) and eagle.accept[0] == pytest.approx(0.84)
    # EAGLE-3's head reads the target's hidden states: its acceptance does not depend on the prompt repeating itself
    assert decoder("eagle3", 3, REPETITIVE).accept == eagle.accept
    assert decoder("eagle3", 5, REASONING, topk=4).accept[0] > decoder("eagle3", 5, REASONING).accept[0]


def test_fault_profile_overrides_win():
    d = decoder("ngram", 5, REPETITIVE, override={"accept_fresh": 0, "accept_repetitive": 0, "step_ms": 20})
    steps = [d.step(1) for _i in range(20)]
    assert all(acc == 0 for _seconds, acc in steps)
    assert steps[0][0] == pytest.approx((20 + 1.0 + 2.4 * 5) / 1000)
    sg = timing.resolve(PROFILE, "sglang", "ngram")
    assert sg["verify_ms_per_token"] == 1.0 and timing.resolve(PROFILE, "vllm", "ngram")["verify_ms_per_token"] == 2.4


def test_collapse_above_rejects_every_draft_past_the_batch_size_and_still_pays_for_them():
    """Fault collapse_above (issue 32, item 4): a speculation that collapses past a batch size (vLLM issue 49548)."""
    params = timing.resolve(PROFILE, "vllm", "ngram")
    spec = timing.SpecShape("ngram", 5)
    plain = timing.Decoder(params, spec, REPETITIVE, textmodel.request_rng(REPETITIVE))
    faulty = timing.Decoder(params, spec, REPETITIVE, textmodel.request_rng(REPETITIVE), collapse_above=8)
    # at and below the batch size the fault changes nothing: the same draws, the same acceptance
    assert [faulty.step(n) for n in (1, 8, 8, 4)] == [plain.step(n) for n in (1, 8, 8, 4)]
    above = [faulty.step(9) for _i in range(20)] + [faulty.step(32) for _i in range(20)]
    assert {accepted for _s, accepted in above} == {0}
    # the drafting and verification cost stays: a step costs what a speculative one costs, for one token
    assert above[0][0] == pytest.approx(plain.step_ms(9) / 1000.0)
    assert sum(a for _s, a in (plain.step(9) for _i in range(20))) > 0
