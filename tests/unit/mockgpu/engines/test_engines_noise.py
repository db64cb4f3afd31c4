# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock engines' noise and batch knobs (README "Noise", "Batch"): per-request jitter, stragglers, slow
drift, all deterministic per seed and off by default, and a verification cost that grows with the batch."""
from __future__ import annotations

import json
import math
import os
import statistics

import pytest

from conftest import ENGINES, REASONING, REPETITIVE
from mockengine import textmodel, timing

with open(os.path.join(ENGINES, "profile.json")) as f:
    PROFILE = json.load(f)


def params(method=None, **override):
    return timing.resolve(PROFILE, "vllm", method, override)


def scales(p, method=None, count=4000):
    return [timing.request_scale(p, method, i) for i in range(count)]


def test_noise_is_off_by_default_so_the_calibrated_figures_stay():
    p = params()
    assert (p["jitter"], p["straggler_p"], p["drift_per_min"]) == (0.0, 0.0, 0.0)
    d = timing.Decoder(p, None, REASONING, textmodel.request_rng(REASONING))
    assert d.scale == 1.0 and timing.drift_factor(p) == 1.0
    assert d.step(1)[0] == pytest.approx(12.2e-3)
    mtp = params("mtp")
    shape = timing.SpecShape("mtp", 1)
    # the c=1 speed-ups the calibration table shows (README): n-gram x0.51, MTP x1.2 on reasoning (EAGLE-3: test_engines_schedule)
    assert timing.expected_speedup(p, params("ngram"), timing.SpecShape("ngram", 5), REASONING, 1) == pytest.approx(0.51, abs=0.01)
    assert timing.expected_speedup(p, mtp, shape, REASONING, 1) == pytest.approx(1.21, abs=0.02)


def test_jitter_has_the_asked_coefficient_of_variation_and_mean_one():
    values = scales(params(jitter=0.05))
    assert statistics.fmean(values) == pytest.approx(1.0, abs=0.005)
    assert statistics.pstdev(values) / statistics.fmean(values) == pytest.approx(0.05, rel=0.06)


def test_draws_are_deterministic_per_seed_and_method_and_differ_otherwise():
    p = params(jitter=0.05, straggler_p=0.05)
    assert scales(p, "mtp", 50) == scales(p, "mtp", 50)
    assert scales(p, "mtp", 50) != scales(p, "ngram", 50)
    assert scales(p, None, 50) != scales(params(jitter=0.05, straggler_p=0.05, noise_seed=7), None, 50)
    # a decoder draws its number from the process's counter: consecutive requests get different noise
    first = timing.Decoder(p, None, REASONING, textmodel.request_rng(REASONING))
    second = timing.Decoder(p, None, REASONING, textmodel.request_rng(REASONING))
    assert first.scale != second.scale


def test_stragglers_are_occasional_and_as_slow_as_asked():
    values = scales(params(straggler_p=0.02, straggler_factor=3.0))
    slow = [v for v in values if v > 1.0]
    assert set(slow) == {3.0}
    assert len(slow) / len(values) == pytest.approx(0.02, abs=0.006)


def test_drift_slows_the_host_with_wall_clock_time_from_its_epoch():
    p = params(drift_per_min=0.05, drift_epoch=1000.0)
    assert timing.drift_factor(p, now=1000.0) == 1.0
    assert timing.drift_factor(p, now=1000.0 + 120) == pytest.approx(1.10)
    assert timing.drift_factor(params(drift_per_min=-0.5, drift_epoch=1000.0), now=1000.0 + 600) == 0.1
    d = timing.Decoder(params(drift_per_min=0.05, drift_epoch=1.0), None, REASONING, textmodel.request_rng(REASONING))
    assert d.step(1)[0] > 12.2e-3 * 100  # decades since the epoch: far slower


def test_verification_cost_grows_with_the_batch_so_a_single_stream_win_can_lose_batched():
    base = params()
    mtp = timing.SpecShape("mtp", 1)
    # shipped profile: MTP wins at 1 and (barely) at 8; a steeper verification cost makes it lose at 8
    assert timing.expected_speedup(base, params("mtp"), mtp, REASONING, 8) == pytest.approx(1.08, abs=0.02)
    loser = params("mtp", spec_batch_alpha=0.6)
    assert timing.expected_speedup(base, loser, mtp, REASONING, 1) > 1.15
    assert timing.expected_speedup(base, loser, mtp, REASONING, 8) < 0.8
    # spec_batch_alpha equal to batch_alpha keeps the speed-up the same at every batch size
    flat = params("mtp", spec_batch_alpha=0.05)
    assert [round(timing.expected_speedup(base, flat, mtp, REASONING, n), 6) for n in (1, 8, 32)] == [
        round(timing.expected_speedup(base, flat, mtp, REASONING, 1), 6)] * 3
    # n-gram on text it can copy wins less as the batch grows
    ngram = timing.SpecShape("ngram", 5)
    ups = [timing.expected_speedup(base, params("ngram"), ngram, REPETITIVE, n) for n in (1, 8, 32)]
    assert ups == sorted(ups, reverse=True) and ups[0] > 1.5 and math.isfinite(ups[-1])
