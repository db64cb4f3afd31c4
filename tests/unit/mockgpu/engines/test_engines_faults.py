# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each fault knob of faults.json changes the engines the way the scenario it stands for does."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from conftest import REASONING, REPETITIVE, MockGpuHost, alive, argv0, children, chunk_tokens, metric, wait_until
from mockengine import gpumem


@pytest.fixture
def host(tmp_path):
    return MockGpuHost(tmp_path, load_seconds=0.3)


NGRAM = ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}')


def test_fail_start_exits_1_with_an_engine_error_and_frees_memory(host, engines):
    host.set_faults({"ngram": {"fail_start": True}})
    e = engines.vllm(host, *NGRAM)
    assert e.proc.wait(15) == 1
    log = e.log()
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert "RuntimeError: Engine core initialization failed." in log
    assert "Application startup complete." not in log
    assert wait_until(lambda: host.holders() == [], 5)


def test_fail_start_is_keyed_by_method_and_takes_a_message(host, engines):
    host.set_faults({"ngram": {"fail_start": True}, "none": {"fail_start": "RuntimeError: mock scheduler boom"}})
    e = engines.sglang(host)
    assert e.proc.wait(15) == 1
    log = e.log()
    assert "RuntimeError: mock scheduler boom" in log and "Initialization failed" in log
    assert "illegal memory access" not in log


def test_never_ready_vllm_never_listens_and_sglang_stays_503(host, engines):
    host.set_faults({"*": {"never_ready": True}})
    v = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="0"))
    s = engines.sglang(host, env=host.env(CUDA_VISIBLE_DEVICES="1"))
    assert wait_until(lambda: len(host.holders()) == 2, 5)  # both loaded their weights...
    time.sleep(1.0)  # ...and stay unready well past load_seconds
    assert v.proc.poll() is None and s.proc.poll() is None
    assert v.status() == "refused"
    assert s.status("/health") == 503 and s.status("/health_generate") == 503
    assert v.terminate() == 0 and s.terminate() == 0
    assert wait_until(lambda: host.holders() == [], 5)


def test_ignore_sigterm_needs_sigkill(host, engines):
    host.set_faults({"none": {"ignore_sigterm": True}})
    e = engines.vllm(host)
    e.wait_ready()
    [core] = children(e.proc.pid)
    workers = children(core)
    for pid in [e.proc.pid, core] + workers:
        os.kill(pid, signal.SIGTERM)
    time.sleep(0.8)
    assert all(alive(p) for p in [e.proc.pid, core] + workers)
    assert e.status() == 200
    e.proc.kill()  # what systemd escalates to after TimeoutStopSec
    e.proc.wait(5)
    # workers die with their parent (PR_SET_PDEATHSIG), freeing the memory
    assert wait_until(lambda: not any(alive(p) for p in [core] + workers), 5)
    assert host.holders() == []


def test_escape_worker_survives_the_api_and_keeps_the_memory(host, engines, monkeypatch):
    host.set_faults({"eagle3": {"escape_worker": 1}})
    e = engines.vllm(host, "-tp", "2", "--speculative-config",
                     '{"method": "eagle3", "model": "org/eagle3-head", "num_speculative_tokens": 3}')
    e.wait_ready()
    [core] = children(e.proc.pid)
    assert [argv0(p) for p in children(core)] == ["VLLM::Worker_TP0"]  # TP1 is no longer in the tree
    [escaped] = [h["pid"] for h in host.holders() if h["gpu"] == 1]
    try:
        assert argv0(escaped) == "VLLM::Worker_TP1"
        assert os.getsid(escaped) != os.getsid(e.proc.pid)
        assert e.terminate() == 0
        assert wait_until(lambda: not alive(core), 5)
        time.sleep(0.3)
        assert alive(escaped)
        monkeypatch.setenv("MOCKGPU_REGISTRY", host.registry)
        monkeypatch.setenv("MOCKGPU_DEV_DIR", host.dev)
        assert gpumem.used_mib(1) == int(0.9 * 143771)  # still counted: node open, entry valid
        assert gpumem.used_mib(0) == 0
    finally:
        os.kill(escaped, signal.SIGKILL)
    assert wait_until(lambda: not alive(escaped), 5)


def test_drop_stream_after_cuts_the_connection_without_done(host, engines):
    host.set_faults({"none": {"drop_stream_after": 5}})
    e = engines.vllm(host)
    e.wait_ready()
    events, complete = e.stream("/v1/completions", {"prompt": REASONING, "max_tokens": 50, "ignore_eos": True,
                                                    "stream_options": {"include_usage": True}})
    assert not complete
    assert "[DONE]" not in [ev for _arrival, ev in events]
    assert 5 <= sum(chunk_tokens(events)) < 50
    assert e.status() == 200  # the server itself stays up


def test_dies_on_request_answers_as_a_real_vllm_whose_core_died(host, engines):
    """The sequence a real vLLM 0.32 showed with a wrong-shaped EAGLE-3 head (tests/real, docs/real-engine.md)."""
    host.set_faults({"none": {"dies_on_request": True}})
    e = engines.vllm(host)
    e.wait_ready()
    died = "EngineCore encountered an issue. See stack trace (above) for the root cause."
    events, complete = e.stream("/v1/completions", {"prompt": REASONING, "max_tokens": 16})
    assert complete and [ev for _t, ev in events] == [
        {"error": {"message": died, "type": "InternalServerError", "param": None, "code": 500}}, "[DONE]"]
    assert e.post("/v1/completions", {"prompt": "hi", "max_tokens": 3}) == (
        500, {"error": {"message": died, "type": "InternalServerError", "param": None, "code": 500}})
    assert e.status() == 503
    assert e.proc.wait(10) == 0  # vLLM #48966: the API server exits 0 once its core is gone
    assert wait_until(lambda: host.holders() == [], 5)


def test_http_5xx_fails_completions_but_not_health(host, engines):
    host.set_faults({"*": {"http_5xx": 1.0}})
    e = engines.sglang(host)
    e.wait_ready()
    codes = {e.post("/v1/completions", {"prompt": "hi", "max_tokens": 3})[0] for _i in range(8)}
    assert codes <= {500, 503} and codes
    assert e.status("/health") == 200
    assert e.status("/metrics") == 404  # SGLang serves metrics only with --enable-metrics


def test_fault_profile_and_load_seconds_override_per_method(tmp_path, engines):
    host = MockGpuHost(tmp_path, load_seconds=30)
    host.set_faults({"ngram": {"load_seconds": 0.2, "profile": {"accept_fresh": 0.0, "accept_repetitive": 0.0}}})
    e = engines.vllm(host, *NGRAM)
    e.wait_ready(timeout=10)  # far sooner than the profile's 30 s
    events, complete = e.stream("/v1/completions", {"prompt": REPETITIVE, "max_tokens": 30, "ignore_eos": True})
    assert complete
    assert set(chunk_tokens(events)) == {1}  # nothing accepted: one token per step
    prom = e.metrics()
    assert metric(prom, "vllm:spec_decode_num_drafts_total") == 29
    assert metric(prom, "vllm:spec_decode_num_accepted_tokens_total") == 0


def test_collapse_above_makes_a_batch_past_it_decode_one_token_per_step(host, engines):
    """Fault collapse_above (issue 32, item 4): alone, the repetitive prompt is speculated (several tokens a chunk);
    with three requests in decode and collapse_above 1, every step of the batch is one token, every draft rejected."""
    host.set_faults({"ngram": {"collapse_above": 1}})
    e = engines.vllm(host, *NGRAM)
    e.wait_ready(timeout=10)
    body = {"prompt": REPETITIVE, "max_tokens": 30, "ignore_eos": True}
    events, complete = e.stream("/v1/completions", body)
    assert complete and max(chunk_tokens(events)) > 1
    before = metric(e.metrics(), "vllm:spec_decode_num_accepted_tokens_total")
    results = []
    threads = [threading.Thread(target=lambda: results.append(e.stream("/v1/completions", dict(body, max_tokens=60))))
               for _i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(complete for _ev, complete in results)
    # the steps taken while all three decoded together accepted nothing: at most the few steps of a request
    # that ran alone at the start or the end (the streams do not start at the same instant) accepted any
    accepted = metric(e.metrics(), "vllm:spec_decode_num_accepted_tokens_total") - before
    ones = sum(chunk_tokens(ev).count(1) for ev, _c in results)
    assert ones >= 3 * 40 and accepted <= 3 * 60 - ones
