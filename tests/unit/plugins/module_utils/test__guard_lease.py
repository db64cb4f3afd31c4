# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guard_lease: arming refuses what it cannot restore from, confirm says when the guard already ended, and
the code installed on the host is the guard and what it imports, never Ansible.

Under the fake systemd of guard_host.py (real processes, no GPU needed).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_lease, _guard_state, _lock
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.guard_host import (
    OWNER, RUN, UNIT, Switch)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import REPO


def test_arm_refuses_bad_sources_and_another_runs_guard(sd, tmp_path):
    sw = Switch(tmp_path, sd, previous=False)
    with pytest.raises(_guard_state.GuardError, match="does not exist"):
        sw.arm(snapshot=os.path.join(sw.state_dir, "snapshot", "missing"))
    with open(os.path.join(sw.state_dir, "snap"), "w") as handle:
        handle.write("x")
    with pytest.raises(_guard_state.GuardError, match="not the expected"):
        sw.arm(snapshot=os.path.join(sw.state_dir, "snap"), snapshot_checksum="0" * 64)
    with pytest.raises(_guard_state.GuardError, match="plain service units"):
        sw.arm(unit="vllm@0.service")
    assert not os.path.exists(sw.statefile) and sd.calls("systemd-run") == []

    # Another run's guard (written by hand, no watcher): arm, renew and confirm refuse it.
    os.makedirs(os.path.dirname(sw.statefile), mode=0o700)
    other = _guard_lease.build_state(sw.params(run_id="run-other", snapshot="absent"), time.time())
    _lock.write_json_atomic(sw.statefile, other)
    with pytest.raises(_guard_state.GuardError, match="armed by another run: run run-other"):
        sw.arm(ready_url=None)
    with pytest.raises(_guard_state.GuardError, match="belongs to run run-other"):
        _guard_lease.confirm(sw.statefile, RUN, sd.run_command)
    forced = _guard_lease.confirm(sw.statefile, RUN, sd.run_command, force=True)
    assert forced["changed"] and forced["guard"]["run_id"] == "run-other"

    # A guard that is restoring cannot be renewed or confirmed.
    _lock.write_json_atomic(sw.statefile, dict(other, run_id=RUN, phase="restoring", restoring_since="now"))
    with pytest.raises(_guard_state.GuardError, match="too late to renew"):
        _guard_state.renew(sw.statefile, RUN, 10)
    with pytest.raises(_guard_state.GuardError, match="being restored"):
        _guard_lease.confirm(sw.statefile, RUN, sd.run_command)


def test_confirm_after_the_guard_restored_says_so(sd, tmp_path):
    sw = Switch(tmp_path, sd, previous=False)
    _guard_state.append_history(sw.history, {"unit": UNIT, "run_id": RUN, "outcome": "restored_by_guard",
                                             "at": "t", "restored_at": "t1", "reason": "deadline"})
    with pytest.raises(_guard_state.GuardError, match="already ended run run-0001: restored_by_guard at t1") as exc:
        _guard_lease.confirm(sw.statefile, RUN, sd.run_command, history=sw.history, unit=UNIT)
    assert exc.value.record["outcome"] == "restored_by_guard"


def test_state_file_and_library_on_the_host(sd, tmp_path):
    sw = Switch(tmp_path, sd, previous=False)
    armed = sw.arm(ready_url=None, ttl=600)
    assert os.stat(sw.statefile).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(sw.statefile)).st_mode & 0o777 == 0o700
    state = _guard_state.read_state(sw.statefile)
    assert state["owner"] == OWNER and state["restore"] == {"source": "absent"}
    assert state["reclaim"]["units"] == [UNIT] and state["lock_path"] == sw.lock
    pkg = os.path.join(sw.lib, "ansible_collections", "llmops", "specdec", "plugins", "module_utils")
    assert sorted(os.path.basename(p) for p in armed["library"]["written"] if os.path.dirname(p) == pkg and not p.endswith("__init__.py")) \
        == sorted(_guard_lease.payload())
    for path in armed["library"]["written"]:
        assert os.stat(path).st_mode & 0o777 == 0o644
    with open(os.path.join(pkg, "_guard.py"), "rb") as handle:
        with open(os.path.join(REPO, "plugins", "module_utils", "_guard.py"), "rb") as mine:
            assert handle.read() == mine.read()
    assert _guard_lease.install_library(sw.lib) == []  # rewritten only when content changed

    run = sd.calls("systemd-run")[-1]["argv"]
    assert run[0] == "--unit=" + _guard_lease.watcher_name(UNIT) and "--setenv=PYTHONPATH=" + sw.lib in run
    assert run[-4:] == ["watch", sw.statefile, "--poll", "0.2"]
    # The installed copy runs on its own: no checkout, no test PYTHONPATH.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sw.lib}
    out = subprocess.run([sys.executable, "-c", "from ansible_collections.llmops.specdec.plugins.module_utils "
                          "import _guard; print(_guard.__file__)"], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == os.path.join(pkg, "_guard.py")
    # A second arm of the same run keeps the watcher (same code, still active).
    before = len(sd.calls("systemd-run"))
    again = sw.arm(ready_url=None, ttl=600)
    assert again["library"]["written"] == [] and len(sd.calls("systemd-run")) == before
    assert again["guard"]["renewals"] == 1


def test_payload_is_the_guard_and_what_it_imports_and_never_ansible(monkeypatch):
    files = _guard_lease.payload()
    assert {"_guard.py", "_lock.py", "_reclaim.py", "_procs.py", "_nvml.py", "_systemd.py"} <= set(files)
    for name, data in files.items():
        with open(os.path.join(REPO, "plugins", "module_utils", name), "rb") as handle:
            assert handle.read() == data
        ours, ansible = _guard_lease._imports(name, data)
        assert ours <= set(files) and not ansible, (name, ansible)
    real = _guard_lease._read_module
    monkeypatch.setattr(_guard_lease, "_read_module", lambda name: (
        b"from ansible.module_utils.urls import open_url\n" if name == "_systemd.py" else real(name)))
    with pytest.raises(_guard_state.GuardError, match="_systemd.py imports ansible.module_utils.urls"):
        _guard_lease.payload()


@pytest.mark.parametrize("unit", ["sshd.service", "vllm-server.service"])
def test_the_guard_is_armed_only_for_a_candidate_unit_name(unit):
    with pytest.raises(_guard_state.GuardError, match="must be a candidate unit name"):
        _guard_lease._park_section({"unit": "vllm-server.service",
                                    "park": {"unit": unit, "unit_path": "/etc/systemd/system/" + unit}})
