# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_engine: every registered engine supplies every fact, and the literal lists (modules' DOCUMENTATION, role
argument specs and defaults, filter docs) agree with the registry they cannot import."""
from __future__ import annotations

import ast
import glob
import importlib
import os
import re
import sys

import pytest
import yaml

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _spec, _specdef

PLUGINS = os.path.dirname(os.path.dirname(_engine.__file__))
REPO = os.path.dirname(PLUGINS)


def _doc(module):
    return yaml.safe_load(importlib.import_module("ansible_collections.llmops.specdec.plugins.modules." + module).DOCUMENTATION)


def _example(method, mod):
    """A complete request for ``method`` on the engine of ``mod``: its required parameters filled in."""
    spec = {"method": method}
    for param, default in mod.METHODS[method]["params"].items():
        if default is _specdef.REQUIRED:
            spec[param] = "org/draft" if _spec.PARAMS[param]["type"] is str else 3
    for group in mod.METHODS[method].get("one_of", ()):
        if not any(p in spec for p in group):
            spec["num_speculative_tokens"] = 3
    return spec


def _flags_ok(flags):
    return all(isinstance(f, str) and re.match(r"--?[a-z][a-z0-9-]*\Z", f) for f in flags)


def test_registry_resolves_each_engine_once():
    assert _engine.NAMES == tuple(_engine.ENGINES) and _engine.DEFAULT == _engine.NAMES[0]
    for name, mod in _engine.ENGINES.items():
        assert mod.NAME == name and mod.__name__.endswith("._engine_" + name)
        assert _engine.get(name) is mod and _engine.known(name)
    for bad in (None, "", "VLLM", "no-such-engine", 3):
        assert not _engine.known(bad)
        with pytest.raises(_engine.UnknownEngine, match="supported engines: " + ", ".join(_engine.NAMES)):
            _engine.get(bad)


@pytest.mark.parametrize("name", _engine.NAMES)
def test_every_engine_supplies_every_fact(name):
    mod = _engine.get(name)
    missing = [fact for fact in _engine.FACTS if not hasattr(mod, fact)]
    assert not missing, "%s lacks %s" % (name, ", ".join(missing))
    assert isinstance(mod.TITLE, str) and mod.TITLE and mod.RELEASE.startswith(mod.TITLE + " ")
    assert re.match(r"https://[^\s]+/\Z", mod.DOCS_URL)
    assert mod.UNIT_DESCRIPTION.startswith(mod.TITLE) and "\n" not in mod.UNIT_DESCRIPTION
    assert os.path.isabs(mod.EXECUTABLE) and isinstance(mod.DEFAULT_PORT, int) and 0 < mod.DEFAULT_PORT < 65536
    assert re.match(r"[A-Z][A-Z0-9_]*\Z", mod.API_KEY_VAR)
    assert mod.KEY_LAUNCHER is None or mod.API_KEY_VAR in mod.KEY_LAUNCHER
    for key_in_env in (False, True):
        argv = mod.serve_argv("/x/bin/engine", "org/model", key_in_env)
        assert argv[0] == "/x/bin/engine" and argv[-1] == "org/model" and all(isinstance(a, str) for a in argv)
    assert _flags_ok((mod.TP_FLAG, mod.MEMORY_FLAG, mod.MAX_LEN_FLAG))
    assert _flags_ok(mod.OWNED_FLAGS) and {"--host", "--port", "--api-key", mod.TP_FLAG, mod.MEMORY_FLAG,
                                           mod.MAX_LEN_FLAG} <= set(mod.OWNED_FLAGS)
    assert set(mod.FLAG_SPELLING) == {"underscores", "abbrev"} and all(isinstance(v, bool) for v in mod.FLAG_SPELLING.values())
    assert "--api-key" in mod.SECRET_FLAGS and _flags_ok(mod.SECRET_FLAGS)
    assert _flags_ok(mod.SCHEDULE_OFF) and isinstance(mod.SCHEDULE_OFF_UNLESS_ONE, bool)
    assert mod.schedule_env_conflict("ngram", {}) is None
    assert mod.HEALTH_PATH.startswith("/") and isinstance(mod.READY_LISTS_MODEL, bool)
    re.compile(mod.LOG_PREFIX)
    assert {"flag", "env", "park", "wake", "ask"} <= set(mod.PARK) and _flags_ok([mod.PARK["flag"]])
    for step in ("park", "wake"):
        assert mod.PARK[step][0] in ("GET", "POST") and mod.PARK[step][1].startswith("/")
    assert mod.METRICS_MARKER.endswith(":") and isinstance(mod.ACCEPTANCE_SOURCE, str) and mod.ACCEPTANCE_METRICS
    ends = mod.TUNE_BATCH_ENDS
    assert ends is None or (list(ends) == sorted(set(ends)) and ends[0] == 1)
    assert "none" in mod.METHODS and set(mod.METHODS) <= set(_spec.METHOD_DOCS)
    for method, entry in mod.METHODS.items():
        assert (entry["name"] is None) == (method == "none") and set(entry["params"]) <= set(_spec.PARAMS)
        assert all(v is _specdef.REQUIRED or v is _specdef.ENGINE or isinstance(v, (int, float, str))
                   for v in entry["params"].values())
    assert set(mod.CHECKS) <= set(mod.METHODS) and set(mod.NO_SCHEDULE) <= set(mod.METHODS)
    assert all("schedule" not in mod.METHODS[m]["params"] for m in mod.NO_SCHEDULE)
    assert all(target in mod.METHODS for target in mod.METHOD_ALIASES.values())
    assert mod.QUANTIZATIONS and all(isinstance(q, str) for q in mod.QUANTIZATIONS)
    assert isinstance(mod.SCHEDULE_TOP_K, str) and isinstance(mod.SCHEDULE_FILES, bool)
    for method in mod.METHODS:
        if method != "none":
            argv = mod.render_spec(_spec.normalize(_example(method, mod), name), "/etc/x")
            assert argv and all(isinstance(a, str) for a in argv)
    facts = _engine.facts(name)
    assert facts["default_port"] == mod.DEFAULT_PORT and "serve_argv" not in facts


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(PLUGINS, "module_utils", "_engine*.py"))))
def test_adapters_are_standard_library_only(path):
    """The guard's payload and AnsiballZ carry them to hosts; an adapter imports nothing but the registry's own."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assert node.module == "ansible_collections.llmops.specdec.plugins.module_utils", path
            assert all(a.name.startswith("_engine_") or a.name == "_specdef" for a in node.names), path
        elif isinstance(node, ast.Import):
            assert all(a.name in sys.stdlib_module_names for a in node.names), path


def _option(doc, name):
    return doc["options"][name]


@pytest.mark.parametrize("module,option,extra", [
    ("engine_ready", "engine", ()),
    ("engine_park", "engine", ()),
    ("switch_guard", "engine", ()),
    ("spec_bench", "metrics", ("auto", "none")),
])
def test_module_documentation_lists_the_registry(module, option, extra):
    opt = _option(_doc(module), option)
    assert [c for c in opt["choices"] if c not in extra] == list(_engine.NAMES)
    if option == "engine" and "default" in opt:
        assert opt["default"] == _engine.DEFAULT


def test_role_argument_specs_and_defaults_list_the_registry():
    with open(os.path.join(REPO, "roles", "spec_server", "meta", "argument_specs.yml"), encoding="utf-8") as f:
        specs = yaml.safe_load(f)
    for entry in specs["argument_specs"].values():
        opt = entry["options"].get("spec_server_engine")
        if opt is not None:
            assert opt["choices"] == list(_engine.NAMES) and opt["default"] == _engine.DEFAULT
    with open(os.path.join(REPO, "roles", "spec_server", "defaults", "main.yml"), encoding="utf-8") as f:
        assert yaml.safe_load(f)["spec_server_engine"] == _engine.DEFAULT


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(PLUGINS, "filter", "*.yml"))))
def test_filter_docs_list_the_registry(path):
    with open(path, encoding="utf-8") as f:
        opt = yaml.safe_load(f)["DOCUMENTATION"].get("options", {}).get("engine")
    if opt and "choices" in opt:
        assert opt["choices"] == list(_engine.NAMES)


@pytest.mark.parametrize("name", _engine.NAMES)
def test_every_compilation_cache_goes_to_the_one_directory(name):
    env = _engine.get(name).cache_env("/var/cache/x")
    # Inductor's default is under /tmp (emptied by PrivateTmp= at every start): every engine names it
    assert {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"} <= set(env)
    assert all(v == "/var/cache/x" or v.startswith("/var/cache/x/") for v in env.values()), env
