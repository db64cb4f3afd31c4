# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_reclaim: the whole procedure against the real NVML shim and real holder processes.

Only systemctl is faked (FakeUnits); NVML is the shim, processes, signals and /proc are real.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pynvml

from ansible_collections.llmops.specdec.plugins.module_utils import _nvml, _procs, _reclaim, _systemd
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import (
    NOBODY, REPO, UUIDS, FakeUnits, alive)

PCI = "CUDA_DEVICE_ORDER=PCI_BUS_ID"


@pytest.fixture
def host(gpu_host):
    return gpu_host()


@pytest.fixture
def units(monkeypatch):
    return FakeUnits(monkeypatch, _systemd)


def params(**kw):
    base = {"units": [], "gpus": [], "scope": "unit", "protect": list(_reclaim.DEFAULT_PROTECT),
            "stop_timeout": 10, "term_timeout": 5, "verify_timeout": 10, "max_used_mib": 0}
    base.update(kw)
    return base


def run(host, systemctl, check_mode=False, nvml_lib=None, warn=None, **kw):
    return _reclaim.reclaim(params(**kw), systemctl, check_mode=check_mode, dev_dir=host.dev, nvml_lib=nvml_lib,
                            warn=warn)


def by_pid(rows):
    return {row["pid"]: row for row in rows}


def test_gpu_scope_frees_selected_gpus_and_spares_the_rest(host, units):
    big = host.hold((0, 100000))
    stubborn = host.hold((0, 2048), ignore_sigterm=True)
    orphan = host.orphan(1, 4096)
    other = host.hold((2, 8192))  # on an unselected GPU
    monitor = host.monitor()      # holds every /dev/nvidia* node, no compute context
    result = run(host, units, scope="gpu", gpus=["0", UUIDS[1]])

    assert result["changed"] is True
    signalled = by_pid(result["signalled"])
    assert set(signalled) == {big, stubborn, orphan}
    assert signalled[big]["signal"] == "SIGTERM"
    assert signalled[stubborn]["signal"] == "SIGKILL"  # ignores SIGTERM: killed without waiting
    assert signalled[orphan]["signal"] == "SIGTERM" and signalled[orphan]["gpus"] == [1]
    assert signalled[big]["mib"] == 100000 and signalled[big]["source"] == "nvml"
    gpus = {g["index"]: g for g in result["gpus"]}
    assert set(gpus) == {0, 1}
    assert gpus[0]["used_mib_before"] == 102048 and gpus[0]["used_mib_after"] == 0
    assert gpus[1]["used_mib_after"] == 0 and gpus[0]["memory_struct"] == "v2"
    assert {p["pid"] for p in gpus[0]["processes_before"]} == {big, stubborn}
    assert gpus[0]["processes_after"] == []
    assert alive(other) and alive(monitor)
    assert not alive(big) and not alive(stubborn) and not alive(orphan)
    assert result["diff"]["after"] == {"gpu0": {"used_mib": 0, "processes": []},
                                       "gpu1": {"used_mib": 0, "processes": []}}
    assert set(result["elapsed"]) >= {"init", "plan", "stop", "term", "kill", "verify", "total"}


def test_unit_workers_on_several_gpus_are_stopped_with_the_unit(host, units):
    main = host.hold((0, 1000))
    worker = host.hold((1, 50000))
    units.add("vllm.service", [main, worker])
    result = run(host, units, units=["vllm.service"])

    assert result["changed"] is True
    assert result["units"][0]["action"] == "stopped" and result["units"][0]["killed"] is False
    assert sorted(result["units"][0]["pids"]) == sorted([main, worker])
    assert result["signalled"] == []  # systemd's stop ended them
    assert all(g["used_mib_after"] == 0 for g in result["gpus"])
    assert not alive(main) and not alive(worker)


def test_unit_stop_escalates_to_sigkill_for_a_worker_ignoring_sigterm(host, units):
    main = host.hold((0, 1000))
    stubborn = host.hold((1, 3000), ignore_sigterm=True)
    units.add("vllm.service", [main, stubborn])
    result = run(host, units, units=["vllm.service"], stop_timeout=0.3)

    assert result["units"][0]["killed"] is True
    assert "kill" in units.verbs("vllm.service")
    assert not alive(stubborn)


def test_escaped_worker_is_signalled_in_unit_scope(host, units):
    main = host.hold((0, 1000))
    escaped = host.hold((1, 7000))  # in the cgroup when listed, outside when systemd stops
    units.add("vllm.service", [main, escaped], escaped=[escaped])
    result = run(host, units, units=["vllm.service"])

    assert by_pid(result["signalled"])[escaped]["signal"] == "SIGTERM"
    assert not alive(escaped)


def test_stray_holder_in_unit_scope_fails_before_the_unit_is_stopped(host, units):
    # The stray would keep GPU 0 busy whatever happens, so the unit keeps serving.
    main = host.hold((0, 1000))
    stray = host.hold((0, 4096))
    units.add("vllm.service", [main])
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, units=["vllm.service"])

    assert err.value.msg.startswith("GPU(s) 0 would stay busy after the reclaim, so nothing was stopped")
    assert ("pid %d (python3, user root, 4096 MiB on GPU 0, command %s) is left alone: not a process of the "
            "stopped unit(s)" % (stray, " ".join(_procs.ProcFS().get(stray).cmdline))) in err.value.msg
    assert alive(stray) and alive(main)
    assert by_pid(err.value.result["spared"])[stray]["reason"].startswith("not a process of the stopped")
    assert err.value.result["units"][0]["action"] == "none"
    assert err.value.result["signalled"] == []


def test_stray_holder_of_the_service_user_is_killed_in_gpu_scope(host, units):
    # Runs as root, like the unit (no User=): the service's own, even outside its cgroup.
    main = host.hold((0, 1000))
    stray = host.hold((0, 4096))
    units.add("vllm.service", [main])
    result = run(host, units, units=["vllm.service"], scope="gpu")

    row = by_pid(result["signalled"])[stray]
    assert row["signal"] == "SIGTERM" and row["reach"] == "service user root" and row["uid"] == 0
    assert not alive(stray)


def test_protected_executable_survives_and_blocks_with_a_clear_message(host, units):
    exporter = host.hold_as((0, 512), exe=host.program("dcgm-exporter"))
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, scope="gpu", gpus=["0"])
    assert alive(exporter)
    assert "left alone: protected program (dcgm-exporter)" in err.value.msg
    assert err.value.result["signalled"] == [] and err.value.result["touched"] is False


def test_argv0_and_comm_spoofing_no_longer_protects(host, units):
    """Any process may call itself nvidia-smi: only the executable the kernel runs counts."""
    spoof = host.hold_as((0, 512), argv0="nvidia-smi", comm="nvidia-smi")
    proc = _procs.ProcFS().get(spoof)
    assert proc.comm == "nvidia-smi" and proc.cmdline[0] == "nvidia-smi"
    result = run(host, units, scope="gpu", gpus=["0"])
    assert [r["pid"] for r in result["signalled"]] == [spoof] and not alive(spoof)


def test_a_copied_binary_named_like_a_protected_one_is_not_trusted(host, units):
    # A user's own copy (not root-owned, or writable by others) named nvidia-smi is not nvidia-smi.
    fake = host.program("nvidia-smi")
    os.chmod(fake, 0o777)
    holder = host.hold_as((0, 512), exe=fake)
    result = run(host, units, scope="gpu", gpus=["0"])
    assert [r["pid"] for r in result["signalled"]] == [holder]


def test_process_spanning_an_unselected_gpu_is_never_signalled(host, units):
    # Seen on 2x H200 (bench/reclaim_multigpu.py): the check comes before any signal, so GPU 0's
    # own holder is not killed for a reclaim that could not succeed.
    tp = host.hold((0, 2000), (1, 2000))
    own = host.hold((0, 3000))
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, scope="gpu", gpus=["0"])
    assert alive(tp) and alive(own)
    assert "also holds unselected GPU(s) 1" in err.value.msg
    assert err.value.result["signalled"] == []


def test_a_unit_member_spanning_gpus_goes_with_its_unit(host, units):
    tp = host.hold((0, 2000), (1, 2000))
    units.add("vllm.service", [tp])
    result = run(host, units, units=["vllm.service"], scope="gpu", gpus=["0"])
    assert not alive(tp)
    assert result["units"][0]["action"] == "stopped"


def test_check_mode_changes_nothing_then_real_then_idempotent(host, units):
    main = host.hold((0, 1000))
    stray = host.hold((1, 2000))
    units.add("sglang.service", [main])
    plan = run(host, units, check_mode=True, units=["sglang.service"], scope="gpu", gpus=["0", "1"])

    assert plan["changed"] is True
    assert plan["units"][0]["action"] == "would stop"
    assert {e["pid"]: e["via"] for e in plan["would_signal"]} == {main: "unit stop", stray: "signal"}
    assert plan["diff"]["before"]["gpu0"]["used_mib"] == 1000
    assert plan["diff"]["after"]["gpu0"] == {"used_mib": 0, "processes": []}
    assert alive(main) and alive(stray) and units.verbs("sglang.service") == ["show"]

    real = run(host, units, units=["sglang.service"], scope="gpu", gpus=["0", "1"])
    assert real["changed"] is True and not alive(main) and not alive(stray)

    again = run(host, units, check_mode=True, units=["sglang.service"], scope="gpu", gpus=["0", "1"])
    assert again["changed"] is False and again["would_signal"] == []
    assert again["diff"]["before"] == again["diff"]["after"]
    final = run(host, units, units=["sglang.service"], scope="gpu", gpus=["0", "1"])
    assert final["changed"] is False and final["signalled"] == []
    assert final["units"][0]["action"] == "none"


def test_missing_gpu_fails_before_anything_is_stopped(host, units):
    main = host.hold((0, 1000))
    units.add("vllm.service", [main])
    with pytest.raises(_reclaim.ReclaimError, match="GPU 7 not found.*nothing was stopped"):
        run(host, units, units=["vllm.service"], gpus=["7"])
    assert alive(main) and units.calls == []


def test_missing_unit_fails_before_anything_is_stopped(host, units):
    holder = host.hold((0, 1000))
    with pytest.raises(_reclaim.ReclaimError, match="unit nope.service not found"):
        run(host, units, units=["nope.service"], scope="gpu")
    assert alive(holder)


def test_missing_nvml_library_fails_clearly_without_stopping(tmp_path):
    """No shim loaded in a fresh interpreter: real pynvml meets a host without the driver."""
    code = r"""
import json, sys
sys.path.insert(0, %r)
from ansible_collections.llmops.specdec.plugins.module_utils import _reclaim
calls = []
def run_command(argv):
    calls.append(argv)
    return 0, "LoadState=loaded\nActiveState=active\nMainPID=1\nControlGroup=/x\n", ""
try:
    _reclaim.reclaim({"units": ["vllm.service"], "scope": "gpu"}, run_command)
except _reclaim.ReclaimError as exc:
    print(json.dumps({"msg": exc.msg, "calls": calls}))
""" % os.path.join(REPO, ".build", "collections")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30,
                         check=False)
    got = json.loads(out.stdout)
    assert "libnvidia-ml.so.1 not found" in got["msg"] and "nothing was stopped" in got["msg"]
    assert got["calls"] == []


def _node_holder(tmp_path, dev, nodes, cuda):
    """A real process holding ``dev/nvidia<N>`` nodes, optionally mapping a file named libcuda.so.1."""
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"\0" * 4096)
    ready = tmp_path / ("ready-%s-%s" % ("-".join(map(str, nodes)), cuda))
    code = ("import mmap, os, time\n"
            "fds = [os.open(os.path.join(%r, 'nvidia%%d' %% n), os.O_RDONLY) for n in %r]\n"
            "m = mmap.mmap(os.open(%r, os.O_RDONLY), 4096, prot=mmap.PROT_READ) if %r else None\n"
            "open(%r, 'w').close()\n"
            "time.sleep(60)\n") % (dev, nodes, str(lib), cuda, str(ready))
    proc = subprocess.Popen([sys.executable, "-c", code])
    from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import wait_for
    wait_for(ready.exists, "node holder ready")
    return proc


def test_nvml_pids_outside_our_pid_namespace_fall_back_to_cuda_node_holders(host, tmp_path):
    """NVML names a pid /proc cannot show: only CUDA users of that GPU's node, on no other GPU, qualify."""
    cuda_user = _node_holder(tmp_path, host.dev, [0], cuda=True)
    monitor = _node_holder(tmp_path, host.dev, [0, 1, 2], cuda=False)   # NVML-only: no libcuda
    spanning = _node_holder(tmp_path, host.dev, [0, 2], cuda=True)      # also GPU 2, unselected
    try:
        session = _nvml.Nvml()
        try:
            gpus = session.devices()
        finally:
            session.close()
        procfs = _procs.ProcFS()
        procs = procfs.table()
        hidden = 4194000  # above pid_max's default range: never a visible pid
        state = {0: {"used": 9000, "struct": "v2", "procs": {hidden: 9000}},
                 1: {"used": 0, "struct": "v2", "procs": {}}, 2: {"used": 0, "struct": "v2", "procs": {}}}
        plan = _reclaim.Planner(procfs, host.dev, gpus[:2], gpus, "gpu", [], set(),
                                _procs.ancestors(procs, os.getpid()), foreign_pidns=True,
                                ownership=_reclaim.Ownership(service_uids={os.geteuid()}))
        targets, spared = plan.plan(state, procs)
        assert [p.pid for p, _e in targets] == [cuda_user.pid]
        assert targets[0][1]["source"] == "device node (NVML pid not in /proc)"
        assert by_pid(spared)[hidden]["reason"].startswith("NVML pid not visible")
        unit_plan = _reclaim.Planner(procfs, host.dev, gpus[:2], gpus, "unit", [], set(), set(), foreign_pidns=True)
        assert unit_plan.plan(state, procs)[0] == []  # scope=unit never guesses
        # Not proven to run in another pid namespace (this test does not): a pid NVML names and /proc
        # lacks has exited, and no unlisted process is touched.
        assert procfs.pidns_nested() is False
        same_ns = _reclaim.Planner(procfs, host.dev, gpus[:2], gpus, "gpu", [], set(), set())
        targets, spared = same_ns.plan(state, procs)
        assert targets == [] and [e["pid"] for e in spared] == [hidden]
    finally:
        for proc in (cuda_user, monitor, spanning):
            proc.kill()
            proc.wait(timeout=10)


# -- GPUs from the service, never all by default (issue 12, item 5) ------------------------------------------


def test_no_gpus_and_no_units_is_refused(host, units):
    holder = host.hold((0, 100))
    with pytest.raises(_reclaim.ReclaimError, match="no GPUs to free.*nothing was stopped"):
        run(host, units, scope="gpu")
    assert alive(holder)


def test_gpus_come_from_the_units_cuda_visible_devices(host, units):
    """TP=1 on GPU 0: another user's job on GPU 1 and a root job on GPU 2 are not even looked at."""
    main = host.hold((0, 1000))
    other_user = host.hold_as((1, 60000), uid=NOBODY)
    unrelated = host.hold((2, 500))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 %s HF_HOME=/srv/hf" % PCI)
    result = run(host, units, units=["vllm.service"], scope="gpu")

    assert result["gpus_source"] == "CUDA_VISIBLE_DEVICES"
    assert [(g["index"], g["selected_by"]) for g in result["gpus"]] == [(0, "CUDA_VISIBLE_DEVICES of vllm.service")]
    assert result["units"][0]["cuda_visible_devices"] == "0" and result["units"][0]["user"] == "root"
    assert result["stopped"] == ["vllm.service"] and result["touched"] is True
    assert not alive(main) and alive(other_user) and alive(unrelated)


def test_gpus_by_uuid_prefix_in_cuda_visible_devices(host, units):
    main = host.hold((2, 1000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=%s" % UUIDS[2][:12])
    result = run(host, units, units=["vllm.service"])
    assert [g["index"] for g in result["gpus"]] == [2] and not alive(main)


def test_gpus_come_from_what_the_units_processes_hold_without_cuda_visible_devices(host, units):
    main = host.hold((1, 1000))
    worker = host.hold((2, 3000))
    other = host.hold((0, 700))
    units.add("vllm.service", [main, worker])
    result = run(host, units, units=["vllm.service"], scope="gpu")
    assert result["gpus_source"] == "unit processes"
    assert [(g["index"], g["selected_by"]) for g in result["gpus"]] == [
        (1, "held by pid %d of vllm.service" % main), (2, "held by pid %d of vllm.service" % worker)]
    assert alive(other) and not alive(main) and not alive(worker)


def test_a_unit_holding_nothing_and_naming_no_gpu_is_stopped_with_a_warning(host, units):
    idle = host.hold((0, 10))  # not the unit's
    stray = host.hold((1, 10))
    units.add("vllm.service", [idle], state="active")
    units.units["vllm.service"]["pids"] = []
    warnings = []
    result = run(host, units, units=["vllm.service"], scope="gpu", warn=warnings.append)
    assert result["gpus_source"] == "none" and result["gpus"] == [] and result["stopped"] == ["vllm.service"]
    assert len(warnings) == 1 and "No GPU selected" in warnings[0]
    assert alive(idle) and alive(stray)


def test_all_is_an_explicit_opt_in(host, units):
    holders = [host.hold((i, 100)) for i in range(3)]
    result = run(host, units, scope="gpu", gpus=["all"])
    assert result["gpus_source"] == "all" and [g["index"] for g in result["gpus"]] == [0, 1, 2]
    assert not any(alive(h) for h in holders)
    with pytest.raises(_reclaim.ReclaimError, match="'all' stands alone"):
        run(host, units, scope="gpu", gpus=["all", "0"])


def test_bad_cuda_visible_devices_fails_before_anything(host, units):
    main = host.hold((0, 100))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0,7")
    with pytest.raises(_reclaim.ReclaimError, match="unit vllm.service: CUDA_VISIBLE_DEVICES entry 7.*nothing was"):
        run(host, units, units=["vllm.service"])
    assert alive(main) and units.verbs("vllm.service") == ["show"]


# -- ownership: another user's job is spared, the service's orphans are not ----------------------------------


def test_another_users_job_on_the_services_gpu_refuses_before_the_stop(host, units):
    main = host.hold((0, 1000))
    job = host.hold_as((0, 60000), uid=NOBODY)
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, units=["vllm.service"], scope="gpu")
    msg = err.value.msg
    assert msg.startswith("GPU(s) 0 would stay busy after the reclaim, so nothing was stopped or signalled")
    assert "pid %d (%s, user nobody, 60000 MiB on GPU 0, command " % (job, _procs.ProcFS().get(job).comm) in msg
    assert "owned by uid 65534 (nobody), not the service's user (0 (root))" in msg
    assert err.value.result["touched"] is False and err.value.result["stopped"] == []
    assert alive(main) and alive(job) and units.verbs("vllm.service") == ["show"]
    spared = by_pid(err.value.result["spared"])[job]
    assert spared["uid"] == NOBODY and spared["user"] == "nobody"


def test_allow_uids_lets_the_module_reclaim_another_users_job(host, units):
    main = host.hold((0, 1000))
    job = host.hold_as((0, 6000), uid=NOBODY)
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)
    result = run(host, units, units=["vllm.service"], scope="gpu", allow_uids=["nobody"])
    assert by_pid(result["signalled"])[job]["reach"] == "allow_uids nobody"
    assert not alive(job) and not alive(main)


def test_allow_cgroups_counts_a_cgroup_as_the_services(host, units):
    job = host.hold_as((0, 6000), uid=NOBODY)
    cgroup = _procs.ProcFS().get(job).cgroup
    result = run(host, units, scope="unit", gpus=["0"], allow_cgroups=[cgroup])
    assert by_pid(result["signalled"])[job]["reach"] == "allow_cgroups %s" % cgroup
    assert not alive(job)


@pytest.mark.parametrize("service_user", ["", "nobody"])
def test_orphaned_worker_of_the_service_user_outside_the_cgroup_is_reclaimed(host, units, service_user):
    """vLLM #55510: a worker that left the unit's cgroup and process tree, running as the service's user."""
    uid = NOBODY if service_user else None
    main = host.hold_as((0, 1000), uid=uid)
    orphan = host.hold_as((1, 7000), uid=uid, orphan=True)
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0,1 " + PCI, user=service_user)
    result = run(host, units, units=["vllm.service"], scope="gpu")
    row = by_pid(result["signalled"])[orphan]
    assert row["reach"] == "service user %s" % (service_user or "root")
    assert not alive(orphan) and not alive(main)


def test_another_users_orphan_is_not_the_services(host, units):
    main = host.hold_as((0, 1000), uid=NOBODY)
    root_job = host.hold((1, 7000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0,1 " + PCI, user="nobody")
    with pytest.raises(_reclaim.ReclaimError, match="owned by uid 0 \\(root\\), not the service's user \\(65534"):
        run(host, units, units=["vllm.service"], scope="gpu")
    assert alive(root_job) and alive(main)


def test_ownership_rules():
    def proc(cgroup, pid=10):
        return _procs.Proc(pid, 1, "S", 5, "python3", ["python3"], cgroup)

    own = _reclaim.Ownership(unit_keys={(9, 5)}, unit_cgroups=[("/system.slice/vllm.service", "vllm.service"),
                                                               ("/system.slice/side.service", "side.service")],
                             allow_cgroups=["/batch.slice"], service_uids={998}, allow_uids={1001})
    assert own.reach(proc("/", pid=9), (0, 0, 0, 0), "unit") == "unit process"
    assert own.reach(proc("/system.slice/vllm.service/x"), (0,) * 4, "unit") == "in the cgroup of vllm.service"
    assert own.reach(proc("/system.slice/side.service"), (0,) * 4, "gpu") == "in the cgroup of side.service"
    assert own.reach(proc("/system.slice/vllm.service2"), (0,) * 4, "gpu") is None  # whole components only
    assert own.reach(proc("/batch.slice/job.scope"), (5,) * 4, "unit") == "allow_cgroups /batch.slice"
    assert own.reach(proc("/"), (998,) * 4, "gpu").startswith("service user")
    assert own.reach(proc("/"), (998,) * 4, "unit") is None  # scope unit: the user alone is not enough
    assert own.reach(proc("/"), (1001,) * 4, "unit").startswith("allow_uids")
    assert own.reach(proc("/"), (998, 0, 998, 998), "gpu") is None  # setuid root: not only ours
    assert own.reach(proc("/"), None, "gpu") is None


def test_bad_options_fail_before_anything(host, units):
    for bad, match in [({"scope": "all"}, "scope must be one of"), ({"allow_uids": ["no-such-user-x"]}, "unknown user"),
                       ({"allow_cgroups": ["system.slice"]}, "not an absolute cgroup path"),
                       ({"protect": ["nvidia-smi@"]}, "PROGRAM@USER"), ({"term_timeout": -1}, "term_timeout")]:
        with pytest.raises(_reclaim.ReclaimError, match=match):
            run(host, units, gpus=["0"], **bad)


def test_missing_allow_unit_fails_before_anything(host, units):
    main = host.hold((0, 100))
    units.add("vllm.service", [main])
    with pytest.raises(_reclaim.ReclaimError, match="allow_units: unit side.service not found"):
        run(host, units, units=["vllm.service"], allow_units=["side.service"])
    assert alive(main)


# -- failures after the stop: never a traceback, always "touched" (issue 13) ---------------------------------


class FlakyNvml:
    """Real pynvml on the shim; ``after_stop(n)`` decides what the n-th process query after the unit
    stop does (raise, add a phantom, start a holder)."""

    def __init__(self, units, after_stop):
        self.units = units
        self.after_stop = after_stop
        self.calls = 0

    def __getattr__(self, name):
        return getattr(pynvml, name)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
        if any(c[1] == "stop" for c in self.units.calls):
            self.calls += 1
            procs = self.after_stop(self.calls, handle, procs)
        return procs


class _Phantom:
    def __init__(self, pid, mib):
        self.pid = pid
        self.usedGpuMemory = mib * 2 ** 20


def test_nvml_failing_mid_run_is_a_clean_failure_with_touched(host, units):
    main = host.hold((0, 1000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)

    def lost(_n, _handle, _procs):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, units=["vllm.service"], scope="gpu", nvml_lib=FlakyNvml(units, lost))
    assert err.value.msg.startswith("NVML failed during the reclaim: nvmlDeviceGetComputeRunningProcesses failed: ")
    assert "the service was touched (stopped: vllm.service" in err.value.msg and "roll back" in err.value.msg
    assert err.value.result["touched"] is True and err.value.result["stopped"] == ["vllm.service"]
    assert err.value.result["changed"] is True and err.value.exception is None


def test_an_unexpected_error_mid_run_is_still_a_reclaim_error(host, units):
    main = host.hold((0, 1000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)

    def broken(_n, _handle, _procs):
        raise RuntimeError("driver returned garbage")

    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, units=["vllm.service"], nvml_lib=FlakyNvml(units, broken))
    assert "unexpected error during the reclaim: RuntimeError: driver returned garbage" in err.value.msg
    assert err.value.result["touched"] is True and "Traceback" in err.value.exception


def test_a_gpu_that_stays_busy_after_the_stop_fails_with_touched(host, units):
    main = host.hold((0, 1000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)

    def phantom(_n, _handle, procs):
        return procs + [_Phantom(4194001, 900)]  # a context the driver never releases

    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, units=["vllm.service"], nvml_lib=FlakyNvml(units, phantom), verify_timeout=0.3)
    assert err.value.msg.startswith("GPUs not free after ")
    assert "4194001 (?, user ?, 900 MiB, left alone: NVML pid not visible" in err.value.msg
    assert err.value.result["touched"] is True and err.value.result["stopped"] == ["vllm.service"]
    assert err.value.result["gpus"][0]["processes_after"] == [{"pid": 4194001, "name": None, "mib": 900}]


@pytest.mark.parametrize("uid", [NOBODY, None])
def test_a_late_holder_is_judged_like_the_others(host, units, uid):
    """A holder that appears during the verify: the service's is signalled, another user's fails the run."""
    main = host.hold((0, 1000))
    units.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 " + PCI)
    late = []

    def start_late(n, handle, procs):
        if n == 4 and not late:  # 3 queries re-plan (every GPU), the 4th is the verify's first
            late.append(host.hold_as((0, 2000), uid=uid, comm="late-job"))
            return list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
        return procs

    kwargs = dict(units=["vllm.service"], scope="gpu", nvml_lib=FlakyNvml(units, start_late))
    if uid is None:
        result = run(host, units, **kwargs)
        row = by_pid(result["signalled"])[late[0]]
        assert row["late"] is True and row["reach"] == "service user root"
        assert not alive(late[0]) and result["gpus"][0]["used_mib_after"] == 0
        return
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, **kwargs)
    assert "(late holder(s) that must be left alone)" in err.value.msg
    assert "%d (late-job, user nobody, 2000 MiB, left alone: owned by uid 65534" % late[0] in err.value.msg
    assert err.value.result["touched"] is True and alive(late[0])
    assert by_pid(err.value.result["spared"])[late[0]]["late"] is True


def test_a_process_that_survives_sigkill_is_named(monkeypatch):
    """The review's stuck worker (state D), on stand-ins: no real process is signalled."""
    monkeypatch.setattr(_procs.os, "kill", lambda pid, sig: None)
    worker = 4194002

    class Lib:
        NVMLError = pynvml.NVMLError
        nvmlMemory_v2 = pynvml.nvmlMemory_v2

        def __getattr__(self, name):
            return lambda *a, **k: None

        def nvmlDeviceGetCount(self):
            return 1

        def nvmlDeviceGetHandleByIndex(self, i):
            return i

        def nvmlDeviceGetUUID(self, h):
            return UUIDS[0]

        def nvmlDeviceGetName(self, h):
            return "NVIDIA H200"

        def nvmlDeviceGetMinorNumber(self, h):
            return 0

        def nvmlDeviceGetMemoryInfo(self, h, version=None):
            return type("M", (), {"used": 80000 * 2 ** 20})()

        def nvmlDeviceGetComputeRunningProcesses(self, h):
            return [_Phantom(worker, 80000)]

    class FS:
        def table(self):
            return {worker: _procs.Proc(worker, 1, "D", 2, "VLLM::Worker", ["VLLM::Worker_TP0"], "/system.slice/v.service")}

        def open_nodes(self, pid, dev_dir):
            return {0}

        def maps_library(self, pid, fragment):
            return True

        def alive(self, proc):
            return True

        def sigterm_ignored(self, pid):
            return False

    state = {"active": "active", "calls": []}

    def systemctl(argv):
        state["calls"].append(argv[1])
        if argv[1] == "stop":
            state["active"] = "inactive"
        return 0, "LoadState=loaded\nActiveState=%s\nMainPID=%d\nControlGroup=\n" % (state["active"], worker), ""

    now = [0.0]

    def sleep(seconds):
        now[0] += max(seconds, 0.01)

    with pytest.raises(_reclaim.ReclaimError) as err:
        _reclaim.reclaim({"units": ["v.service"], "gpus": ["0"], "verify_timeout": 2, "term_timeout": 1}, systemctl,
                         nvml_lib=Lib(), procfs=FS(), self_pid=1, clock=lambda: now[0], sleep=sleep)
    assert "%d (VLLM::Worker, user ?, 80000 MiB, still running after SIGKILL, state D)" % worker in err.value.msg
    assert err.value.result["touched"] is True and err.value.result["stopped"] == ["v.service"]
    assert err.value.result["signalled"][0]["signal"] == "SIGKILL (survived)"
