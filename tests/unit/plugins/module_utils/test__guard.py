# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guard: the commit-confirmed guard end to end, with real processes.

The watcher runs as a real subprocess (started through a fake ``systemd-run`` on PATH) from the code
that ``install_library`` put on the "host"; units are real processes under a fake ``systemctl``
(guard_host.py); the production engine is a real loopback HTTP server holding mock GPU memory; the
candidate and its escaped worker are real holders on the NVML shim. Only systemd itself is faked.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard, _guard_lease, _guard_state, _lock, _unitfile
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.guard_host import (
    CAND_MIB, PROD_MIB, RUN, UNIT, Switch, gpu_procs, health, wait_gone, wait_until)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import REPO, alive


def test_deadline_passes_guard_restores_previous_unit(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    armed = sw.arm()
    assert armed["changed"] and armed["watcher"]["active"]
    monitor = gpus.monitor()          # an exporter polling NVML: must survive the guard's reclaim
    other = gpus.hold((1, 8192))      # a job on a GPU the service does not use
    candidate = sw.install_candidate(ignore_sigterm=True)
    escaped = gpus.orphan(0, 4096)    # a worker that left the candidate's cgroup
    _guard_state.renew(sw.statefile, RUN, 0.5)  # the controller's last heartbeat; then it is gone

    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard" and rec["why"] == "deadline", rec
    assert rec["run_id"] == RUN and rec["owner"]["awx_job_id"] == "77" and rec["label"] == "ngram k=4"
    assert rec["ready_at"] and rec["restored_at"] and rec["fault_at"] == rec["deadline"]
    assert 0 <= rec["seconds_deadline_to_ready"] < 60
    assert {s["pid"] for s in rec["reclaim"]["signalled"]} >= {escaped}
    wait_gone(candidate)
    wait_gone(escaped)
    assert alive(monitor) and alive(other)
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes   # byte-identical previous unit
    assert health(sw.port) == 200
    prod = int(sd.prop(UNIT, "MainPID"))
    procs, used = gpu_procs(0)
    assert procs == {prod: PROD_MIB} and used == PROD_MIB
    assert not os.path.exists(sw.lock)
    assert not os.path.exists(sw.statefile)
    wait_until(lambda: sw.watcher() is None, "the watcher exits 0 (transient unit unloaded)")
    argvs = [c["argv"] for c in sd.calls("systemctl")]
    assert ["reset-failed", UNIT] in argvs and ["daemon-reload"] in argvs
    assert ["kill", "--signal=SIGKILL", UNIT] in argvs  # the candidate ignored SIGTERM
    assert "restored_by_guard" in sd.journal(_guard_lease.watcher_name(UNIT))


def test_renew_keeps_it_armed_and_confirm_disarms(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    # 8 s: room for the candidate's start on a loaded machine before the first renewal.
    sw.arm(ttl=8)
    candidate = sw.install_candidate()
    state = _guard_state.renew(sw.statefile, RUN, 3)
    assert state["phase"] == "armed"
    watcher_pid = sw.watcher()["pid"]
    end = time.monotonic() + 4  # longer than the renewed ttl: only the renewals keep it armed
    while time.monotonic() < end:
        state = _guard_state.renew(sw.statefile, RUN, 3)
        assert state["phase"] == "armed" and state["lock_renewed"]
        time.sleep(0.5)
    assert alive(candidate) and alive(watcher_pid) and sw.records() == []
    with open(os.path.join(sw.lock, "owner")) as handle:
        assert json.load(handle)["deadline"] >= state["deadline"]  # the lock outlives the guard

    with pytest.raises(_guard_state.GuardError, match="belongs to run"):
        _guard_state.renew(sw.statefile, "someone-else", 3)
    done = _guard_lease.confirm(sw.statefile, RUN, sd.run_command, history=sw.history, unit=UNIT)
    assert done["changed"] and not os.path.exists(sw.statefile)
    wait_gone(watcher_pid)
    assert alive(candidate) and sw.records() == [] and os.path.isdir(sw.lock)
    again = _guard_lease.confirm(sw.statefile, RUN, sd.run_command, history=sw.history, unit=UNIT)
    assert again == {"changed": False, "guard": None}
    with pytest.raises(_guard_state.GuardError, match="no guard is armed"):
        _guard_state.renew(sw.statefile, RUN, 3)


def test_snapshot_checksum_mismatch_fails_truthfully_and_overwrites_nothing(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    sw.arm()
    candidate = sw.install_candidate()
    with open(sw.unit_path, "rb") as handle:
        candidate_bytes = handle.read()
    with open(sw.snapshot, "ab") as handle:
        handle.write(b"# edited\n")
    _guard_state.renew(sw.statefile, RUN, 0.3)

    rec = sw.wait_record()
    assert rec["outcome"] == "guard_restore_failed" and "changed since the guard was armed" in rec["reason"]
    assert "nothing was stopped or overwritten" in rec["reason"]
    assert alive(candidate)
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == candidate_bytes
    owner = _lock.read_owner(sw.lock)
    assert owner["guard"]["outcome"] == "guard_restore_failed"
    assert "guard ended that run" in _lock.dead_reason(sw.lock, owner, time.time())
    wait_until(lambda: (sw.watcher() or {}).get("exit") == _guard_state.EXIT_RESTORE_FAILED, "watcher exits 3")


def test_production_that_never_answers_is_recorded_and_keeps_the_lock(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd, never_ready=True)
    sw.arm(ready_timeout=2)
    sw.install_candidate()
    _guard_state.renew(sw.statefile, RUN, 0.3)
    rec = sw.wait_record()
    assert rec["outcome"] == "guard_restore_failed" and "does not answer" in rec["reason"], rec
    assert rec["ready_at"] is None and rec["restored_at"]
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes  # the files are back even so: a reboot boots production
    assert _lock.read_owner(sw.lock)["guard"]["outcome"] == "guard_restore_failed"


def test_no_unit_before_the_candidate_is_removed(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd, previous=False)
    sw.arm(ready_url=None)
    candidate = sw.install_candidate()
    sd.systemctl("enable", UNIT)
    _guard_state.renew(sw.statefile, RUN, 0.3)
    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard" and "candidate was removed" in rec["reason"], rec
    wait_gone(candidate)
    assert not os.path.exists(sw.unit_path)
    assert ["disable", UNIT] in [c["argv"] for c in sd.calls("systemctl")]
    assert gpu_procs(0) == ({}, 0)
    assert not os.path.exists(sw.lock)


def test_reboot_mid_switch_boots_the_previous_configuration(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    baseline = os.path.join(sw.state_dir, "baselines", "vllm__prod__reasoning.json")
    os.makedirs(os.path.dirname(baseline))
    with open(baseline, "w") as handle:
        handle.write('{"label": "production"}\n')
    saved = os.path.join(sw.state_dir, "snapshot", "vllm__prod__reasoning.json")
    never = os.path.join(sw.state_dir, "baselines", "never-measured.json")
    armed = sw.arm(ttl=600, baseline_files=[{"src": saved, "dest": baseline, "checksum": None, "take": True},
                                            {"src": never + ".saved", "dest": never, "checksum": None, "take": True}])
    # The guard took its own copy of the stored baseline; one that does not exist yet has nothing to put back.
    with open(saved) as handle:
        assert json.load(handle)["label"] == "production" and (os.stat(saved).st_mode & 0o777) == 0o600
    assert [item["dest"] for item in armed["guard"]["baseline_files"]] == [baseline]
    template = os.path.join(sd.unit_dir, _guard_lease.BOOT_TEMPLATE)
    assert armed["boot_unit"]["written"] == template
    instance = _guard_lease.boot_instance(UNIT)
    assert sd.systemctl("is-enabled", instance)[1].strip() == "enabled"
    with open(template) as handle:
        text = handle.read().replace("%i", "vllm-server")
    assert "Before=vllm-server.service\n" in text and "WantedBy=multi-user.target" in text
    assert "ConditionPathExists=%s\n" % sw.statefile in text and "Type=oneshot" in text
    sw.install_candidate()
    with open(baseline, "w") as handle:
        handle.write('{"label": "candidate"}\n')  # record.yml made the kept candidate the baseline
    sd.reboot()  # the candidate and the watcher die with the machine; the files stay
    assert health(sw.port) is None

    # What systemd does at boot: the enabled boot instance starts before the unit.
    assert sd.systemctl("start", instance)[0] == 0
    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard" and rec["why"] == "boot", rec
    assert rec["ready_at"] is None and "reboot" in rec["reason"]
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes
    with open(baseline) as handle:
        assert json.load(handle)["label"] == "production"
    assert ["start", "--no-block", UNIT] in [c["argv"] for c in sd.calls("systemctl")]
    wait_until(lambda: health(sw.port) == 200, "production answers after the boot")
    assert not os.path.exists(sw.statefile)


# ------------------------------------------------------------ a baseline parked beside its candidate

ENGINES = os.path.join(REPO, "tests", "mockgpu", "engines")
CANDIDATE = "vllm-server-candidate.service"


def _parked_switch(tmp_path, sd):
    """Production is a real mock vLLM with sleep mode, parked; the candidate runs beside it as a second
    unit holding GPU 0: what the switch leaves on the host while it benchmarks a parked experiment."""
    sw = Switch(tmp_path, sd, previous=False)
    profile = os.path.join(sw.root, "profile.json")
    with open(profile, "w") as handle:
        json.dump({"load_seconds": 0.2, "park": {"residual_mib": 2000, "weights_share": 0.5, "gib_per_s": 400.0}},
                  handle)
    sw.faults = os.path.join(sw.root, "faults.json")
    env = {"MOCK_ENGINE_PROFILE": profile, "MOCK_ENGINE_FAULTS": sw.faults, "MOCK_ENGINE_MAX_LIFETIME": "120",
           "VLLM_SERVER_DEV_MODE": "1", "CUDA_VISIBLE_DEVICES": "0"}
    argv = [os.path.join(ENGINES, "bin", "vllm"), "serve", "org/model-7b", "--host", "127.0.0.1", "--port",
            str(sw.port), "--gpu-memory-utilization", "0.5", "--enable-sleep-mode"]
    with open(sw.unit_path, "w") as handle:
        handle.write("[Service]\nType=exec\n%sExecStart=%s\n" % (
            "".join("Environment=%s=%s\n" % kv for kv in sorted(env.items())), " ".join(argv)))
    sd.systemctl("daemon-reload")
    assert sd.systemctl("start", UNIT)[0] == 0
    wait_until(lambda: health(sw.port) == 200, "production answers")
    sw.take_snapshot()
    sw.prod_pid = int(sd.prop(UNIT, "MainPID"))
    loaded = sw.loaded_mib = gpu_procs(0)[1]
    req = urllib.request.Request("http://127.0.0.1:%d/sleep?level=1" % sw.port, data=b"", method="POST")
    assert urllib.request.urlopen(req, timeout=10).status == 200
    assert gpu_procs(0)[1] < loaded / 4  # only the residual is left
    sw.cand_path = sd.write_unit(CANDIDATE, sd.holder_argv(0, CAND_MIB // 2))
    with open(sw.cand_path, "r+") as handle:  # the collection's header, as the server role writes it
        text = handle.read()
        handle.seek(0)
        handle.write(_unitfile.MANAGED_HEADER + " (role spec_server): edits here are overwritten.\n" + text)
    sd.systemctl("daemon-reload")
    assert sd.systemctl("start", CANDIDATE)[0] == 0
    wait_until(lambda: int(sd.prop(CANDIDATE, "MainPID") or 0) in gpu_procs(0)[0], "the candidate holds GPU 0")
    sw.cand_pid = int(sd.prop(CANDIDATE, "MainPID"))
    return sw


def _is_sleeping(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/is_sleeping" % port, timeout=5) as resp:
        return json.loads(resp.read())["is_sleeping"]


def test_guard_wakes_a_parked_baseline_instead_of_restarting_it(gpus, sd, tmp_path):
    sw = _parked_switch(tmp_path, sd)
    armed = sw.arm(park={"unit": CANDIDATE, "unit_path": sw.cand_path, "env_file": None, "wake_timeout": 30})
    assert armed["guard"]["park"]["unit"] == CANDIDATE
    assert armed["guard"]["reclaim"]["units"] == [UNIT, CANDIDATE]  # a restart after a failed wake stops both
    _guard_state.renew(sw.statefile, RUN, 0.3)

    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard" and "parked baseline woken" in rec["reason"], rec
    assert rec["park"]["woke"] and rec["park"]["wake_seconds"] is not None and rec["ready_at"]
    assert "reclaim" not in rec  # production itself was never stopped
    wait_gone(sw.cand_pid)
    assert not os.path.exists(sw.cand_path)
    assert int(sd.prop(UNIT, "MainPID")) == sw.prod_pid  # the same process: woken, not loaded again
    assert not _is_sleeping(sw.port) and health(sw.port) == 200
    assert list(gpu_procs(0)[0].values()) == [sw.loaded_mib]  # its worker has all its memory back, alone
    assert not os.path.exists(sw.lock) and not os.path.exists(sw.statefile)


def test_guard_restarts_a_parked_baseline_whose_wake_up_fails(gpus, sd, tmp_path):
    sw = _parked_switch(tmp_path, sd)
    sw.arm(park={"unit": CANDIDATE, "unit_path": sw.cand_path, "env_file": None, "wake_timeout": 30})
    with open(sw.faults, "w") as handle:  # the GPU another tenant filled meanwhile: the wake-up OOMs
        json.dump({"none": {"wake_oom": True}}, handle)
    _guard_state.renew(sw.statefile, RUN, 0.3)
    wait_gone(sw.prod_pid, 60)
    os.unlink(sw.faults)  # the restarted engine starts clean

    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard", rec
    assert not rec["park"]["woke"] and "waking the parked baseline failed" in rec["reason"]
    assert rec["reclaim"]["stopped"]
    assert not os.path.exists(sw.cand_path)
    new_pid = int(sd.prop(UNIT, "MainPID"))
    assert new_pid != sw.prod_pid and health(sw.port) == 200
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes


def _follow(sw, sd, ttl):
    """The controller's `switch_guard state=following` on a serving group's worker (docs/group.md)."""
    unit_state = {"unit": UNIT, "main_pid": sd.prop(UNIT, "MainPID"), "n_restarts": sd.prop(UNIT, "NRestarts")}
    return _guard_state.follow(sw.statefile, RUN, ttl, unit_state)


def test_a_following_worker_whose_group_held_keeps_the_candidate(gpus, sd, tmp_path):
    """Issue 33: the head was confirmed and the controller died before the worker's confirm. At the worker's
    deadline its engine still runs under the same main process: it keeps the candidate, as the head did."""
    sw = Switch(tmp_path, sd)
    sw.arm(ttl=8)
    candidate = sw.install_candidate()
    state = _follow(sw, sd, 1)
    assert state["follow"]["main_pid"] == candidate and state["phase"] == "armed"
    rec = sw.wait_record()
    assert rec["outcome"] == "kept_with_group" and rec["decision"] == "keep", rec
    assert "group held" in rec["reason"] and rec["restored_at"] is None
    assert alive(candidate) and int(sd.prop(UNIT, "MainPID")) == candidate
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() != sw.prod_bytes   # the candidate's unit stays
    assert not os.path.exists(sw.lock) and not os.path.exists(sw.statefile)
    wait_until(lambda: sw.watcher() is None, "the watcher exits 0")
    # A controller that confirms late finds what it wanted: the candidate kept, not a restore.
    late = _guard_lease.confirm(sw.statefile, RUN, sd.run_command, history=sw.history, unit=UNIT)
    assert late["changed"] is False and late["followed"]["outcome"] == "kept_with_group"


def test_a_following_worker_whose_group_broke_restores(gpus, sd, tmp_path):
    """The head's guard restored it, which took the group down: the worker's engine exited. At the worker's
    deadline the group did not hold, so it restores the previous unit, and the group ends on the baseline."""
    sw = Switch(tmp_path, sd)
    sw.arm(ttl=8)
    candidate = sw.install_candidate()
    _follow(sw, sd, 2)
    os.kill(candidate, 9)   # its head went away: NCCL errors end the worker's engine
    wait_gone(candidate)
    rec = sw.wait_record()
    assert rec["outcome"] == "restored_by_guard" and rec["follow"]["broke"], rec
    assert rec["follow"]["main_pid"] == candidate
    with open(sw.unit_path, "rb") as handle:
        assert handle.read() == sw.prod_bytes
    assert health(sw.port) == 200


def test_follow_is_refused_without_a_main_process_or_for_another_run_and_a_renewal_ends_it(gpus, sd, tmp_path):
    sw = Switch(tmp_path, sd)
    sw.arm(ttl=8)
    with pytest.raises(_guard_state.GuardError, match="has no main process"):
        _guard_state.follow(sw.statefile, RUN, 5, {"unit": UNIT, "main_pid": "0", "n_restarts": "0"})
    with pytest.raises(_guard_state.GuardError, match="belongs to run"):
        _guard_state.follow(sw.statefile, "someone-else", 5, {"unit": UNIT, "main_pid": "42", "n_restarts": "0"})
    assert "follow" not in _guard_state.read_state(sw.statefile)
    candidate = sw.install_candidate()
    _follow(sw, sd, 5)
    # The controller renews (its rollback's restore does first): it is in charge again, and the stop that follows
    # is not a broken group to the watcher.
    assert "follow" not in _guard_state.renew(sw.statefile, RUN, 5)
    sd.systemctl("stop", UNIT)
    wait_gone(candidate)
    time.sleep(2)  # two polls of the watcher
    assert sw.records() == [] and _guard_state.read_state(sw.statefile)["phase"] == "armed"
    _guard_lease.confirm(sw.statefile, RUN, sd.run_command, history=sw.history, unit=UNIT)


def test_group_held_reads_active_state_main_pid_and_restarts():
    follow = {"main_pid": 42, "n_restarts": 1, "since": "t"}
    assert _guard_state.group_held(follow, {"active_state": "active", "main_pid": "42", "n_restarts": "1"})[0]
    for changed, why in (({"active_state": "activating"}, "the unit is activating"),
                         ({"main_pid": "43"}, "main process changed"),
                         ({"n_restarts": "2"}, "systemd restarted it")):
        held, detail = _guard_state.group_held(follow, dict({"active_state": "active", "main_pid": "42",
                                                             "n_restarts": "1"}, **changed))
        assert not held and why in detail


def test_a_following_worker_restores_as_soon_as_its_group_breaks(gpus, sd, tmp_path):
    """Its deadline is far (the head's restore plus the grace), but once the engine went down with its head the
    watcher restores at its next poll, before the restarted engine can fail the restored head's rendezvous."""
    sw = Switch(tmp_path, sd)
    sw.arm(ttl=8)
    candidate = sw.install_candidate()
    _follow(sw, sd, 300)
    os.kill(candidate, 9)
    rec = sw.wait_record(deadline_s=60)
    assert rec["outcome"] == "restored_by_guard" and rec["why"] == "group_broke" and rec["follow"]["broke"], rec
    assert health(sw.port) == 200


def test_the_boot_time_is_pid_1s_start_in_a_container_too(tmp_path):
    """At boot the guard records when this system booted: PID 1's start (ticks after the kernel's boot), not the
    kernel's boot, which in a container (the mock hosts) is the machine's (seen: fault_at hours before the case)."""
    (tmp_path / "1").mkdir()
    (tmp_path / "uptime").write_text("1000.00 1800.00\n")
    # comm may hold spaces and parentheses; starttime is field 22 (index 19 after the closing parenthesis)
    fields = ["S", "0", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0", "0", "0", "0", "0", "20", "0", "1", "0", "90000"]
    (tmp_path / "1" / "stat").write_text("1 (sys (temd)) %s 123 456\n" % " ".join(fields))
    hz = os.sysconf("SC_CLK_TCK")
    assert _guard._boot_time(str(tmp_path), clock=lambda: 5000.0) == pytest.approx(4000.0 + 90000 / hz)
    (tmp_path / "1" / "stat").unlink()
    assert _guard._boot_time(str(tmp_path), clock=lambda: 5000.0) == pytest.approx(4000.0)
    (tmp_path / "uptime").unlink()
    assert _guard._boot_time(str(tmp_path)) is None
    # This machine's: after the kernel's boot, before now.
    kernel = time.time() - float(open("/proc/uptime").read().split()[0])
    assert kernel - 1 <= _guard._boot_time() <= time.time()
