# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock engines' prefix cache (the verdict's prefix-cache guardrail) and the fault that collapses it.

As vLLM counts them (vllm:prefix_cache_queries_total / _hits_total: queried and cached prompt tokens) and SGLang
(sglang:prompt_tokens_total, sglang:cached_tokens_total{cache_source}: no series before the first hit): a
prompt seen before hits in whole 16-token blocks but its last token; ``prefix_cache_collapse`` makes nothing hit
(EAGLE/MTP with a hybrid cache: vLLM issues 54360, 53670, SGLang 32459).
"""
from __future__ import annotations

import pytest

from conftest import REPETITIVE, MockGpuHost

BODY = {"max_tokens": 4, "ignore_eos": True, "temperature": 0}
NAMES = {"vllm": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"),
         "sglang": ("sglang:prompt_tokens_total", "sglang:cached_tokens_total")}


@pytest.fixture
def host(tmp_path):
    return MockGpuHost(tmp_path, load_seconds=0.3)


def _counts(engine, make):
    prom = engine.metrics()
    queries, hits = NAMES[make]
    return (sum(v for (name, _labels), v in prom.items() if name == queries),
            sum(v for (name, _labels), v in prom.items() if name == hits))


def _run(engine, make, prompts):
    engine.wait_ready()
    for prompt in prompts:
        code, body = engine.post("/v1/completions", dict(BODY, prompt=prompt))
        assert code == 200, body
    out = _counts(engine, make)
    engine.kill_group()
    return out


@pytest.mark.parametrize("make", ["vllm", "sglang"])
def test_a_prompt_seen_before_hits_the_prefix_cache(host, engines, make):
    extra = ("--enable-metrics",) if make == "sglang" else ()
    queries, hits = _run(getattr(engines, make)(host, *extra), make, [REPETITIVE, REPETITIVE, REPETITIVE])
    per_prompt = queries / 3
    assert per_prompt > 17
    assert hits == 2 * ((per_prompt - 1) // 16) * 16  # the first time misses, the next two hit but the last block


@pytest.mark.parametrize("make", ["vllm", "sglang"])
def test_prefix_cache_collapse_makes_nothing_hit(host, engines, make):
    host.set_faults({"*": {"prefix_cache_collapse": True}})
    extra = ("--enable-metrics",) if make == "sglang" else ()
    queries, hits = _run(getattr(engines, make)(host, *extra), make, [REPETITIVE, REPETITIVE, REPETITIVE])
    assert queries > 0 and hits == 0
