# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock engines serve like the real ones: readiness, OpenAI API with SSE and usage, metrics,
speculative steps as multi-token chunks with consistent counters, pacing, process tree and memory."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from conftest import (REASONING, REPETITIVE, TOTAL_MIB, Engine, MockGpuHost, alive, argv0, children,
                      chunk_tokens, comm, metric, wait_until)

GPU_HOLD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))), "mockgpu", "bin", "gpu-hold")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    return MockGpuHost(tmp_path_factory.mktemp("serving"), load_seconds=0.8, profile={"eos_tokens": [20, 60]})


@pytest.fixture(scope="module")
def vllm_ngram(host):
    """TP=2 vLLM with n-gram speculation given as dotted keys; records what a probe saw while loading."""
    e = Engine.vllm(host, "-tp", "2", "--served-model-name", "mock-a", "--max-model-len", "4096",
                    "--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "5",
                    env=host.env(CUDA_VISIBLE_DEVICES="0,1"))
    e.load_states = e.wait_ready()
    yield e
    e.kill_group()


@pytest.fixture(scope="module")
def sglang_eagle(host):
    e = Engine.sglang(host, "--tp", "2", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                      "org/eagle3-head", "--enable-metrics", env=host.env(CUDA_VISIBLE_DEVICES="2,3"))
    e.load_states = e.wait_ready()
    yield e
    e.kill_group()


def test_vllm_refuses_connections_while_loading_then_is_healthy(vllm_ngram):
    assert vllm_ngram.load_states[0] == "refused"
    assert vllm_ngram.load_states[-1] == 200
    assert 503 not in vllm_ngram.load_states  # it never listens before it is ready
    assert "Application startup complete." in vllm_ngram.log()


def test_sglang_answers_503_while_loading_then_200(sglang_eagle):
    # (refused only for the instant before the interpreter has started and bound)
    assert [s for s in sglang_eagle.load_states if s != "refused"] == [503, 200]
    assert sglang_eagle.status("/health_generate") == 200
    assert "The server is fired up and ready to roll!" in sglang_eagle.log()


def test_models_endpoint(vllm_ngram, sglang_eagle):
    code, body = vllm_ngram.get_json("/v1/models")
    assert code == 200
    [model] = body["data"]
    assert (model["id"], model["root"], model["max_model_len"]) == ("mock-a", "org/model-7b", 4096)
    code, body = sglang_eagle.get_json("/v1/models")
    assert body["data"][0]["id"] == "org/model-7b"


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_stream_carries_usage_in_a_final_chunk_then_done(vllm_ngram, api):
    prompt = {"prompt": REASONING} if api == "completions" else {"messages": [{"role": "user", "content": REASONING}]}
    events, complete = vllm_ngram.stream("/v1/%s" % ("completions" if api == "completions" else "chat/completions"),
                                         dict(prompt, model="mock-a", max_tokens=40, ignore_eos=True, temperature=0,
                                              stream_options={"include_usage": True}))
    assert complete
    assert events[-1][1] == "[DONE]"
    usage_chunk = events[-2][1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 40 == sum(chunk_tokens(events))
    assert usage["total_tokens"] == usage["prompt_tokens"] + 40
    last_choice = events[-3][1]["choices"][0]
    assert last_choice["finish_reason"] == "length"
    if api == "chat":
        assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
        assert events[0][1]["object"] == "chat.completion.chunk"
        assert usage["prompt_tokens"] > len(REASONING.split())  # chat template tokens
    else:
        assert usage["prompt_tokens"] == len(REASONING.replace(";", " ;").replace(",", " ,").replace(".", " .").split())


def test_without_ignore_eos_output_stops_early_and_deterministically(vllm_ngram):
    body = {"model": "mock-a", "prompt": REASONING, "max_tokens": 200}
    code, first = vllm_ngram.post("/v1/completions", body)
    code2, second = vllm_ngram.post("/v1/completions", body)
    assert code == code2 == 200
    assert first["choices"][0]["finish_reason"] == "stop"
    assert first["usage"]["completion_tokens"] < 200
    assert first["usage"]["completion_tokens"] == second["usage"]["completion_tokens"]
    assert len(first["choices"][0]["text"].split()) == first["usage"]["completion_tokens"]


def test_unknown_model_and_too_long_requests_are_refused(vllm_ngram):
    code, body = vllm_ngram.post("/v1/completions", {"model": "other", "prompt": "hi", "max_tokens": 4})
    assert code == 404 and "does not exist" in body["error"]["message"]
    code, body = vllm_ngram.post("/v1/completions", {"model": "mock-a", "prompt": "hi", "max_tokens": 5000})
    assert code == 400 and "maximum context length is 4096" in body["error"]["message"]


def test_speculative_counters_match_the_emitted_tokens(vllm_ngram):
    before = vllm_ngram.metrics()
    events, complete = vllm_ngram.stream("/v1/completions", {
        "model": "mock-a", "prompt": REPETITIVE, "max_tokens": 120, "ignore_eos": True,
        "stream_options": {"include_usage": True}})
    after = vllm_ngram.metrics()
    assert complete
    d = {name: metric(after, name) - metric(before, name) for name in (
        "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total", "vllm:generation_tokens_total")}
    per_pos = [metric(after, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=i)
               - metric(before, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=i) for i in range(5)]
    chunks = chunk_tokens(events)
    completion = events[-2][1]["usage"]["completion_tokens"]
    assert completion == 120 == sum(chunks) == d["vllm:generation_tokens_total"]
    # the first token comes from prefill; every later chunk is one verification step: 1 + accepted
    assert d["vllm:spec_decode_num_drafts_total"] == len(chunks) - 1
    assert completion == 1 + d["vllm:spec_decode_num_drafts_total"] + d["vllm:spec_decode_num_accepted_tokens_total"]
    assert d["vllm:spec_decode_num_draft_tokens_total"] == 5 * d["vllm:spec_decode_num_drafts_total"]
    assert sum(per_pos) == d["vllm:spec_decode_num_accepted_tokens_total"]
    assert per_pos == sorted(per_pos, reverse=True)  # a position is reached only past every earlier one
    assert max(chunks) > 1  # several tokens in one SSE chunk
    labels = {k[1] for k in after if k[0] == "vllm:spec_decode_num_drafts_total"}
    assert frozenset({("model_name", "mock-a"), ("engine", "0")}) in labels


def test_ngram_emits_more_tokens_per_step_on_a_repetitive_prompt(vllm_ngram):
    def tokens_per_chunk(prompt):
        events, complete = vllm_ngram.stream("/v1/completions", {
            "model": "mock-a", "prompt": prompt, "max_tokens": 80, "ignore_eos": True})
        assert complete
        chunks = chunk_tokens(events)[1:]
        return sum(chunks) / len(chunks)

    repetitive, reasoning = tokens_per_chunk(REPETITIVE), tokens_per_chunk(REASONING)
    assert repetitive > 2.0
    assert reasoning < 1.5


def test_baseline_token_pacing_follows_the_step_time(host, engines):
    e = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="4"))
    e.wait_ready()
    events, complete = e.stream("/v1/completions", {"prompt": REASONING, "max_tokens": 60, "ignore_eos": True})
    assert complete
    times = [t for t, ev in events if ev != "[DONE]"]
    assert len(times) == 60  # without speculation: one token per chunk
    tpot = (times[-1] - times[0]) / (len(times) - 1)
    assert 0.75 * 12.2e-3 < tpot < 1.25 * 12.2e-3  # pacing applied (profile step_ms 12.2), not a benchmark
    # The request's figures are recorded once it finished, which may be just after its last chunk went out
    # (vLLM's output handler too records stats after it queued the final output): wait for them.
    assert wait_until(lambda: metric(e.metrics(), "vllm:time_to_first_token_seconds_count") == 1, 5)
    prom = e.metrics()
    assert metric(prom, "vllm:spec_decode_num_drafts_total") == 0
    assert not any(k[0].startswith("vllm:spec_decode") for k in prom)  # no spec metrics without speculation
    # the per-request TPOT histogram agrees with what the client saw
    assert metric(prom, "vllm:request_time_per_output_token_seconds_sum") == pytest.approx(tpot, rel=0.1)


def test_vllm_process_tree_holds_memory_and_ends_on_sigterm(host, engines):
    e = engines.vllm(host, "-tp", "2", "--gpu-memory-utilization", "0.5", env=host.env(CUDA_VISIBLE_DEVICES="5,6"))
    e.wait_ready()
    [core] = children(e.proc.pid)
    assert (comm(core), argv0(core)) == ("VLLM::EngineCor", "VLLM::EngineCore")
    workers = children(core)
    assert [argv0(w) for w in workers] == ["VLLM::Worker_TP0", "VLLM::Worker_TP1"]
    held = {h["pid"]: h for h in host.holders()}
    want = int(0.5 * TOTAL_MIB)
    assert {(held[w]["gpu"], held[w]["mib"]) for w in workers} == {(5, want), (6, want)}  # ranks -> visible GPUs
    for w in workers:  # the device node stays open: what makes the shim count the memory
        nodes = {os.readlink("/proc/%d/fd/%s" % (w, fd)) for fd in os.listdir("/proc/%d/fd" % w)}
        assert os.path.join(host.dev, "nvidia%d" % held[w]["gpu"]) in nodes
    assert e.terminate(signal.SIGTERM) == 0
    assert wait_until(lambda: not any(alive(p) for p in [core] + workers), 5)
    assert [h for h in host.holders() if h["gpu"] in (5, 6)] == []
    # a graceful stop also removes the registry entries (a killed holder leaves a stale one)
    assert not [n for n in os.listdir(host.registry) for w in workers if n.startswith("%d." % w)]


def test_busy_gpu_makes_vllm_fail_like_vllm(host, engines):
    # a leftover holder of most of GPU 7 (an orphaned worker, as in vLLM #55510)
    holder = subprocess.Popen([GPU_HOLD, "--gpu", "7", "--mib", "100000"], env=host.env(),
                              stdout=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: any(h["pid"] == holder.pid for h in host.holders()), 5)
        e = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="7"))
        assert e.proc.wait(15) == 1
        log = e.log()
        assert "Free memory on device cuda:0" in log and "is less than desired GPU memory utilization (0.9" in log
        assert "Engine core initialization failed" in log
    finally:
        holder.kill()
        holder.wait()


def test_sglang_schedulers_hold_their_fraction_and_server_info(host, sglang_eagle):
    workers = [p for p in children(sglang_eagle.proc.pid) if argv0(p).startswith("sglang::scheduler_TP")]
    assert sorted(argv0(p) for p in workers) == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
    assert any(argv0(p) == "sglang::detokenizer" for p in children(sglang_eagle.proc.pid))
    held = {h["pid"]: h for h in host.holders()}
    assert {held[p]["mib"] for p in workers} == {int(0.88 * TOTAL_MIB)}

    events, complete = sglang_eagle.stream("/v1/chat/completions", {
        "messages": [{"role": "user", "content": REPETITIVE}], "max_tokens": 60, "ignore_eos": True,
        "stream_options": {"include_usage": True}})
    assert complete
    code, info = sglang_eagle.get_json("/get_server_info")
    assert code == 200 and info["speculative_algorithm"] == "EAGLE3"
    state = info["internal_states"][0]
    chunks = chunk_tokens(events)
    # only this request ran since start: the running average is its decode tokens per verify step
    assert state["avg_spec_accept_length"] == pytest.approx((sum(chunks) - 1) / (len(chunks) - 1))
    assert state["last_gen_throughput"] > 0
    assert sglang_eagle.get_json("/server_info")[1]["internal_states"][0]["avg_spec_accept_length"] > 1
    prom = sglang_eagle.metrics()
    assert metric(prom, "sglang:generation_tokens_total") == 60
    assert metric(prom, "sglang:spec_accept_length") > 1
