# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small statistics for the verdict: pure Python (stdlib only), closed form, no randomness.

Everything here works on the log scale, where a ratio of two measurements is a difference. An
estimate is an :class:`Estimate`: the value, its variance and the degrees of freedom of that variance,
so two sides combine into a ratio with Welch's degrees of freedom and a Student t quantile.

- :func:`log_ratio_of_means`: log of sum(num) / sum(den) (output tokens over end-to-end seconds: the
  throughput of a side), with the delta-method (linearisation) variance of a ratio estimator.
- :func:`log_median`: log of the median, with the distribution-free variance of Price and Bonett
  (2002): the width of the order-statistic interval around the median over its exact binomial
  coverage.
- when requests overlap (concurrency c above 1), consecutive requests in start order form blocks of c
  (a closed loop starts them in waves that share batches): the ratio estimator takes the
  cluster-robust variance over blocks, the median Kish's design effect from a one-way ANOVA over
  blocks (:func:`design_effect`); both then have k - 1 degrees of freedom for k blocks, and need k >= 3.
- :func:`wilson`: Wilson's score interval for a proportion (the error rate).

docs/verdict.md says why these and what their coverage is (tests/unit/plugins/module_utils/test__stats.py
measures it).
"""
from __future__ import annotations

import math
from collections import namedtuple
from functools import lru_cache
from statistics import NormalDist

_NORMAL = NormalDist()

# value: the estimate on the log scale; var: its variance; df: degrees of freedom of var (inf: known)
Estimate = namedtuple("Estimate", "value var df")


def z_quantile(p):
    """The standard normal quantile."""
    return _NORMAL.inv_cdf(p)


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a, b, x):
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """Student t distribution function."""
    if math.isinf(df):
        return _NORMAL.cdf(t)
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_pdf(t, df):
    return math.exp(math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2.0 * math.log1p(t * t / df))


@lru_cache(maxsize=8192)
def _t_quantile(p, df):
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -_t_quantile(1.0 - p, df)
    # Cornish-Fisher start (Abramowitz and Stegun 26.7.5), then Newton on the exact distribution function.
    z = z_quantile(p)
    t = z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
    if df < 3:
        t = math.tan(math.pi * (p - 0.5)) if df < 1.5 else (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    for _iteration in range(50):
        step = (t_cdf(t, df) - p) / _t_pdf(t, df)
        t -= step
        if abs(step) < 1e-12 * max(1.0, abs(t)):
            break
    return t


def t_quantile(p, df):
    """Student t quantile. df is rounded down (to a quarter below 30, a whole number below 200, then tens),
    which only widens an interval, so repeated calls hit a cache."""
    if not 0.0 < p < 1.0:
        raise ValueError("probability must be in (0, 1), got %r" % p)
    if df is None or df < 1.0:
        return math.inf if p > 0.5 else -math.inf
    if math.isinf(df) or df >= 1e6:
        return z_quantile(p)
    if df < 30:
        df = math.floor(df * 4.0) / 4.0
    elif df < 200:
        df = float(math.floor(df))
    else:
        df = float(math.floor(df / 10.0) * 10)
    return _t_quantile(round(p, 12), df)


def mean(values):
    return math.fsum(values) / len(values)


def variance(values):
    """Sample variance (n - 1)."""
    n = len(values)
    if n < 2:
        return 0.0
    m = mean(values)
    return math.fsum((v - m) ** 2 for v in values) / (n - 1)


def median(values):
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def finite_or_none(value):
    """A finite float, or None (missing, boolean, text, inf or NaN): for figures read back from JSON."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def design_effect(values, block):
    """Kish's design effect 1 + (m - 1) * rho for blocks of ``block`` consecutive values.

    rho is the intra-block correlation from a one-way ANOVA over the complete blocks, clamped so the
    effect stays within [1, m]. With fewer than two complete blocks nothing can be estimated, and the
    worst case (m: every block one observation) is assumed.
    """
    m = int(block or 1)
    if m <= 1:
        return 1.0
    k = len(values) // m
    if k < 2:
        return float(m)
    blocks = [values[i * m:(i + 1) * m] for i in range(k)]
    means = [mean(b) for b in blocks]
    grand = mean(means)
    msb = m * math.fsum((bm - grand) ** 2 for bm in means) / (k - 1)
    msw = math.fsum((v - bm) ** 2 for b, bm in zip(blocks, means) for v in b) / (k * (m - 1))
    denom = msb + (m - 1) * msw
    if denom <= 0:
        return 1.0
    rho = (msb - msw) / denom
    return min(float(m), max(1.0, 1.0 + (m - 1) * rho))


def _blocks(n, block):
    """Number of blocks of ``block`` consecutive requests among n (the last one may be partial)."""
    m = max(1, int(block or 1))
    return (n + m - 1) // m


def log_ratio_of_means(num, den, block=1):
    """log(sum(num) / sum(den)) with the linearised (cluster-robust) variance of a ratio estimator.

    For throughput: num are output tokens, den end-to-end seconds of the same requests. With residuals
    d = num - R den (R the ratio), the variance of log R is k/(k-1) sum_j D_j^2 / sum(num)^2, D_j the
    sum of d over block j of ``block`` consecutive requests, k the number of blocks; df = k - 1. With
    block 1 this is the textbook s2(d) / (n mean(num)^2).
    """
    n = len(num)
    if n != len(den) or n < 2:
        return None
    total_num, total_den = math.fsum(num), math.fsum(den)
    if total_num <= 0 or total_den <= 0:
        return None
    ratio = total_num / total_den
    m = max(1, int(block or 1))
    k = _blocks(n, m)
    if m == 1:
        sums = [y - ratio * x for y, x in zip(num, den)]
    elif k < 3:
        return None
    else:
        sums = [math.fsum(y - ratio * x for y, x in zip(num[j * m:(j + 1) * m], den[j * m:(j + 1) * m])) for j in range(k)]
    var = k / (k - 1.0) * math.fsum(d * d for d in sums) / (total_num * total_num)
    return Estimate(math.log(ratio), var, k - 1.0)


def _binom_cdf_half(k, n):
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return math.fsum(math.comb(n, i) for i in range(0, k + 1)) / 2.0 ** n


def log_median(values, block=1):
    """log of the median of positive values, with the Price-Bonett variance.

    c = round(n/2 - sqrt(n)) (at least 1); the order statistics y(c) and y(n-c+1) bound the median
    with the exact binomial coverage p; the variance of the log median is
    ((log y(n-c+1) - log y(c)) / (2 z_{(1+p)/2}))^2, inflated by the design effect of the logs.
    """
    logs = [math.log(v) for v in values]
    n = len(logs)
    if n < 4:
        return None
    s = sorted(logs)
    c = max(1, int(round(n / 2.0 - math.sqrt(n))))
    coverage = 1.0 - 2.0 * _binom_cdf_half(c - 1, n)
    z = z_quantile(0.5 + coverage / 2.0)
    var = ((s[n - c] - s[c - 1]) / (2.0 * z)) ** 2
    m = max(1, int(block or 1))
    if m == 1:
        return Estimate(median(logs), var, math.inf)
    k = _blocks(n, m)
    if k < 3:
        return None
    return Estimate(median(logs), var * design_effect(logs, m), k - 1.0)


def difference(a, b):
    """a - b of two independent estimates, with Welch-Satterthwaite degrees of freedom."""
    var = a.var + b.var
    if var <= 0:
        return Estimate(a.value - b.value, 0.0, math.inf)
    parts = [(e.var * e.var / e.df) for e in (a, b) if e.var > 0 and not math.isinf(e.df)]
    df = (var * var / math.fsum(parts)) if parts else math.inf
    return Estimate(a.value - b.value, var, df)


def bound(est, side, level):
    """One-sided bound of an estimate at confidence ``level``: side 'lower' or 'upper'."""
    if est.var <= 0:
        return est.value
    half = t_quantile(level, est.df) * math.sqrt(est.var)
    return est.value - half if side == "lower" else est.value + half


def interval(est, level=0.95):
    """Two-sided interval (lower, upper) on the log scale."""
    tail = 0.5 + level / 2.0
    return bound(est, "lower", tail), bound(est, "upper", tail)


def wilson(k, n, level=0.95):
    """Wilson's score interval for k successes in n trials, as (low, high) proportions."""
    if n <= 0:
        return 0.0, 1.0
    z = z_quantile(0.5 + level / 2.0)
    p = k / float(n)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
