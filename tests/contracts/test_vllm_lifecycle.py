# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM 0.33's own code judges the mock's refusals, API-key guard and process titles.

- Errors: each bad speculative config goes through the real `vllm serve` parser and
  `EngineArgs.create_speculative_config` (as tests/engines does, against tiny local models); the
  mock's `vllm_spec.validate` must end in the same message.
- API keys: the real `AuthenticationMiddleware` (a pure ASGI app) answers the same requests as the mock.
- Process titles: the real `set_process_title` composes them (setproctitle is not installed here, so
  a stand-in records the title it is given); readiness (/health) is read from the source text, since
  the API server needs a running engine.
"""
from __future__ import annotations

import asyncio
import json
import sys
import types
from unittest import mock

import pytest

pytest.importorskip("vllm")

# pylint: disable=wrong-import-position
from vllm.config import ParallelConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.entrypoints.serve.middleware.authenticate import AuthenticationMiddleware  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from mockengine import vllm_spec  # noqa: E402

from conftest import MOCK, wheel_file  # noqa: E402

# (speculative config, target tp); "@name" is a tiny local model
BAD = {
    "lookup min > max": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5,
                          "prompt_lookup_max": 3}, 1),
    "eagle3 without draft": ({"method": "eagle3", "num_speculative_tokens": 3}, 1),
    "tensor_parallel_size key": ({"method": "ngram", "num_speculative_tokens": 3, "tensor_parallel_size": 2}, 1),
    "draft tp 3 of 2": ({"method": "eagle", "model": "@eagle", "num_speculative_tokens": 3,
                         "draft_tensor_parallel_size": 3}, 2),
    "unknown method": ({"method": "lookahead", "num_speculative_tokens": 3}, 1),
    "k = 0": ({"method": "ngram", "num_speculative_tokens": 0}, 1),
    "draft without k": ({"method": "eagle3", "model": "@eagle3"}, 1),
    "unknown key": ({"method": "ngram", "num_speculative_tokens": 2, "bogus_key": 1}, 1),
}


@pytest.fixture(scope="module")
def target_config(tiny_models):
    """The target's ModelConfig, built once (the slow part); the speculative part differs per case."""
    return EngineArgs(model=tiny_models["target"], skip_tokenizer_init=True).create_model_config()


def _real_refusal(cfg, target, tp, model_config):
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(
        [target, "--tensor-parallel-size", str(tp), "--speculative-config", json.dumps(cfg)])
    args.model = args.model_tag
    validate_parsed_serve_args(args)
    engine_args = EngineArgs.from_cli_args(args)
    with pytest.raises((ValueError, TypeError, NotImplementedError)) as err:
        engine_args.create_speculative_config(model_config, ParallelConfig(tensor_parallel_size=tp))
    return "%s: %s" % (type(err.value).__name__, err.value)


def _message(text):
    """The line that says what is wrong, without pydantic's `[type=..., input_value=...]` tail."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if line.startswith(("Value error,", "Input should", "Extra inputs", "Unexpected keyword")):
            return line.split(" [type=")[0]
    return lines[-1].split(" [type=")[0]


@pytest.mark.parametrize("case", list(BAD))
def test_mock_refuses_with_the_engines_message(case, tiny_models, target_config):
    cfg, tp = BAD[case]
    cfg = {k: (tiny_models[v[1:]] if isinstance(v, str) and v.startswith("@") else v) for k, v in cfg.items()}
    real = _real_refusal(cfg, tiny_models["target"], tp, target_config)
    with pytest.raises(vllm_spec.ConfigError) as err:
        vllm_spec.validate(cfg, tiny_models["target"], tp, lambda msg: None)
    ours = str(err.value)
    assert _message(ours) in real, (ours, real)
    if "validation error" in real:
        assert "1 validation error for SpeculativeConfig" in ours
        assert real.split("[type=")[1].split(",")[0] == ours.split("[type=")[1].split(",")[0]
        assert real.strip().splitlines()[-1] == ours.strip().splitlines()[-1]  # pydantic's docs link


def test_mock_knows_exactly_vllms_methods():
    from typing import get_args  # pylint: disable=import-outside-toplevel
    from vllm.config.speculative import SpeculativeMethod  # pylint: disable=import-outside-toplevel

    def flat(tp):
        return [x for arg in get_args(tp) for x in (flat(arg) if get_args(arg) else [arg])]
    assert list(vllm_spec.METHODS) == flat(SpeculativeMethod)


# -- API keys ------------------------------------------------------------------------------------------

REQUESTS = [("GET", "/health"), ("GET", "/metrics"), ("GET", "/version"), ("GET", "/ping"), ("GET", "/v1/models"),
            ("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/v1/nope"), ("GET", "/nope")]
HEADERS = {"none": None, "right": "Bearer k1", "second key": "bearer k2", "wrong": "Bearer nope", "basic": "Basic k1"}


def _real_auth(method, path, authorization):
    """Status and body vLLM's middleware answers, or None when it passes the request on."""
    async def app(scope, receive, send):  # the rest of the server: never reached when refused
        sent.append(("passed", None))

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            sent.append(("status", message["status"]))
        elif message["type"] == "http.response.body":
            sent.append(("body", message.get("body", b"")))

    sent = []
    headers = [(b"authorization", authorization.encode())] if authorization else []
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": headers, "query_string": b""}
    asyncio.run(AuthenticationMiddleware(app, tokens=["k1", "k2"])(scope, receive, send))
    got = dict(sent)
    return None if "passed" in got else (got["status"], got["body"])


@pytest.fixture(scope="module")
def mock_keyed(mock_host):
    engine = MOCK.Engine.vllm(mock_host, "--served-model-name", "m", "--api-key", "k1", "k2",
                              env=mock_host.env(CUDA_VISIBLE_DEVICES="2"))
    engine.wait_ready()
    yield engine
    engine.kill_group()


def test_mock_guards_the_paths_vllm_guards_and_answers_the_same(mock_keyed):
    for method, path in REQUESTS:
        for name, authorization in HEADERS.items():
            conn = MOCK.http.client.HTTPConnection("127.0.0.1", mock_keyed.port, timeout=10)
            try:
                body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 1,
                                   "messages": [{"role": "user", "content": "hi"}]}) if method == "POST" else None
                conn.request(method, path, body, {"Authorization": authorization} if authorization else {})
                resp = conn.getresponse()
                got = (resp.status, resp.read())
            finally:
                conn.close()
            real = _real_auth(method, path, authorization)
            if real is None:
                assert got[0] != 401, (method, path, name)
            else:
                assert got == real, (method, path, name)


def test_key_sources_are_vllms():
    """register.py: `--api-key` (nargs="+") wins over VLLM_API_KEY, empty keys mean none."""
    source = wheel_file("vllm", "entrypoints/serve/middleware/register.py")
    assert "if tokens := [key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]:" in source
    parser = make_arg_parser(FlexibleArgumentParser())
    assert parser.parse_args(["m", "--api-key", "a", "b"]).api_key == ["a", "b"]
    from mockengine import vllm_cli  # pylint: disable=import-outside-toplevel
    assert vllm_cli.parse(["serve", "m", "--api-key", "a", "b"]).api_key == ["a", "b"]


# -- process titles and readiness ------------------------------------------------------------------------

def _title(name, suffix=""):
    seen = []
    fake = types.ModuleType("setproctitle")
    fake.setproctitle = seen.append
    from vllm.utils.system_utils import set_process_title  # pylint: disable=import-outside-toplevel
    with mock.patch.dict(sys.modules, {"setproctitle": fake}):
        set_process_title(name, suffix)
    return seen[0]


def test_process_titles_are_the_ones_vllm_sets(mock_host):
    """v1/engine/core.py titles the engine `EngineCore` (no DP); multiproc_executor.py titles workers
    `Worker` + `_TP<rank>` when tp_size > 1."""
    core_src = wheel_file("vllm", "v1/engine/core.py")
    assert 'process_title = "EngineCore"' in core_src
    executor_src = wheel_file("vllm", "v1/executor/multiproc_executor.py")
    assert 'if tp_size > 1:\n            process_name += f"_TP{tp_rank}"' in executor_src
    want = [_title("Worker_TP%d" % r) for r in range(2)]
    assert _title("EngineCore") == "VLLM::EngineCore"
    engine = MOCK.Engine.vllm(mock_host, "-tp", "2", env=mock_host.env(CUDA_VISIBLE_DEVICES="3,4"))
    try:
        engine.wait_ready()
        [core] = MOCK.children(engine.proc.pid)
        assert MOCK.argv0(core) == _title("EngineCore")
        assert sorted(MOCK.argv0(w) for w in MOCK.children(core)) == want
        assert MOCK.comm(core) == _title("EngineCore")[:15]  # the kernel's 15-byte comm
    finally:
        engine.kill_group()


def test_tp1_has_no_worker_process_in_vllm():
    """A documented deviation: with world size 1 vLLM uses the `uni` executor (config/parallel.py) and
    the EngineCore itself holds the GPU; the mock keeps one `VLLM::Worker_TP0` child under it
    (docs/architecture.md). This pins the real rule so a change in vLLM shows here."""
    source = wheel_file("vllm", "config/parallel.py")
    assert 'if self.distributed_executor_backend is None and self.world_size == 1:\n' \
           '            self.distributed_executor_backend = "uni"' in source


def test_health_is_an_engine_check_and_the_port_opens_only_when_ready():
    """serve/instrumentator/health.py: 200 when `engine_client.check_health()` passes, 503 on
    EngineDeadError; the API server starts listening only after the engine is up (the mock: refused
    while loading, then 200; tests/unit/mockgpu/engines)."""
    source = wheel_file("vllm", "entrypoints/serve/instrumentator/health.py")
    assert '@router.get("/health", response_class=Response)' in source
    assert ("await client.check_health()\n        return Response(status_code=200)\n"
            "    except EngineDeadError:\n        return Response(status_code=503)") in source
