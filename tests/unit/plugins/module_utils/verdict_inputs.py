# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark results as spec_bench returns them, for the verdict's tests (test__verdict*.py)."""
from __future__ import annotations

import math
import random


def level(c, tok_s, tpot, ttft, errors=0, completed=10):
    # The shape of one entry of spec_bench's bench.levels (RETURN documents it).
    return {"concurrency": c, "output_tok_s": tok_s, "tpot_ms": {"median": tpot},
            "ttft_ms": {"median": ttft}, "errors": errors, "ok": completed}


def sampled(c, n, e2e_ms=3000.0, tpot=11.5, ttft=50.0, tokens=256, seed=0, jitter=0.05):
    """A spec_bench level with per-request samples (deterministic jitter)."""
    rng = random.Random("%s-%s-%s-%s" % (c, n, e2e_ms, seed))
    js = [math.exp(rng.gauss(0, jitter)) for _draw in range(n)]
    e2e = [e2e_ms * j for j in js]
    return {"concurrency": c, "ok": n, "errors": 0, "output_tok_s": c * tokens * n / (sum(e2e) / 1000.0),
            "duration_s": sum(e2e) / 1000.0 / c, "tpot_ms": {"median": tpot}, "ttft_ms": {"median": ttft},
            "samples": {"e2e_ms": e2e, "output_tokens": [tokens] * n, "tpot_ms": [tpot * j for j in js],
                        "ttft_ms": [ttft * math.exp(rng.gauss(0, jitter)) for _draw in range(n)]},
            "samples_truncated": False}


def run_of(*levels, max_tokens=256):
    return {"max_tokens": max_tokens, "levels": list(levels)}


def marginal_rounds(n_rounds, seed=3):
    # x1.05 with 5 % jitter: not decided in one round of 24
    return [run_of(sampled(1, 24, e2e_ms=3000.0 / 1.05, tpot=11.5 / 1.05, seed=seed + k),
                   sampled(8, 24, e2e_ms=3500.0 / 1.05, tpot=11.5 / 1.05, seed=seed + k)) for k in range(n_rounds)]
