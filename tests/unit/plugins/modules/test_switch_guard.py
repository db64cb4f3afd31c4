# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""switch_guard main(): arm / status / renew / confirm through the module, with the lock module beside it.

Same host as test__guard.py: a fake systemctl/systemd-run on PATH (module.run_command really runs them),
the watcher a real process running the code the module installed, holders on the NVML shim.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_lease, _guard_state
from ansible_collections.llmops.specdec.plugins.modules import switch_guard, switch_lock
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.guard_host import (
    FakeSystemd, wait_gone, wait_until)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import alive
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module

UNIT = "sglang-server.service"
RUN = "20261201T091200Z-4711"


@pytest.fixture
def sd(tmp_path, monkeypatch, shim):
    fake = FakeSystemd(tmp_path, monkeypatch, shim)
    monkeypatch.setattr(_guard_lease, "UNIT_DIR", fake.unit_dir)
    yield fake
    fake.cleanup()


@pytest.fixture
def host(tmp_path, sd):
    state_dir = str(tmp_path / "var" / "lib" / "llmops-specdec")
    os.makedirs(os.path.join(state_dir, "snapshot"))
    (tmp_path / "run").mkdir()
    unit_path = sd.write_unit(UNIT, ["/bin/true"])
    snapshot = os.path.join(state_dir, "snapshot", UNIT)
    with open(unit_path, "rb") as src, open(snapshot, "wb") as dst:
        dst.write(src.read())
    return {"state_dir": state_dir, "unit_path": unit_path, "snapshot": snapshot,
            "lock": str(tmp_path / "run" / "llmops-specdec.lock"), "lib": str(tmp_path / "lib"),
            "statefile": _guard_state.state_path(state_dir, UNIT)}


def guard(host, **kw):
    args = {"unit": UNIT, "state_dir": host["state_dir"], "lock_path": host["lock"], "lib_dir": host["lib"],
            "python": sys.executable, "poll_interval": 0.2, "_ansible_diff": True}
    args.update(kw)
    return args


def arm_args(host, **kw):
    args = dict(state="armed", run_id=RUN, unit_path=host["unit_path"], snapshot=host["snapshot"], ttl=600,
                engine="sglang", ready_url="http://127.0.0.1:1", reclaim={"scope": "gpu", "gpus": ["0"]},
                owner={"controller": "ctl", "awx_job_id": "99", "label": "eagle3"})
    args.update(kw)
    return guard(host, **args)


def test_arm_status_renew_confirm(host, sd):
    lock = run_module(switch_lock.main, {"path": host["lock"], "run_id": RUN, "ttl": 300})
    assert lock["changed"]

    check = run_module(switch_guard.main, dict(arm_args(host), _ansible_check_mode=True))
    assert check["changed"] and check["diff"]["before"] == {} and check["diff"]["after"]["run_id"] == RUN
    assert check["library"]["written"] and not os.path.exists(host["lib"])
    assert not os.path.exists(host["statefile"]) and sd.calls("systemd-run") == []

    armed = run_module(switch_guard.main, arm_args(host))
    assert armed["changed"] and armed["armed"] and armed["watcher"]["active"] and armed["watcher"]["started"]
    assert armed["boot_unit"] == {"name": "llmops-specdec-guard-boot@sglang-server.service",
                                  "written": os.path.join(sd.unit_dir, _guard_lease.BOOT_TEMPLATE), "enabled": True}
    assert armed["guard"]["restore"]["source"] == host["snapshot"] and len(armed["guard"]["restore"]["sha256"]) == 64
    assert armed["guard"]["owner"] == {"controller": "ctl", "awx_job_id": "99", "label": "eagle3"}
    assert armed["guard"]["reclaim"] == {"scope": "gpu", "gpus": ["0"], "units": [UNIT]}
    assert 590 < armed["remaining"] <= 600 and armed["restored"] is False
    watcher = sd.unit(_guard_lease.watcher_name(UNIT))["pid"]

    rearmed = run_module(switch_guard.main, arm_args(host))
    assert rearmed["library"]["written"] == [] and rearmed["boot_unit"]["written"] is None
    assert len(sd.calls("systemd-run")) == 1 and sd.unit(_guard_lease.watcher_name(UNIT))["pid"] == watcher

    status = run_module(switch_guard.main, guard(host, state="status"))
    assert status["changed"] is False and status["armed"] and status["watcher"]["active"]
    assert status["boot_unit"]["enabled"] and status["last_record"] is None

    wrong = run_module(switch_guard.main, guard(host, state="renewed", run_id="someone", ttl=60), FailJson)
    assert "belongs to run %s" % RUN in wrong["msg"] and wrong["armed"]
    renewed = run_module(switch_guard.main, guard(host, state="renewed", run_id=RUN, ttl=1200))
    assert renewed["changed"] and renewed["lock_renewed"] and 1190 < renewed["remaining"] <= 1200
    with open(os.path.join(host["lock"], "owner")) as handle:
        assert json.load(handle)["deadline"] >= renewed["deadline"]

    check = run_module(switch_guard.main, guard(host, state="confirmed", run_id=RUN, _ansible_check_mode=True))
    assert check["changed"] and os.path.exists(host["statefile"])
    done = run_module(switch_guard.main, guard(host, state="confirmed", run_id=RUN))
    assert done["changed"] and not done["armed"] and not os.path.exists(host["statefile"])
    assert done["diff"]["before"]["run_id"] == RUN and done["diff"]["after"] == {}
    wait_gone(watcher)
    again = run_module(switch_guard.main, guard(host, state="confirmed", run_id=RUN))
    assert again["changed"] is False
    assert run_module(switch_guard.main, guard(host, state="status"))["armed"] is False
    assert run_module(switch_lock.main, {"path": host["lock"], "run_id": RUN, "state": "unlocked"})["changed"]


def test_the_controller_learns_that_the_guard_restored(host, sd, gpu_host):
    gpu_host(1)
    run_module(switch_lock.main, {"path": host["lock"], "run_id": RUN})
    run_module(switch_guard.main, arm_args(host, snapshot="absent", ready_url=None))
    os.unlink(host["unit_path"])  # there was no unit before: the role installs the candidate
    sd.write_unit(UNIT, sd.holder_argv(0, 1000))
    sd.systemctl("daemon-reload")
    sd.systemctl("start", UNIT)
    candidate = int(sd.prop(UNIT, "MainPID"))
    run_module(switch_guard.main, guard(host, state="renewed", run_id=RUN, ttl=0.3))  # then the controller stalls

    wait_until(lambda: not os.path.exists(host["statefile"]), "the guard restores")
    wait_gone(candidate)
    late = run_module(switch_guard.main, guard(host, state="renewed", run_id=RUN, ttl=60), FailJson)
    assert "no guard is armed" in late["msg"] and late["restored"] is True
    assert late["last_record"]["outcome"] == "restored_by_guard" and late["last_record"]["run_id"] == RUN
    confirm = run_module(switch_guard.main, guard(host, state="confirmed", run_id=RUN), FailJson)
    assert "already ended run" in confirm["msg"] and confirm["restored"] is True
    status = run_module(switch_guard.main, guard(host, state="status"))
    assert status["last_record"]["why"] == "deadline" and not status["armed"]
    assert not os.path.exists(host["unit_path"]) and not os.path.exists(host["lock"])
    assert not alive(candidate)


def test_arm_refuses_a_missing_snapshot_and_bad_options(host, sd):
    missing = run_module(switch_guard.main, arm_args(host, snapshot=host["snapshot"] + ".nope"), FailJson)
    assert "does not exist" in missing["msg"] and "not armed" in missing["msg"]
    assert not os.path.exists(host["statefile"]) and sd.calls("systemd-run") == []
    assert "ttl must be > 0" in run_module(switch_guard.main, arm_args(host, ttl=0), FailJson)["msg"]
    assert "needs run_id" in run_module(switch_guard.main, guard(host, state="confirmed"), FailJson)["msg"]
    bad = run_module(switch_guard.main, dict(arm_args(host), unit="vllm@0.service"), FailJson)
    assert "plain service units" in bad["msg"]
    assert run_module(switch_guard.main, guard(host, state="status"), ExitJson)["armed"] is False


def test_following_records_the_running_unit_and_is_refused_without_one(host, sd):
    """state=following (a serving group's worker, docs/group.md): the deadline moves and the unit's main PID and
    restart count are recorded; refused for a unit that runs nothing, for another run, and in check mode it only
    says whether it would."""
    run_module(switch_lock.main, {"path": host["lock"], "run_id": RUN, "ttl": 300})
    run_module(switch_guard.main, arm_args(host))
    stopped = run_module(switch_guard.main, guard(host, state="following", run_id=RUN, ttl=300), FailJson)
    assert "has no main process" in stopped["msg"] and "follow" not in stopped["guard"]
    sd.write_unit(UNIT, ["/bin/sleep", "600"])
    sd.systemctl("daemon-reload")
    assert sd.systemctl("start", UNIT)[0] == 0
    pid = int(sd.prop(UNIT, "MainPID"))
    check = run_module(switch_guard.main, guard(host, state="following", run_id=RUN, ttl=300, _ansible_check_mode=True))
    assert check["changed"] and "follow" not in _guard_state.read_state(host["statefile"])
    wrong = run_module(switch_guard.main, guard(host, state="following", run_id="someone", ttl=300), FailJson)
    assert "belongs to run %s" % RUN in wrong["msg"]
    follows = run_module(switch_guard.main, guard(host, state="following", run_id=RUN, ttl=300))
    assert follows["changed"] and follows["guard"]["follow"]["main_pid"] == pid and 290 < follows["remaining"] <= 300
    assert follows["msg"].startswith("guard for %s follows its group's head until" % UNIT)
    done = run_module(switch_guard.main, guard(host, state="confirmed", run_id=RUN))
    assert done["changed"] and not os.path.exists(host["statefile"])
    sd.systemctl("stop", UNIT)
