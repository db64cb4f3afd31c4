# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""engine_ready main(): options, results and failures, against a real HTTP server on 127.0.0.1."""
from __future__ import annotations

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
