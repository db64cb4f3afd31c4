# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_bench's output digests from real streams (sse_server.py): the text each prompt's stream carried, at the
lowest level, whatever the chunking (one token per event without speculation, several with it)."""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _bench_outputs
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import (
    DONE, SSEServer, completion_event, usage_event,
)

PROMPTS = [("reasoning", "p0"), ("coding", "p1"), ("chat", "p2")]


def answer(prompt):
    return "".join(" %s-w%d" % (prompt, i) for i in range(12))


def plan_for(per_chunk, chat=False, seen=None):
    """A stream of the prompt's answer in events of ``per_chunk`` words, with the running usage."""
    def plan(body):
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        if seen is not None:
            seen.append((prompt, body["temperature"]))
        words = [" " + w for w in answer(prompt).split()]
        out = [("head",)]
        for i in range(0, len(words), per_chunk):
            out.append(("chunk", completion_event("".join(words[i:i + per_chunk]), min(i + per_chunk, 12), chat=chat)))
        return out + [("chunk", usage_event(12)), ("chunk", DONE), ("end",), ("close",)]
    return plan


def run(per_chunk, chat=False, seen=None, **kw):
    with SSEServer(plan_for(per_chunk, chat, seen)) as srv:
        cfg = dict(url=srv.url, api="chat" if chat else "completions", model="m", prompts=PROMPTS, max_tokens=12,
                   concurrency=[4, 1], requests=6, warmup=1, metrics="none", timeout=5)
        cfg.update(kw)
        return _bench.run_benchmark(cfg)


def test_each_prompt_gets_the_digest_of_its_greedy_text_at_the_lowest_level():
    seen = []
    bench = run(1, seen=seen, lossless_prompts=2)
    out = bench["outputs"]
    assert out["level"] == 1 and out["block_chars"] == _bench_outputs.BLOCK_CHARS
    assert [row["index"] for row in out["prompts"]] == [0, 1]
    for row in out["prompts"]:
        expected = _bench_outputs.digest(answer(PROMPTS[row["index"]][1]))
        assert (row["sha256"], row["chars"], row["blocks"]) == (expected["sha256"], expected["chars"], expected["blocks"])
        assert row["stable"] is True and row["category"] == PROMPTS[row["index"]][0]
    # the benchmark's requests are greedy: every one of them (warm-up and measured, both levels) asked temperature 0
    assert len(seen) == 2 * (1 + 6) and {t for _p, t in seen} == {0.0}


def test_chunking_does_not_change_the_digest_so_speculation_compares_with_its_baseline():
    one = run(1)["outputs"]
    many = run(5, chat=True, api="chat")["outputs"]
    assert len(one["prompts"]) == 3
    assert [(r["index"], r["sha256"], r["blocks"]) for r in one["prompts"]] == [
        (r["index"], r["sha256"], r["blocks"]) for r in many["prompts"]]


def test_a_run_that_is_not_greedy_or_asks_none_keeps_no_digest():
    assert "not greedy" in run(1, temperature=0.8)["outputs"]["skipped"]
    off = run(1, lossless_prompts=0)["outputs"]
    assert off["skipped"] == "lossless_prompts is 0" and off["prompts"] == []
