# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock engines guard their API with a key as the real ones do.

vLLM 0.33 (vllm/entrypoints/serve/middleware/authenticate.py, register.py): `--api-key K [K ...]`, else
the `VLLM_API_KEY` environment variable; only paths under /v1, /v2, /inference, /cohere need
`Authorization: Bearer K`; a refusal is 401 `{"error":"Unauthorized"}`; the key is logged as "***".
SGLang 0.5.23 (sglang/srt/utils/auth.py): `--api-key K` (no environment variable); every path needs it
except /health*, /ready*, /metrics*; a refusal is 401 `{"error":"Unauthorized"}`.
"""
from __future__ import annotations

import http.client
import json

import pytest

from conftest import Engine, MockGpuHost

KEY = "s3cret-key"


def request(engine, method, path, key=None, body=None, scheme="Bearer"):
    """(status, raw body) of one request, with `Authorization: <scheme> <key>` when a key is given."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["Authorization"] = "%s %s" % (scheme, key)
    conn = http.client.HTTPConnection("127.0.0.1", engine.port, timeout=30)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


COMPLETION = {"prompt": "hello there", "max_tokens": 3, "ignore_eos": True}


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    return MockGpuHost(tmp_path_factory.mktemp("auth"), load_seconds=0.3)


@pytest.fixture(scope="module")
def vllm_flag(host):
    """Two keys on the command line; VLLM_API_KEY is set too, and loses."""
    e = Engine.vllm(host, "--api-key", KEY, "second-key", "--served-model-name", "m",
                    env=host.env(CUDA_VISIBLE_DEVICES="0", VLLM_API_KEY="env-key"))
    e.wait_ready()
    yield e
    e.kill_group()


@pytest.fixture(scope="module")
def vllm_env(host):
    e = Engine.vllm(host, "--served-model-name", "m", env=host.env(CUDA_VISIBLE_DEVICES="1", VLLM_API_KEY=KEY))
    e.wait_ready()
    yield e
    e.kill_group()


@pytest.fixture(scope="module")
def sglang_key(host):
    e = Engine.sglang(host, "--api-key", KEY, "--enable-metrics", env=host.env(CUDA_VISIBLE_DEVICES="2"))
    e.wait_ready()
    yield e
    e.kill_group()


@pytest.mark.parametrize("path", ["/health", "/metrics", "/version", "/ping"])
def test_vllm_leaves_paths_outside_v1_open(vllm_flag, path):
    assert request(vllm_flag, "GET", path)[0] == 200


def test_vllm_refuses_v1_without_the_key(vllm_flag):
    for method, path, body in (("GET", "/v1/models", None), ("POST", "/v1/completions", dict(COMPLETION, model="m")),
                               ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                               ("GET", "/v1/no-such-path", None)):  # refused before routing
        assert request(vllm_flag, method, path, body=body) == (401, b'{"error":"Unauthorized"}'), path
        assert request(vllm_flag, method, path, "wrong", body)[0] == 401
        assert request(vllm_flag, method, path, KEY, body, scheme="Basic")[0] == 401
    assert request(vllm_flag, "GET", "/no-such-path")[0] == 404  # outside /v1: routing answers


def test_vllm_accepts_any_flag_key_and_not_the_env_key(vllm_flag):
    assert request(vllm_flag, "GET", "/v1/models", KEY)[0] == 200
    assert request(vllm_flag, "GET", "/v1/models", "second-key", scheme="bearer")[0] == 200
    assert request(vllm_flag, "GET", "/v1/models", "env-key")[0] == 401  # --api-key takes precedence
    code, body = request(vllm_flag, "POST", "/v1/completions", KEY, dict(COMPLETION, model="m"))
    assert code == 200 and json.loads(body)["usage"]["completion_tokens"] == 3


def test_vllm_logs_the_key_redacted(vllm_flag):
    log = vllm_flag.log()
    assert "'api_key': '***'" in log
    assert KEY not in log and "second-key" not in log


def test_vllm_reads_vllm_api_key(vllm_env):
    assert request(vllm_env, "GET", "/v1/models")[0] == 401
    assert request(vllm_env, "GET", "/v1/models", KEY)[0] == 200
    assert request(vllm_env, "GET", "/health")[0] == 200


def test_vllm_empty_env_key_means_no_auth(host, engines):
    e = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="3", VLLM_API_KEY=""))
    e.wait_ready()
    assert request(e, "GET", "/v1/models")[0] == 200


@pytest.mark.parametrize("path", ["/health", "/health_generate", "/metrics"])
def test_sglang_leaves_health_and_metrics_open(sglang_key, path):
    assert request(sglang_key, "GET", path)[0] == 200


def test_sglang_refuses_everything_else_without_the_key(sglang_key):
    for method, path, body in (("GET", "/v1/models", None), ("GET", "/get_server_info", None),
                               ("GET", "/server_info", None), ("GET", "/version", None),
                               ("POST", "/v1/completions", COMPLETION), ("GET", "/no-such-path", None)):
        assert request(sglang_key, method, path, body=body) == (401, b'{"error":"Unauthorized"}'), path
        assert request(sglang_key, method, path, "wrong", body)[0] == 401
    assert request(sglang_key, "GET", "/no-such-path", KEY)[0] == 404
    assert request(sglang_key, "GET", "/get_server_info", KEY)[0] == 200
    code, body = request(sglang_key, "POST", "/v1/completions", KEY, COMPLETION)
    assert code == 200 and json.loads(body)["usage"]["completion_tokens"] == 3


def test_sglang_health_is_503_not_401_while_loading(tmp_path, engines):
    slow = MockGpuHost(tmp_path, load_seconds=3)
    e = engines.sglang(slow, "--api-key", KEY, env=slow.env(CUDA_VISIBLE_DEVICES="4"))
    states = e.wait_ready()
    assert [s for s in states if s != "refused"] == [503, 200]
