# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The interval methods of _stats against simulated data of known truth (seeded, closed form, fast)."""
from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _stats as s

SIMS = 1000
# per-request jitter with a coefficient of variation of 5 % (lognormal)
SIGMA = math.sqrt(math.log(1 + 0.05 ** 2))


@pytest.mark.parametrize("p, df, expected", [
    (0.975, 1, 12.7062), (0.975, 5, 2.5706), (0.975, 10, 2.2281), (0.99, 3, 4.5407), (0.95, 30, 1.6973),
    (0.9, 30, 1.3104), (0.5, 7, 0.0), (0.025, 10, -2.2281),
])
def test_t_quantiles_match_the_table(p, df, expected):
    assert s.t_quantile(p, df) == pytest.approx(expected, abs=2e-4)


def test_t_quantile_edges():
    assert s.t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert s.t_quantile(0.975, 0.5) == math.inf
    assert s.t_quantile(0.975, 10.9) == s.t_quantile(0.975, 10.75)  # rounded down: conservative
    with pytest.raises(ValueError):
        s.t_quantile(1.0, 5)


def test_incomplete_beta_and_t_cdf():
    assert s.betainc(2, 3, 0.4) == pytest.approx(0.5248, abs=1e-4)
    assert s.betainc(1, 1, 0.3) == pytest.approx(0.3)
    assert s.t_cdf(2.2281, 10) == pytest.approx(0.975, abs=1e-5)
    assert s.t_cdf(-2.2281, 10) == pytest.approx(0.025, abs=1e-5)


def test_wilson_known_values():
    assert s.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    low, high = s.wilson(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert s.wilson(0, 0) == (0.0, 1.0)


def test_design_effect_independent_and_identical_blocks():
    rng = random.Random(1)
    independent = [rng.gauss(0, 1) for _draw in range(800)]
    assert s.design_effect(independent, 8) == pytest.approx(1.0, abs=0.3)
    identical = [float(i // 8) for i in range(64)]
    assert s.design_effect(identical, 8) == 8.0
    assert s.design_effect(independent, 1) == 1.0
    assert s.design_effect(independent[:8], 8) == 8.0  # one block: nothing to estimate, assume the worst


def _arm(rng, n, mu, block=1, rho=0.0):
    """n lognormal values around exp(mu); within blocks of ``block`` a shared part of share rho."""
    out = []
    for start in range(0, n, block):
        shared = rng.gauss(0, SIGMA * math.sqrt(rho))
        out.extend(math.exp(mu + shared + rng.gauss(0, SIGMA * math.sqrt(1 - rho))) for _draw in range(min(block, n - start)))
    return out


def _coverage(estimator, nb, nc, block=1, rho=0.0, seed=7):
    rng = random.Random(seed)
    truth = math.log(1.1)
    hits = 0
    for _draw in range(SIMS):
        est = s.difference(estimator(_arm(rng, nc, truth, block, rho), block), estimator(_arm(rng, nb, 0.0, block, rho), block))
        low, high = s.interval(est, 0.95)
        hits += low <= truth <= high
    return hits / float(SIMS)


def _throughput(rates, block):
    # 256 tokens per request; the end-to-end time follows from the per-request rate
    return s.log_ratio_of_means([256.0] * len(rates), [256.0 / r for r in rates], block)


def _median(values, block):
    return s.log_median(values, block)


@pytest.mark.parametrize("nb, nc, block, rho", [
    (72, 24, 1, 0.0),   # the first round against the baseline
    (72, 72, 1, 0.0),   # the whole budget
    (72, 48, 8, 0.0),   # concurrency 8, independent requests
    (72, 48, 8, 0.5),   # concurrency 8, requests of a wave sharing half their jitter
])
def test_throughput_ratio_interval_covers_95_percent(nb, nc, block, rho):
    assert 0.93 <= _coverage(_throughput, nb, nc, block, rho) <= 0.97


@pytest.mark.parametrize("nb, nc", [(72, 24), (72, 72), (32, 32)])
def test_median_ratio_interval_covers_95_percent(nb, nc):
    assert 0.93 <= _coverage(_median, nb, nc) <= 0.97


def test_median_ratio_interval_with_overlapping_requests_is_not_too_narrow():
    # Blocked medians are conservative (k - 1 degrees of freedom): at least nominal, not wildly wide.
    assert 0.95 <= _coverage(_median, 72, 48, block=8, rho=0.5) <= 0.995


def test_wilson_interval_covers_95_percent_of_an_error_rate():
    rng = random.Random(11)
    n, rate = 72, 0.1
    hits = 0
    for _draw in range(SIMS):
        errors = sum(rng.random() < rate for _draw in range(n))
        low, high = s.wilson(errors, n)
        hits += low <= rate <= high
    assert 0.93 <= hits / float(SIMS) <= 0.97


def test_estimators_refuse_what_they_cannot_estimate():
    assert s.log_ratio_of_means([1.0], [1.0]) is None
    assert s.log_ratio_of_means([1.0, 2.0], [1.0]) is None
    assert s.log_ratio_of_means([1.0] * 16, [1.0] * 16, block=8) is None  # two blocks are too few
    assert s.log_median([1.0, 2.0, 3.0]) is None
    exact = s.log_ratio_of_means([2.0] * 4, [1.0] * 4)
    assert exact.value == pytest.approx(math.log(2.0)) and exact.var == 0.0
    zero = s.difference(exact, exact)
    assert zero.var == 0.0 and s.interval(zero) == (0.0, 0.0)
