# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parking the mock engines (mockengine/park.py): vLLM's sleep mode and SGLang's memory saver give
the GPU memory back without exiting, keep a residual per rank and their port, and take it back on
wake-up; without the engine's flag they answer as the engines do and free nothing. Real engine
processes on a temp mock host; memory read from the holder registry as the NVML shim reads it."""
from __future__ import annotations

import http.client
import threading
import time

from conftest import REPETITIVE, TOTAL_MIB, MockGpuHost, wait_until

RESIDUAL = 2000  # the profile's residual_mib in these tests
DEV = {"VLLM_SERVER_DEV_MODE": "1"}


def _host(tmp_path):
    return MockGpuHost(tmp_path, profile={"park": {"residual_mib": RESIDUAL, "weights_share": 0.5, "gib_per_s": 400.0}})


def _held(host, gpus):
    return sorted(h["mib"] for h in host.holders() if h["gpu"] in gpus)


def test_vllm_sleep_level1_keeps_a_residual_per_worker_and_wakes(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.vllm(host, "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.5", "--enable-sleep-mode",
                       env=host.env(CUDA_VISIBLE_DEVICES="3,4", **DEV))
    eng.wait_ready()
    loaded = int(0.5 * TOTAL_MIB)
    assert _held(host, (3, 4)) == [loaded, loaded]
    assert eng.request("GET", "/is_sleeping") == (200, {"is_sleeping": False})
    assert eng.request("POST", "/sleep?level=1") == (200, {"status": "sleeping", "level": 1})
    assert _held(host, (3, 4)) == [RESIDUAL, RESIDUAL]
    assert eng.request("GET", "/is_sleeping") == (200, {"is_sleeping": True})
    assert eng.status("/health") == 200  # parked, still up and on its port
    status = eng.post("/v1/completions", {"model": "org/model-7b", "prompt": "hi", "max_tokens": 2})[0]
    assert status == 503
    assert "Sleep mode freed" in eng.log() and "memory is still in use" in eng.log()
    assert eng.request("POST", "/wake_up") == (200, {"status": "awake", "tags": None})
    assert _held(host, (3, 4)) == [loaded, loaded]
    status, body = eng.post("/v1/completions", {"model": "org/model-7b", "prompt": "hi", "max_tokens": 2})
    assert status == 200 and body["choices"]


def test_vllm_sleep_mode_wait_lets_the_requests_in_flight_finish(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.vllm(host, "--gpu-memory-utilization", "0.4", "--enable-sleep-mode",
                       env=host.env(CUDA_VISIBLE_DEVICES="6", **DEV))
    eng.wait_ready()
    done = {}
    worker = _generate_in_thread(eng, done)
    time.sleep(0.3)  # the request is generating
    assert eng.request("POST", "/sleep?level=1&mode=wait") == (200, {"status": "sleeping", "level": 1})
    parked_at = time.monotonic()
    worker.join(30)
    assert done["at"] <= parked_at  # the sleep waited for it
    status, body = done["res"]
    assert status == 200 and body["choices"][0]["finish_reason"] == "length"  # finished, not aborted
    assert body["usage"]["completion_tokens"] == 64
    assert _held(host, (6,)) == [RESIDUAL]
    assert eng.request("POST", "/sleep?level=1&mode=never")[0] == 422


def test_vllm_routes_only_in_dev_mode_and_nothing_freed_without_sleep_mode(tmp_path, engines):
    host = _host(tmp_path)
    plain = engines.vllm(host, "--gpu-memory-utilization", "0.3", env=host.env(CUDA_VISIBLE_DEVICES="0"))
    plain.wait_ready()
    assert plain.request("POST", "/sleep?level=1")[0] == 404
    no_flag = engines.vllm(host, "--gpu-memory-utilization", "0.3", env=host.env(CUDA_VISIBLE_DEVICES="1", **DEV))
    no_flag.wait_ready()
    assert no_flag.request("POST", "/sleep?level=1") == (200, {"status": "sleeping", "level": 1})
    assert _held(host, (1,)) == [int(0.3 * TOTAL_MIB)]  # vLLM without the cumem pool frees nothing
    assert "Sleep mode freed 0.0 GiB memory" in no_flag.log()
    assert no_flag.request("POST", "/sleep?level=7")[0] == 422


def test_vllm_wake_up_without_room_fails_and_the_engine_exits(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.vllm(host, "--gpu-memory-utilization", "0.6", "--enable-sleep-mode",
                       env=host.env(CUDA_VISIBLE_DEVICES="2", **DEV))
    eng.wait_ready()
    assert eng.request("POST", "/sleep?level=1")[0] == 200
    other = engines.vllm(host, "--gpu-memory-utilization", "0.6", env=host.env(CUDA_VISIBLE_DEVICES="2"))
    other.wait_ready()  # fits only because the first one is parked
    # The rank dies of it, and the engine with it: a 500, or the connection gone with the process.
    try:
        status = eng.request("POST", "/wake_up")[0]
    except (http.client.HTTPException, ConnectionError):
        status = "dropped"
    assert status in (500, "dropped")
    assert wait_until(lambda: eng.proc.poll() is not None, 15)
    assert "CUDA out of memory" in eng.log()


def test_wake_oom_fault_set_while_parked_fails_the_wake_up_like_cuda(tmp_path, engines):
    # The faults file is read when the wake-up comes: a test sets it while the engine is parked.
    host = _host(tmp_path)
    eng = engines.sglang(host, "--mem-fraction-static", "0.4", "--enable-memory-saver",
                         env=host.env(CUDA_VISIBLE_DEVICES="5"))
    eng.wait_ready()
    assert eng.request("POST", "/release_memory_occupation", {"tags": None})[0] == 200
    host.set_faults({"none": {"wake_oom": True}})
    try:
        status = eng.request("POST", "/resume_memory_occupation", {"tags": None})[0]
    except (http.client.HTTPException, ConnectionError):
        status = "dropped"
    assert status in (500, "dropped")
    assert wait_until(lambda: eng.proc.poll() is not None, 15)
    assert "torch.OutOfMemoryError" in eng.log()


def test_sglang_release_and_resume_memory_occupation(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.sglang(host, "--tp-size", "2", "--mem-fraction-static", "0.4", "--enable-memory-saver",
                         env=host.env(CUDA_VISIBLE_DEVICES="5,6"))
    eng.wait_ready()
    loaded = int(0.4 * TOTAL_MIB)
    assert eng.request("POST", "/release_memory_occupation", {"tags": None}) == (200, None)
    assert _held(host, (5, 6)) == [RESIDUAL, RESIDUAL]
    assert eng.request("POST", "/resume_memory_occupation", {"tags": None}) == (200, None)
    assert _held(host, (5, 6)) == [loaded, loaded]
    plain = engines.sglang(host, "--mem-fraction-static", "0.2", env=host.env(CUDA_VISIBLE_DEVICES="7"))
    plain.wait_ready()
    assert plain.request("GET", "/release_memory_occupation")[0] == 200
    assert _held(host, (7,)) == [int(0.2 * TOTAL_MIB)]  # no memory saver: nothing released


def _generate_in_thread(eng, out, max_tokens=64):
    def generate():
        try:
            out["res"] = eng.post("/v1/completions", {"model": "org/model-7b", "prompt": "hi",
                                                      "max_tokens": max_tokens, "ignore_eos": True})
        except (http.client.HTTPException, ConnectionError) as exc:  # the server died under it
            out["res"] = ("dropped", str(exc))
        out["at"] = time.monotonic()
    worker = threading.Thread(target=generate)
    worker.start()
    return worker


def test_sglang_release_while_busy_kills_the_server_as_its_scheduler_asserts(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.sglang(host, "--mem-fraction-static", "0.3", "--enable-memory-saver",
                         env=host.env(CUDA_VISIBLE_DEVICES="1"))
    eng.wait_ready()
    out = {}
    worker = _generate_in_thread(eng, out, 256)
    time.sleep(0.3)
    try:
        status = eng.request("POST", "/release_memory_occupation", {"tags": None})[0]
    except (http.client.HTTPException, ConnectionError):
        status = "dropped"
    assert status in (500, "dropped")
    assert wait_until(lambda: eng.proc.poll() is not None, 15)
    assert "should be called only when server is idle" in eng.log()
    worker.join(30)


def test_sglang_pause_abort_then_release_holds_new_requests_until_continue(tmp_path, engines):
    host = _host(tmp_path)
    eng = engines.sglang(host, "--mem-fraction-static", "0.3", "--enable-memory-saver",
                         env=host.env(CUDA_VISIBLE_DEVICES="0"))
    eng.wait_ready()
    inflight, held = {}, {}
    first = _generate_in_thread(eng, inflight, 256)
    time.sleep(0.3)
    assert eng.request("POST", "/pause_generation", {"mode": "abort"})[0] == 200
    first.join(30)
    assert inflight["res"][0] == 200 and inflight["res"][1]["choices"][0]["finish_reason"] == "abort"
    assert eng.request("POST", "/release_memory_occupation", {"tags": None}) == (200, None)
    assert _held(host, (0,)) == [RESIDUAL]
    second = _generate_in_thread(eng, held, 8)
    time.sleep(0.5)
    assert "res" not in held  # held while paused
    assert eng.request("POST", "/resume_memory_occupation", {"tags": None}) == (200, None)
    assert eng.request("POST", "/continue_generation", {})[0] == 200
    second.join(30)
    assert held["res"][0] == 200 and held["res"][1]["choices"][0]["finish_reason"] == "length"
    assert eng.proc.poll() is None


def _accepted(eng, prompt):
    """(accepted, drafts) over one greedy request, from the engine's own counters."""
    def counts():
        prom = eng.metrics()
        return tuple(sum(v for (name, _labels), v in prom.items() if name == n)
                     for n in ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_drafts_total"))
    before = counts()
    status, _body = eng.post("/v1/completions", {"model": "org/model-7b", "prompt": prompt, "max_tokens": 40,
                                                 "ignore_eos": True})
    assert status == 200
    after = counts()
    return after[0] - before[0], after[1] - before[1]


def test_draft_lost_on_wake_fault_leaves_acceptance_at_zero_after_the_wake_up(tmp_path, engines):
    # vLLM issue 52479: the woken engine serves, but its MTP draft was not reloaded; the faults file is read when
    # the wake-up comes, so the acceptance before parking is the engine's usual one.
    host = _host(tmp_path)
    eng = engines.vllm(host, "--gpu-memory-utilization", "0.5", "--enable-sleep-mode", "--speculative-config",
                       '{"method": "ngram", "num_speculative_tokens": 3}', env=host.env(CUDA_VISIBLE_DEVICES="6", **DEV))
    eng.wait_ready()
    accepted, drafts = _accepted(eng, REPETITIVE)
    assert drafts > 0 and accepted > 0
    assert eng.request("POST", "/sleep?level=1")[0] == 200
    host.set_faults({"ngram": {"draft_lost_on_wake": True}})
    assert eng.request("POST", "/wake_up")[0] == 200
    accepted, drafts = _accepted(eng, REPETITIVE)
    assert drafts == 39 and accepted == 0  # every token after the first from a step that accepted nothing
