# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""weights_prewarm main() on real files and this machine's page cache. In-process, so the priority calls
(which would renice pytest itself) are recorded instead; the mock host runs them for real (molecule/switch)."""
from __future__ import annotations

import os

import pytest
from ansible.module_utils import basic

from ansible_collections.llmops.specdec.plugins.module_utils import _prewarm
from ansible_collections.llmops.specdec.plugins.modules import weights_prewarm
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import (
    FailJson, patch_exits, run_module)

MIB = 1 << 20


@pytest.fixture
def calls(monkeypatch):
    patch_exits(monkeypatch)
    seen = []
    monkeypatch.setattr(weights_prewarm.os, "nice", lambda inc: seen.append(("nice", inc)))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command",
                        lambda self, argv, **kw: seen.append(tuple(argv)) or (0, "", ""))
    return seen


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    for i in range(2):
        path = d / ("model-%d.safetensors" % i)
        path.write_bytes(os.urandom(4 * MIB))
        fd = os.open(str(path), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    if any(_prewarm.resident_pages(n, s).count(1) for n, s in _prewarm.weight_files(str(d))):
        pytest.skip("this filesystem keeps files in memory (tmpfs)")
    return str(d)


def test_reads_what_fits_at_idle_priority_and_changes_nothing(calls, model):
    out = run_module(weights_prewarm.main, {"paths": [model, "org/draft"], "margin_gib": 0.5})
    assert out["changed"] is False and out["fits"] and out["skipped"] is None and out["stopped"] is None
    assert out["files"] == 2 and out["read_bytes"] == out["total_bytes"] == 8 * MIB and out["cached_bytes"] == 0
    assert out["missing"] == ["org/draft"] and out["io_priority"] == "idle"
    assert ("nice", 19) in calls and ("/usr/bin/ionice", "-c", "3", "-p", str(os.getpid())) in calls
    again = run_module(weights_prewarm.main, {"paths": [model], "margin_gib": 0.5})
    assert again["read_bytes"] == 0 and again["cached_bytes"] == 8 * MIB


def test_check_mode_plans_and_reads_nothing(calls, model):
    out = run_module(weights_prewarm.main, {"paths": [model], "margin_gib": 0.5, "_ansible_check_mode": True})
    assert out["read_bytes"] == 0 and out["msg"].startswith("would read 0.01 GiB of 2 files")
    assert calls == []  # no priority change: nothing was read
    assert _prewarm.plan([model], open("/proc/meminfo").read(), 0)["cached_bytes"] == 0


def test_what_does_not_fit_is_skipped_with_the_figures(calls, model):
    with open("/proc/meminfo") as f:
        available = _prewarm.meminfo(f.read())["MemAvailable"]
    out = run_module(weights_prewarm.main, {"paths": [model], "margin_gib": 0, "reserve_bytes": available})
    assert not out["fits"] and out["read_bytes"] == 0 and out["skipped"].startswith("does not fit")
    assert out["msg"] == out["skipped"] and calls == []


def test_bad_numbers_are_refused_before_anything_is_read(calls, model):
    out = run_module(weights_prewarm.main, {"paths": [model], "margin_gib": -1}, outcome=FailJson)
    assert "must not be negative" in out["msg"]
    out = run_module(weights_prewarm.main, {"paths": [model], "timeout": 0}, outcome=FailJson)
    assert "timeout must be positive" in out["msg"]
    assert run_module(weights_prewarm.main, {"paths": [model], "io_priority": "normal"})["io_priority"] == "normal"
    assert ("nice", 19) in calls and not any(c[0] == "/usr/bin/ionice" for c in calls)


def test_a_parked_baselines_weights_are_reserved(calls, tmp_path):
    big = tmp_path / "big.safetensors"
    with open(big, "wb") as f:
        f.truncate(256 * MIB)  # sparse: its size is what counts, and check mode reads nothing
    with open("/proc/meminfo") as f:
        available = _prewarm.meminfo(f.read())["MemAvailable"]
    args = {"paths": [str(big)], "margin_gib": 0, "reserve_bytes": available - 384 * MIB, "_ansible_check_mode": True}
    # about 384 MiB beyond the reserve for 256 MiB to read (other processes may move MemAvailable by a few MiB)
    assert run_module(weights_prewarm.main, args)["fits"]
    out = run_module(weights_prewarm.main, dict(args, reserve_paths=[str(big)]))  # parking copies those 256 MiB
    assert out["reserve_bytes"] == available - 128 * MIB and not out["fits"] and out["read_bytes"] == 0
