"""_reclaim: the whole procedure against the real NVML shim and real holder processes.

Only systemctl is faked (FakeUnits); NVML is the shim, processes, signals and /proc are real.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _reclaim, _systemd
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import (
    REPO, FakeUnits, alive)


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


def run(host, systemctl, check_mode=False, **kw):
    return _reclaim.reclaim(params(**kw), systemctl, check_mode=check_mode, dev_dir=host.dev)


def by_pid(rows):
    return {row["pid"]: row for row in rows}


def test_gpu_scope_frees_selected_gpus_and_spares_the_rest(host, units):
    big = host.hold((0, 100000))
    stubborn = host.hold((0, 2048), ignore_sigterm=True)
    orphan = host.orphan(1, 4096)
    other = host.hold((2, 8192))  # on an unselected GPU
    monitor = host.monitor()      # holds every /dev/nvidia* node, no compute context
    result = run(host, units, scope="gpu", gpus=["0", _UUID(1)])

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


def _UUID(index):
    from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import UUIDS
    return UUIDS[index]


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
    assert "pid %d (python3, 4096 MiB on GPU 0) is left alone: not a process of the stopped unit(s) (scope=unit)" \
        % stray in err.value.msg
    assert alive(stray) and alive(main)
    assert by_pid(err.value.result["spared"])[stray]["reason"].startswith("not a process of the stopped")
    assert err.value.result["units"][0]["action"] == "none"
    assert err.value.result["signalled"] == []


def test_stray_holder_is_killed_in_gpu_scope(host, units):
    main = host.hold((0, 1000))
    stray = host.hold((0, 4096))
    units.add("vllm.service", [main])
    result = run(host, units, units=["vllm.service"], scope="gpu")

    assert by_pid(result["signalled"])[stray]["signal"] == "SIGTERM"
    assert not alive(stray)


def test_protected_name_survives_and_blocks_with_a_clear_message(host, units):
    exporter = host.hold((0, 512), name="dcgm-exporter")
    with pytest.raises(_reclaim.ReclaimError) as err:
        run(host, units, scope="gpu", gpus=["0"])
    assert alive(exporter)
    assert "left alone: protected name" in err.value.msg
    assert err.value.result["signalled"] == []


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
    plan = run(host, units, check_mode=True, units=["sglang.service"], scope="gpu")

    assert plan["changed"] is True
    assert plan["units"][0]["action"] == "would stop"
    assert {e["pid"]: e["via"] for e in plan["would_signal"]} == {main: "unit stop", stray: "signal"}
    assert plan["diff"]["before"]["gpu0"]["used_mib"] == 1000
    assert plan["diff"]["after"]["gpu0"] == {"used_mib": 0, "processes": []}
    assert alive(main) and alive(stray) and units.verbs("sglang.service") == ["show"]

    real = run(host, units, units=["sglang.service"], scope="gpu")
    assert real["changed"] is True and not alive(main) and not alive(stray)

    again = run(host, units, check_mode=True, units=["sglang.service"], scope="gpu")
    assert again["changed"] is False and again["would_signal"] == []
    assert again["diff"]["before"] == again["diff"]["after"]
    final = run(host, units, units=["sglang.service"], scope="gpu")
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
    calls = tmp_path / "calls"
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
        from ansible_collections.llmops.specdec.plugins.module_utils import _nvml, _procs
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
                                _procs.ancestors(procs, os.getpid()))
        targets, spared = plan.plan(state, procs)
        assert [p.pid for p, _e in targets] == [cuda_user.pid]
        assert targets[0][1]["source"] == "device node (NVML pid not in /proc)"
        assert by_pid(spared)[hidden]["reason"].startswith("NVML pid not visible")
        unit_plan = _reclaim.Planner(procfs, host.dev, gpus[:2], gpus, "unit", [], set(), set())
        assert unit_plan.plan(state, procs)[0] == []  # scope=unit never guesses
    finally:
        for proc in (cuda_user, monitor, spanning):
            proc.kill()
            proc.wait(timeout=10)
