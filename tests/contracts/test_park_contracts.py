# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pinned engines' own code judges the mock's parking routes (mockengine/park.py).

- vLLM 0.33: the real dev router (vllm/entrypoints/serve/dev/sleep/api_router.py) is imported; its
  routes and methods are the mock's, and its endpoint functions, run against a stand-in engine
  client, answer with the same JSON as the mock. It is registered only when VLLM_SERVER_DEV_MODE
  (envs.py parses it as bool(int(...))); the worker's "Sleep mode freed" line, formatted by the
  real format_gib, is the mock's.
- SGLang 0.5.23: http_server.py cannot be imported in its venv (no fastapi), so its routes are read
  from the wheel's source: both are GET and POST, take {"tags": ...} and return nothing (null).
"""
from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import types
import typing

import pytest

from conftest import MOCK, wheel_file  # noqa: E402

# The vLLM park route engine_park sends (_park.PROTOCOLS, from the adapter's PARK), read from its source: the
# collection is not importable from the engine's venv.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "module_utils",
                       "_engine_vllm.py"), encoding="utf-8") as _src:
    PARK_ROUTE = re.search(r'"park": \("POST", "(/sleep\?[^"]+)"', _src.read()).group(1)


class _Client:
    """What the real endpoints call on app.state.engine_client."""

    def __init__(self):
        self.sleeping = False

    async def sleep(self, level, mode):
        assert mode in ("abort", "wait")  # abort, the router's default, ends requests in flight; wait lets them finish
        self.sleeping = True

    async def wake_up(self, tags):
        self.sleeping = False
        return True

    async def is_sleeping(self):
        return self.sleeping


class _Params:
    def __init__(self, tags=()):
        self.tags = list(tags)

    def getlist(self, name):
        return self.tags if name == "tags" else []


def _request(client, tags=()):
    return types.SimpleNamespace(app=types.SimpleNamespace(state=types.SimpleNamespace(engine_client=client)),
                                 query_params=_Params(tags))


def test_vllm_sleep_routes_and_answers_are_the_real_routers(mock_host):
    pytest.importorskip("vllm")
    from vllm.entrypoints.serve.dev.sleep import api_router  # pylint: disable=import-outside-toplevel
    from vllm.v1.engine import PauseMode  # pylint: disable=import-outside-toplevel

    routes = {r.path: sorted(r.methods) for r in api_router.router.routes}
    assert routes["/sleep"] == ["POST"] and routes["/wake_up"] == ["POST"] and routes["/is_sleeping"] == ["GET"]
    client = _Client()

    def real(coro):
        return json.loads(asyncio.run(coro).body)

    engine = MOCK.Engine.vllm(mock_host, "--enable-sleep-mode", "--gpu-memory-utilization", "0.3",
                              env=mock_host.env(CUDA_VISIBLE_DEVICES="6", VLLM_SERVER_DEV_MODE="1"))
    try:
        engine.wait_ready()
        assert engine.request("GET", "/is_sleeping") == (200, real(api_router.is_sleeping(_request(client))))
        assert engine.request("POST", "/sleep?level=1") == (200, real(api_router.sleep(_request(client), level=1, mode="abort")))
        assert engine.request("POST", "/wake_up") == (200, real(api_router.wake_up(_request(client))))
        # engine_park's route (_park.PROTOCOLS): mode=wait is one of the pinned engine's pause modes.
        assert "&mode=wait" in PARK_ROUTE and "wait" in typing.get_args(PauseMode)
        assert engine.request("POST", PARK_ROUTE) == (200, real(api_router.sleep(_request(client), level=1, mode="wait")))
        assert engine.request("GET", "/is_sleeping") == (200, real(api_router.is_sleeping(_request(client))))
        assert engine.request("POST", "/wake_up") == (200, real(api_router.wake_up(_request(client))))
        log = engine.log()
    finally:
        engine.kill_group()
    # The worker's line, as gpu_worker.py formats it (format_gib: round(bytes / GiB, 2)).
    worker = wheel_file("vllm", "v1/worker/gpu_worker.py")
    assert '"Sleep mode freed %s GiB memory, %s GiB memory is still in use."' in worker
    line = re.search(r"Sleep mode freed (\S+) GiB memory, (\S+) GiB memory is still in use\.", log)
    assert line, log
    from vllm.utils.mem_utils import format_gib  # pylint: disable=import-outside-toplevel
    for text in line.groups():
        assert format_gib(int(float(text) * (1 << 30))) == text


def test_vllm_dev_routes_only_with_vllm_server_dev_mode():
    pytest.importorskip("vllm")
    routers = wheel_file("vllm", "entrypoints/launchers/api_server/routers.py")
    assert re.search(r"if envs\.VLLM_SERVER_DEV_MODE:\s+from vllm\.entrypoints\.serve import register_vllm_dev_api_routers"
                     r"\s+register_vllm_dev_api_routers\(app\)", routers)
    assert 'bool(int(os.getenv("VLLM_SERVER_DEV_MODE", "0")))' in wheel_file("vllm", "envs.py")


def _sglang_routes():
    tree = ast.parse(wheel_file("sglang", "srt/entrypoints/http_server.py"))
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "api_route":
                path = deco.args[0].value
                methods = sorted(e.value for e in next(k.value for k in deco.keywords if k.arg == "methods").elts)
                returns = [n for n in ast.walk(node.body[-1]) if isinstance(n, ast.Return)] if node.body else []
                found[path] = (methods, node, returns)
    return found


def test_sglang_memory_occupation_routes_are_the_real_servers(mock_host):
    pytest.importorskip("sglang.srt")
    routes = _sglang_routes()
    for path in ("/release_memory_occupation", "/resume_memory_occupation"):
        methods, node, _returns = routes[path]
        assert methods == ["GET", "POST"]
        # try: await ...; except: return error -> on success the handler returns None (a null body).
        body = node.body[-1] if not isinstance(node.body[0], ast.Expr) else node.body[1]
        assert isinstance(body, ast.Try) and not [n for n in body.body if isinstance(n, ast.Return)]
    fields = wheel_file("sglang", "srt/managers/io_struct.py")
    assert re.search(r"class ReleaseMemoryOccupationReqInput\(BaseReq, kw_only=True\):.*?tags: Optional\[List\[str\]\] = None",
                     fields, re.S)
    # engine_park pauses first (_park.PROTOCOLS): the release asserts the scheduler is idle, which a pause with
    # mode=abort makes it (the waiting requests are then ignored); generation continues after the resume.
    server = wheel_file("sglang", "srt/entrypoints/http_server.py")
    assert '@app.post("/pause_generation")' in server and '@app.post("/continue_generation")' in server
    assert re.search(r'class PauseGenerationReqInput\(BaseReq, kw_only=True\):.*?mode: Literal\["abort", "retract", '
                     r'"in_place"\] = "abort"', fields, re.S)
    assert re.search(r"class ContinueGenerationReqInput\(BaseReq, kw_only=True\):\n(\s+#.*\n)*\s+torch_empty_cache: bool = True",
                     fields)
    updater = wheel_file("sglang", "srt/managers/scheduler_components/weight_updater.py")
    assert re.search(r"assert self\.is_fully_idle\(\s*ignore_waiting=scheduler is not None and scheduler\._engine_paused\s*\), "
                     r'"release_memory_occupation should be called only when server is idle\."', updater)
    engine = MOCK.Engine.sglang(mock_host, "--enable-memory-saver", "--mem-fraction-static", "0.3",
                                env=mock_host.env(CUDA_VISIBLE_DEVICES="7"))
    try:
        engine.wait_ready()
        for method in ("GET", "POST"):
            assert engine.request(method, "/release_memory_occupation", {"tags": None}) == (200, None)
            assert engine.request(method, "/resume_memory_occupation", {"tags": None}) == (200, None)
        assert engine.request("POST", "/pause_generation", {"mode": "abort"}) == (
            200, {"message": "Generation paused successfully.", "status": "ok"})
        assert engine.request("POST", "/continue_generation", {}) == (
            200, {"message": "Generation continued successfully.", "status": "ok"})
    finally:
        engine.kill_group()


def test_the_flags_are_the_engines_own():
    """--enable-sleep-mode and --enable-memory-saver parse in the pinned engines as the mock reads them."""
    try:
        from vllm.entrypoints.common.cli_args import make_arg_parser  # pylint: disable=import-outside-toplevel
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # pylint: disable=import-outside-toplevel
    except ImportError:
        make_arg_parser = None
    if make_arg_parser is not None:
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(["org/m", "--enable-sleep-mode"])
        assert args.enable_sleep_mode is True
        return
    pytest.importorskip("sglang.srt")
    from sglang.srt.server_args import prepare_server_args  # pylint: disable=import-outside-toplevel
    assert prepare_server_args(["--model-path", "org/m", "--enable-memory-saver"]).enable_memory_saver is True
