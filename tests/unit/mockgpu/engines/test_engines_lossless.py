# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Greedy outputs of the mock engines: lossless under speculation, as a real engine's; and the diverge_after fault.

A real vLLM writes the same greedy text with n-gram speculation as without (tests/real: the collection's own
lossless check measured 0 divergence). The mock's text once came from the stream its decoder drew acceptance
from, so speculation changed it; now token i is the same whatever the chunking, and only the fault makes a
candidate diverge.
"""
from __future__ import annotations

import pytest

from conftest import REASONING, REPETITIVE, MockGpuHost

NGRAM = ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}')
BODY = {"max_tokens": 40, "ignore_eos": True, "temperature": 0,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


@pytest.fixture
def host(tmp_path):
    return MockGpuHost(tmp_path, load_seconds=0.3)


def _texts(engine, prompts):
    engine.wait_ready()
    out = []
    for prompt in prompts:
        events, complete = engine.stream("/v1/completions", dict(BODY, prompt=prompt))
        assert complete
        out.append(("".join(ev["choices"][0]["text"] for _t, ev in events if ev != "[DONE]" and ev["choices"]),
                    sum(1 for _t, ev in events if ev != "[DONE]" and ev["choices"])))
    engine.kill_group()
    return out


@pytest.mark.parametrize("make", ["vllm", "sglang"])
def test_speculation_is_lossless_in_the_mock(host, engines, make):
    spec = NGRAM if make == "vllm" else ("--speculative-algorithm", "NGRAM")
    base = _texts(getattr(engines, make)(host), [REASONING, REPETITIVE])
    cand = _texts(getattr(engines, make)(host, *spec), [REASONING, REPETITIVE])
    assert [t for t, _n in cand] == [t for t, _n in base]
    # the repetitive prompt really was speculated: fewer chunks than tokens (several tokens per step)
    assert cand[1][1] < base[1][1] == 40


def test_diverge_after_changes_every_token_from_n_on(host, engines):
    host.set_faults({"ngram": {"diverge_after": 7}})
    base = _texts(engines.vllm(host), [REPETITIVE])[0][0].split()
    cand = _texts(engines.vllm(host, *NGRAM), [REPETITIVE])[0][0].split()
    assert len(base) == len(cand) == 40
    assert cand[:7] == base[:7]
    assert all(a != b for a, b in zip(cand[7:], base[7:]))


def test_diverge_share_picks_some_prompts(host, engines):
    prompts = ["prompt number %d: tell me about item %d" % (i, i) for i in range(12)]
    host.set_faults({"ngram": {"diverge_after": 0, "diverge_share": 0.5}})
    base = _texts(engines.vllm(host), prompts)
    cand = _texts(engines.vllm(host, *NGRAM), prompts)
    differ = [i for i in range(len(prompts)) if base[i][0] != cand[i][0]]
    # some prompts diverge and some do not (the share is picked by the prompt's hash: 12 prompts, p=0.5 each)
    assert 0 < len(differ) < len(prompts), differ
