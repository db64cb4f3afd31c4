# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The compilation caches survive a restart of the unit as shipped (issue 34, docs/load.md).

The tier's other tests run the engine eager; this one turns torch.compile on (the host image has the C++
toolchain it needs: engines/<engine>.yml host_packages) and starts the same unit three times: on an empty
``spec_server_cache_dir``, again with the directory emptied (a control: the host is warm, the cache is not),
and again with the cache kept. The collection's own reading of each start (engine_ready's ``load``, from the
unit's journal) must show the cold starts compiling and the warm one finding the engine's cache (the engine's
own words), the cache must live in the directory the role made, owned by the service user, and the warm
start must compile no kernel again. No speed is asserted: the figures are printed and written to
``.build/real/compile_cache.json`` (bench/README.md quotes them). It ends with the compiled unit serving;
the next test's deploy.yml puts the tier's unit back.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from realhost import ROOT  # tests/real is on sys.path
from test_real_switch import _serving

pytestmark = pytest.mark.real
BUILD = os.path.join(ROOT, ".build", "real")


def _compiled(host):
    """The tier's extra args without --enforce-eager: the engine compiles its graphs at start."""
    args = [a for a in host.vars["spec_server_extra_args"] if a != "--enforce-eager"]
    assert args != host.vars["spec_server_extra_args"], "the tier's unit no longer runs eager: nothing to turn on"
    return {"spec_server_extra_args": args}


def _start_load(host, timeout=600):
    """engine_ready's breakdown of the unit's current start, once it is ready (the module the role runs)."""
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible"), "-i", host.inventory, host.name,
            "-m", "llmops.specdec.engine_ready",
            "-a", json.dumps({"url": "http://127.0.0.1:%d" % host.port, "engine": host.vars["spec_server_engine"],
                              "unit": host.unit, "timeout": timeout})]
    # The minimal callback prints "HOST | SUCCESS => {result as JSON}".
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="minimal", ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout + 120, check=False)
    head, _sep, body = done.stdout.partition(" => ")
    assert done.returncode == 0 and "SUCCESS" in head, done.stdout[-3000:] + done.stderr[-2000:]
    result = json.loads(body)
    assert result["ready"] and result.get("load"), result
    return result["load"]


def _start(host, cache_dir, empty_cache):
    """Restart the unit (its cache directory emptied first, or kept) and return the start's breakdown."""
    host.sh("systemctl stop %s" % host.unit)
    if empty_cache:
        host.sh("find %s -mindepth 1 -delete" % cache_dir)
    host.sh("touch /run/specdec-start-marker && systemctl start %s" % host.unit)
    load = _start_load(host)
    _serving(host)
    return load


def _kernels(host, cache_dir, newer=False):
    """Compiled kernels (shared objects) in the cache; with ``newer``, only those written since the last start."""
    since = "-newer /run/specdec-start-marker" if newer else ""
    return int(host.sh("find %s -name '*.so' %s | wc -l" % (cache_dir, since)).strip())


def test_the_second_start_finds_the_compile_cache(real_host):
    host = real_host
    engine = host.vars["spec_server_engine"]
    user = host.vars.get("spec_server_user", engine)
    cache_dir = "/var/cache/llmops-specdec/%s" % user  # the role's default spec_server_cache_dir
    # The compiled unit deployed on an empty cache directory: the first start compiles and fills it.
    host.sh("systemctl stop %s; rm -rf %s" % (host.unit, cache_dir))
    rc, out = host.playbook("deploy.yml", _compiled(host))
    assert rc == 0, out[-4000:]
    _serving(host)
    first = _start_load(host)
    # The role made the directory (the service user's, 0700) and the engine compiled its kernels into it.
    assert host.sh("stat -c '%%U %%a' %s" % cache_dir).split() == [user, "700"]
    kernels = _kernels(host, cache_dir)
    assert kernels > 0, "no compiled kernel in %s" % cache_dir
    # A control on a warm host: the same restart with the directory emptied (imports and weights in the page cache).
    emptied = _start(host, cache_dir, empty_cache=True)
    # The same unit again with its cache: the engine finds its graphs where the unit as shipped pointed it, and
    # compiles no kernel again (it writes only what it could not load).
    warm = _start(host, cache_dir, empty_cache=False)
    new_kernels = _kernels(host, cache_dir, newer=True)
    figures = {"first": first, "emptied_cache": emptied, "warm_cache": warm, "kernels": kernels,
               "kernels_compiled_again": new_kernels}
    os.makedirs(BUILD, exist_ok=True)
    with open(os.path.join(BUILD, "compile_cache.json"), "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=1)
    print("compile cache: %s" % json.dumps(figures))
    for cold in (first, emptied):
        assert cold["compile"] and cold["compile_cache"] == "miss", cold
    # What the pinned build does with a cached graph (engines/<engine>.yml): vLLM 0.32's CPU build cannot load
    # its own AOT graph ('finalize_loading') and says so; a build that loads it says "hit".
    assert warm["compile_cache"] == host.cfg["compile_cache_second_start"], warm
    assert warm["compile_cache"] == "hit" or warm.get("compile_cache_error"), warm
    assert new_kernels == 0, "%d kernels compiled again with a warm cache" % new_kernels
