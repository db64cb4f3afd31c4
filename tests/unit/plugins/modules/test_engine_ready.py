# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""engine_ready main(): options, results and failures, against a real HTTP server on 127.0.0.1."""
from __future__ import annotations

import time

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.specdec.plugins.modules import engine_ready
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.engine_http import (
    EngineHTTP, FakeSystemctl, Reply, closed_port_url, models,
)


def run(args, systemctl=None, monkeypatch=None):
    if systemctl is not None:
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: systemctl(argv, **kw))
    with patch_module_args(args):
        engine_ready.main()


def test_ready_vllm_returns_unchanged_with_state(module_exits, monkeypatch):
    systemctl = FakeSystemctl(NRestarts=1)
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("served"))]}) as srv:
        with pytest.raises(ExitJson) as exc:
            run({"url": srv.url, "engine": "vllm", "unit": "vllm-server.service", "model": "served",
                 "since_restarts": 1, "timeout": 5}, systemctl, monkeypatch)
    res = exc.value.args[0]
    assert res["changed"] is False
    assert res["ready"] is True
    assert res["state"]["active_state"] == "active"
    assert res["state"]["n_restarts"] == 1
    assert res["msg"].startswith("ready: vllm-server.service active/running")


def test_not_ready_is_a_success_so_until_can_retry(module_exits):
    with pytest.raises(ExitJson) as exc:
        run({"url": closed_port_url(), "engine": "sglang", "timeout": 0})
    res = exc.value.args[0]
    assert res["ready"] is False
    assert res["state"] is None
    assert res["msg"].endswith("/health_generate: connection refused")


def test_crash_fails_with_crashed_flag(module_exits, monkeypatch):
    journal = [{"MESSAGE": "ValueError: bad --speculative-config", "_PID": "77"},
               {"MESSAGE": "Engine core initialization failed.", "_PID": "77"}]
    systemctl = FakeSystemctl(ActiveState="failed", SubState="failed", Result="exit-code", ExecMainStatus=1,
                              journal=journal)
    with pytest.raises(FailJson) as exc:
        run({"url": closed_port_url(), "engine": "vllm", "unit": "vllm-server.service", "timeout": 600},
            systemctl, monkeypatch)
    res = exc.value.args[0]
    assert res["crashed"] is True
    assert res["ready"] is False
    assert res["msg"].startswith("crashed: vllm-server.service failed (last exit status 1")
    assert res["msg"].endswith("; last engine log lines: ValueError: bad --speculative-config"
                               " | Engine core initialization failed.")
    assert res["log_tail"] == ["ValueError: bad --speculative-config", "Engine core initialization failed."]


def test_systemctl_error_fails_with_its_message(module_exits, monkeypatch):
    def broken(argv, **kw):
        return 1, "", "Failed to connect to bus"

    with pytest.raises(FailJson) as exc:
        run({"url": closed_port_url(), "engine": "vllm", "unit": "x.service", "timeout": 0}, broken, monkeypatch)
    assert "Failed to connect to bus" in exc.value.args[0]["msg"]
    assert "crashed" not in exc.value.args[0]


def test_negative_timeout_is_refused(module_exits):
    with pytest.raises(FailJson) as exc:
        run({"url": "http://127.0.0.1:1", "engine": "vllm", "timeout": -1})
    assert exc.value.args[0]["msg"] == "timeout must be >= 0, got -1.0"


def test_unknown_engine_is_refused_by_argument_spec(module_exits):
    with pytest.raises(FailJson) as exc:
        run({"url": "http://127.0.0.1:1", "engine": "tgi"})
    assert "engine" in exc.value.args[0]["msg"]


def test_a_key_with_a_trailing_newline_is_refused_before_any_request(module_exits):
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        with pytest.raises(FailJson) as exc:
            run({"url": srv.url, "engine": "vllm", "api_key": "sk-SECRET\n", "timeout": 0})
    res = exc.value.args[0]
    assert srv.requests == []
    assert res["msg"].startswith("api_key contains a line feed (U+000A) at its end")
    assert res["ready"] is False and "SECRET" not in res["msg"]


def test_api_key_reaches_models_through_the_shared_options(module_exits):
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        with pytest.raises(ExitJson) as exc:
            run({"url": srv.url + "/v1", "engine": "vllm", "api_key": "k3y-value", "timeout": 0})
    assert exc.value.args[0]["ready"] is True
    assert dict(srv.requests)["/v1/models"].get("Authorization") == "Bearer k3y-value"


def _journal(start_us, lines):
    """journalctl -o json entries of one start: (seconds after the start, message)."""
    return [{"__MONOTONIC_TIMESTAMP": str(int(start_us + t * 1e6)), "MESSAGE": msg, "_SYSTEMD_INVOCATION_ID": "abc"}
            for t, msg in lines]


def test_a_ready_engine_says_where_its_start_went(module_exits, monkeypatch):
    # issue 34: the breakdown from the engine's own lines in the journal of this start (docs/load.md)
    start_us = (time.monotonic() - 120) * 1e6
    journal = _journal(start_us, [
        (30.0, "(Worker_TP0 pid=1) INFO 12-04 05:03:00 [gpu_model_runner.py:5150] Model loading took 61.2 GiB memory "
               "and 25.500000 seconds"),
        (60.0, "(EngineCore pid=3) INFO 12-04 05:05:02 [core.py:402] init engine (profile, create kv cache, warmup "
               "model) took 28.00 s"),
        (70.0, "(APIServer pid=2) INFO:     Application startup complete."),
        (90.0, "(APIServer pid=2) INFO:     127.0.0.1:5000 - \"GET /health HTTP/1.1\" 200 OK")])
    systemctl = FakeSystemctl(journal=journal, InvocationID="abc", ExecMainStartTimestampMonotonic=int(start_us))
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("served"))]}) as srv:
        with pytest.raises(ExitJson) as exc:
            run({"url": srv.url, "engine": "vllm", "unit": "vllm-server.service", "model": "served", "timeout": 5},
                systemctl, monkeypatch)
    res = exc.value.args[0]
    assert res["ready"] and res["load"] == {"weights": 25.5, "compile": None, "graph_capture": None, "kv_profile": 28.0,
                                            "other": 16.5, "total": 70.0, "compile_cache": None,
                                            "compile_cache_hit": False}
    assert ["journalctl", "_SYSTEMD_INVOCATION_ID=abc"] == [c for c in systemctl.calls if c[0] == "journalctl"][0][:2]


def test_a_loading_engine_says_what_it_is_doing(module_exits, monkeypatch):
    start_us = (time.monotonic() - 20) * 1e6
    journal = _journal(start_us, [(5.0, "[2026-12-04 05:00:00 TP0] Load weight begin. avail mem=139.10 GB"),
                                  (9.0, "Loading safetensors checkpoint shards:  41% Completed | 26/64 [01:10<01:41]")])
    systemctl = FakeSystemctl(journal=journal, InvocationID="abc", ExecMainStartTimestampMonotonic=int(start_us))
    with pytest.raises(ExitJson) as exc:
        run({"url": closed_port_url(), "engine": "sglang", "unit": "sglang-server.service", "timeout": 0},
            systemctl, monkeypatch)
    res = exc.value.args[0]
    assert not res["ready"] and res["stage"] == "loading weights 41 %" and res["msg"].endswith("; loading weights 41 %")
    assert "load" not in res


def test_a_day_old_server_is_not_read_from_the_journal(module_exits, monkeypatch):
    systemctl = FakeSystemctl(journal=[], InvocationID="abc",
                              ExecMainStartTimestampMonotonic=int((time.monotonic() - 86400) * 1e6))
    with pytest.raises(ExitJson) as exc:
        run({"url": closed_port_url(), "engine": "vllm", "unit": "vllm-server.service", "timeout": 0},
            systemctl, monkeypatch)
    assert "stage" not in exc.value.args[0] and not any(c[0] == "journalctl" for c in systemctl.calls)
