# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_restore: the one restore that the guard and the controller's rollback both run (issue 30, "one rollback").

Two boundaries, as the guard's tests: a run_command that records the systemctl calls (the order and the words
of a restore), and the fake systemd with real processes on the NVML shim (guard_host.py), where a real
candidate holds a GPU and production is a real loopback engine: the controller's rollback is run from the
armed guard's own state file, the input the guard restores from.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state, _restore, _unitfile
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.guard_host import (
    UNIT, Switch, gpu_procs, health, wait_gone, wait_until)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import alive

UNIT_TEXT = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n"
KEYS = ("file", "started", "changed", "n_restarts")


@pytest.fixture
def unit(tmp_path):
    path = tmp_path / "vllm-server.service"
    path.write_text(UNIT_TEXT)
    return path


def controller(run, unit, path, src, **kw):
    """The controller's rollback without a reclaim (spec_unit's restore): the source's owner checked too."""
    return _restore.restore(_restore.plan(unit, path, src), run, free=kw.pop("free", False), check_owner=True, **kw)


def systemctl_log():
    """run_command that records the systemctl calls of a restore (the lowest boundary: systemd itself)."""
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[1] == "show":  # NRestarts after the restart (a manual restart resets it)
            return 0, "0\n", ""
        return (1 if argv[1] == "reset-failed" else 0), "", ""
    return run, calls


# ------------------------------------------------------------ moved from test__unitfile (its restore is this one)

def test_restore_puts_the_checked_source_back_clears_the_failed_state_and_restarts(tmp_path, unit):
    src = tmp_path / "snapshot.service"
    src.write_text(UNIT_TEXT.replace("true", "false"))
    os.chmod(src, 0o600)
    run, calls = systemctl_log()
    done = controller(run, "vllm-server.service", str(unit), str(src))
    assert {k: done[k] for k in KEYS} == {"file": "restored", "started": True, "changed": True, "n_restarts": 0}
    assert done["reclaim"] is None and done["warnings"] == []
    assert unit.read_text() == src.read_text() and (os.stat(unit).st_mode & 0o777) == 0o644
    assert calls == [["systemctl", "reset-failed", "vllm-server.service"], ["systemctl", "daemon-reload"],
                     ["systemctl", "restart", "vllm-server.service"],
                     ["systemctl", "show", "vllm-server.service", "--property=NRestarts", "--value"]]
    # The same file again is not rewritten, but the service is still restarted (the candidate ran in it).
    assert controller(run, "vllm-server.service", str(unit), str(src))["file"] == "unchanged"
    assert calls[-2] == ["systemctl", "restart", "vllm-server.service"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
@pytest.mark.parametrize("spoil, why", [
    (lambda p: os.chown(p, 65534, 0), "owned by uid 65534, not root"),
    (lambda p: os.chmod(p, 0o664), "writable by others than root (mode 0664)"),
    (lambda p: (os.unlink(p), os.symlink("/etc/hostname", p)), "not a regular file"),
    (os.unlink, "is missing"),
])
def test_restore_refuses_a_source_someone_else_could_have_changed_and_touches_nothing(tmp_path, unit, spoil, why):
    src = tmp_path / "snapshot.service"
    src.write_text("[Service]\nExecStart=/usr/bin/evil\n")
    os.chmod(src, 0o600)
    spoil(str(src))
    run, calls = systemctl_log()
    with pytest.raises(_restore.RestoreError, match="refusing to install .* as .*%s; nothing was changed" % re.escape(why)):
        controller(run, "vllm-server.service", str(unit), str(src))
    assert unit.read_text() == UNIT_TEXT and calls == []


def test_restore_without_a_source_removes_the_candidate_and_reloads(tmp_path, unit):
    run, calls = systemctl_log()
    assert controller(run, "vllm-server.service", str(unit), None, check_mode=True)["file"] == "removed"
    assert unit.exists() and calls == []
    done = controller(run, "vllm-server.service", str(unit), None)
    assert {k: done[k] for k in KEYS} == {"file": "removed", "started": False, "changed": True, "n_restarts": None}
    # As the guard does: the candidate's [Install] links go with it, and its failed state is cleared.
    assert not unit.exists() and calls == [["systemctl", "disable", "vllm-server.service"],
                                           ["systemctl", "reset-failed", "vllm-server.service"],
                                           ["systemctl", "daemon-reload"]]
    assert controller(run, "vllm-server.service", str(unit), None)["changed"] is False


def test_a_failed_restart_is_an_error_with_systemds_words(tmp_path, unit):
    src = tmp_path / "snapshot.service"
    src.write_text(UNIT_TEXT)
    os.chmod(src, 0o600)

    def run(argv):
        return (5, "", "Unit vllm-server.service has a bad setting.") if argv[1] == "restart" else (0, "", "")
    with pytest.raises(_restore.RestoreError, match="systemctl restart vllm-server.service failed .rc=5.: Unit") as exc:
        controller(run, "vllm-server.service", str(unit), str(src))
    assert exc.value.stage == "start" and exc.value.result["file"] == "unchanged"


def test_a_candidate_unit_is_removed_only_when_the_collection_wrote_it(tmp_path):
    foreign = tmp_path / "sshd-candidate.service"
    foreign.write_text("[Service]\nExecStart=/usr/sbin/sshd -D\n")
    run, calls = systemctl_log()
    done = controller(run, "sshd-candidate.service", str(foreign), None, owned_only=True)
    assert done["file"] == "foreign" and not done["changed"] and foreign.exists() and calls == []
    ours = tmp_path / "vllm-server-candidate.service"
    ours.write_text(_unitfile.MANAGED_HEADER + " (role spec_server)\n[Service]\nExecStart=/bin/true\n")
    done = controller(run, "vllm-server-candidate.service", str(ours), None, owned_only=True)
    assert done["file"] == "removed" and not ours.exists()


def test_a_parked_candidates_secrets_go_with_it_even_when_its_unit_is_left(tmp_path):
    """park_rollback.yml's call, as the guard's removal of the candidate beside a parked baseline."""
    run, calls = systemctl_log()
    for header in ("", _unitfile.MANAGED_HEADER + " (role spec_server)\n"):
        path = tmp_path / "vllm-server-candidate.service"
        path.write_text(header + "[Service]\nExecStart=/bin/true\n")
        env = tmp_path / "vllm-server-candidate.service.env"
        env.write_text("VLLM_API_KEY=x\n")
        plan = _restore.plan("vllm-server-candidate.service", str(path), None, env_file=str(env))
        done = _restore.restore(plan, run, free=False, owned_only=True)
        assert not env.exists() and path.exists() == (not header)
        assert done["file"] == ("removed" if header else "foreign")
    assert calls == [["systemctl", "disable", "vllm-server-candidate.service"],
                     ["systemctl", "reset-failed", "vllm-server-candidate.service"], ["systemctl", "daemon-reload"]]


# ------------------------------------------------------------ the guard's checks, for the controller too

def test_a_source_changed_since_the_guard_was_armed_touches_nothing(tmp_path, unit):
    src = tmp_path / "snapshot.service"
    src.write_text(UNIT_TEXT.replace("true", "false"))
    os.chmod(src, 0o600)
    armed = _unitfile.sha256_file(str(src))
    src.write_text(UNIT_TEXT.replace("true", "evil"))
    run, calls = systemctl_log()
    with pytest.raises(_restore.RestoreError, match="changed since the guard was armed") as exc:
        _restore.restore(_restore.plan("vllm-server.service", str(unit), str(src), armed), run)
    assert exc.value.stage == "verify" and calls == [] and unit.read_text() == UNIT_TEXT


# ------------------------------------------------------------ real processes: the candidate on a GPU

def _armed_plan(sw):
    """What the controller's rollback restores from: the armed guard's own state file (the guard's input)."""
    sw.arm(ttl=600)
    state = _guard_state.read_state(sw.statefile)
    assert state["restore"]["source"] == sw.snapshot and state["reclaim"]["units"] == [UNIT]
    return state


def test_the_controllers_rollback_from_the_guards_state_stops_the_candidate_and_restarts_production(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    plan = _armed_plan(sw)
    candidate = sw.install_candidate()
    assert health(sw.port) is None

    lines = []
    done = _restore.restore(plan, sd.run_command, log=lambda msg, level=6: lines.append(msg))
    assert done["file"] == "restored" and done["started"] and done["warnings"] == []
    assert done["reclaim"]["ok"] and done["reclaim"]["stopped"]
    assert [u["name"] for u in done["reclaim"]["units"]][:1] == [UNIT]
    wait_gone(candidate)
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes
    wait_until(lambda: health(sw.port) == 200, "production answers again")
    argvs = [c["argv"] for c in sd.calls("systemctl")]
    assert argvs.index(["reset-failed", UNIT]) < argvs.index(["restart", UNIT])
    assert any("put back %s" % sw.unit_path in line for line in lines), lines
    # The guard is still armed: the controller confirms it afterwards (guard_confirm.yml), nothing here removed it.
    assert os.path.exists(sw.statefile) and os.path.exists(sw.lock)


def test_check_mode_reports_and_touches_nothing(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    plan = _armed_plan(sw)
    candidate = sw.install_candidate()
    with open(sw.unit_path, "rb") as handle:
        candidate_bytes = handle.read()
    calls = len(sd.calls("systemctl"))

    done = _restore.restore(plan, sd.run_command, check_mode=True)
    assert done["file"] == "restored" and done["started"] and done["reclaim"] is None
    assert alive(candidate) and len(sd.calls("systemctl")) == calls
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == candidate_bytes


def test_a_lost_lease_after_the_reclaim_leaves_the_files_to_the_guard(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    plan = _armed_plan(sw)
    candidate = sw.install_candidate()
    with open(sw.unit_path, "rb") as handle:
        candidate_bytes = handle.read()

    with pytest.raises(_restore.RestoreError, match="lease on the host's guard was lost.*guard took over") as exc:
        _restore.restore(plan, sd.run_command, lease_lost=lambda: "the guard took over")
    assert exc.value.stage == "lease" and exc.value.result["reclaim"]["stopped"]
    wait_gone(candidate)  # the reclaim ran: the guard's restore finds the GPUs free
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == candidate_bytes
    assert ["restart", UNIT] not in [c["argv"] for c in sd.calls("systemctl")]


def test_a_reclaim_that_fails_is_a_warning_and_production_is_started_all_the_same(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    plan = _armed_plan(sw)
    plan["reclaim"]["gpus"] = ["7"]  # not on this host: the reclaim fails before it stops anything
    candidate = sw.install_candidate()
    warned = []

    done = _restore.restore(plan, sd.run_command, warn=warned.append)
    assert not done["reclaim"]["ok"] and done["reclaim"]["stopped"]  # the unit's own stop still ran
    assert done["warnings"] == warned and len(warned) == 1
    assert warned[0].startswith(_restore.RECLAIM_WARNING) and "7" in warned[0]
    wait_gone(candidate)
    assert done["started"] and done["file"] == "restored"
    wait_until(lambda: health(sw.port) == 200, "production answers again")
    assert gpu_procs(0)[1] > 0  # production holds its GPU again


def test_the_guards_rule_a_unit_that_will_not_stop_is_not_started(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    plan = _armed_plan(sw)
    plan["reclaim"]["gpus"] = ["7"]  # the reclaim fails before it stops anything; then systemd refuses the stop
    candidate = sw.install_candidate()
    starts = len([c for c in sd.calls("systemctl") if c["argv"][0] in ("start", "restart")])

    def run(argv):
        if argv[:2] in (["systemctl", "stop"], ["systemctl", "kill"]):
            return 1, "", "Access denied"
        return sd.run_command(argv)
    with pytest.raises(_restore.RestoreError, match="could not be stopped .*Access denied") as exc:
        _restore.restore(plan, run, require_stopped=True, no_block=True)
    assert exc.value.stage == "stop" and exc.value.result["file"] == "restored"  # a reboot boots production
    assert alive(candidate) and len([c for c in sd.calls("systemctl") if c["argv"][0] in ("start", "restart")]) == starts
    assert json.dumps(exc.value.result)  # what the guard writes to its history
