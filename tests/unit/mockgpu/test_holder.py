# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The holder library (mockgpu_hold) and the gpu-hold CLI, checked against the shim and /proc."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from mockgpu_testhost import DEADLINE_S, GPU_HOLD, HOLD_LIB, proc_state, wait_for

sys.path.insert(0, HOLD_LIB)
import mockgpu_hold  # noqa: E402


def open_targets(pid):
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except FileNotFoundError:
            pass
    return out


def status_mask(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise KeyError(field)


def test_env_helpers_default_and_override(monkeypatch):
    for var in ("MOCKGPU_CONFIG", "MOCKGPU_REGISTRY", "MOCKGPU_DEV_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert (mockgpu_hold.env_config_path(), mockgpu_hold.env_registry_dir(), mockgpu_hold.env_dev_dir()) == (
        "/etc/mockgpu/gpus.json", "/run/mockgpu/holders", "/dev")
    monkeypatch.setenv("MOCKGPU_CONFIG", "/x/gpus.json")
    monkeypatch.setenv("MOCKGPU_REGISTRY", "/x/reg")
    monkeypatch.setenv("MOCKGPU_DEV_DIR", "/x/dev")
    assert (mockgpu_hold.env_config_path(), mockgpu_hold.env_registry_dir(), mockgpu_hold.env_dev_dir()) == (
        "/x/gpus.json", "/x/reg", "/x/dev")


def test_load_config_sorted(host, monkeypatch):
    monkeypatch.setenv("MOCKGPU_CONFIG", host.config)
    assert [g["index"] for g in mockgpu_hold.load_config()] == [0, 1]


def test_proc_starttime_matches_proc_stat():
    p = subprocess.Popen(["sleep", "30"])
    try:
        with open("/proc/%d/stat" % p.pid) as f:
            fields = f.read().split()
        # `sleep` has no spaces in comm, so plain split numbers fields from 1
        assert mockgpu_hold.proc_starttime(p.pid) == int(fields[21])
    finally:
        p.kill()
        p.wait()


def test_hold_registers_opens_node_and_release_undoes_it(host):
    me = os.getpid()
    node = os.path.realpath(os.path.join(host.dev, "nvidia1"))
    h = mockgpu_hold.hold(1, 2048, registry=host.registry, dev_dir=host.dev)
    try:
        entry = os.path.join(host.registry, "%d.1" % me)
        with open(entry) as f:
            assert json.loads(f.read()) == {"pid": me, "gpu": 1, "mib": 2048,
                                            "starttime": mockgpu_hold.proc_starttime(me)}
        assert node in open_targets(me)
        assert os.listdir(host.registry) == ["%d.1" % me]  # the temp file was renamed, not left
        # the shim, queried from another process, sees this test process as the holder
        snap = host.snapshot()
        assert snap[1]["procs"] == {str(me): 2048} and snap[1]["v2_used"] == 2048
        with pytest.raises(ValueError):
            mockgpu_hold.hold(1, 1, registry=host.registry, dev_dir=host.dev)
    finally:
        h.release()
    assert not h.held and not os.path.exists(entry)
    assert node not in open_targets(me)
    assert host.snapshot()[1]["procs"] == {}
    h.release()  # idempotent
    # released: the same GPU can be held again
    with mockgpu_hold.hold(1, 5, registry=host.registry, dev_dir=host.dev) as again:
        assert again.held
    assert not again.held


def test_hold_uses_env_paths_and_fails_without_device_node(host, monkeypatch):
    monkeypatch.setenv("MOCKGPU_REGISTRY", os.path.join(host.registry, "sub"))
    monkeypatch.setenv("MOCKGPU_DEV_DIR", host.dev)
    with mockgpu_hold.hold(0, 7):
        assert os.listdir(os.path.join(host.registry, "sub")) == ["%d.0" % os.getpid()]
    with pytest.raises(FileNotFoundError):
        mockgpu_hold.hold(5, 7)
    assert os.listdir(os.path.join(host.registry, "sub")) == []
    with pytest.raises(ValueError):
        mockgpu_hold.hold(0, -1)


def test_cli_sets_process_name(host):
    p = host.start_holder("--gpu", "0", "--mib", "1", "--name", "VLLM::Worker_TP0")
    with open("/proc/%d/comm" % p.pid) as f:
        # the kernel keeps 15 characters of a task name, as for real vLLM workers
        assert f.read().strip() == "VLLM::Worker_TP"
    with open(os.path.join(host.root, "ready.0")) as f:
        assert int(f.read()) == p.pid


def test_cli_default_dies_on_sigterm(host):
    p = host.start_holder("--gpu", "0", "--mib", "1")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=DEADLINE_S) == -signal.SIGTERM


def test_cli_ignore_sigterm_survives_it_and_dies_on_sigkill(host):
    p = host.start_holder("--gpu", "0", "--mib", "100", "--ignore-sigterm")
    assert status_mask(p.pid, "SigIgn") & (1 << (signal.SIGTERM - 1))
    p.send_signal(signal.SIGTERM)
    # once nothing is pending any more the signal has been dealt with (a fatal one would
    # have queued SIGKILL and left a zombie)
    wait_for(lambda: proc_state(p.pid) != "R" and status_mask(p.pid, "SigPnd") == 0
             and status_mask(p.pid, "ShdPnd") == 0, "SIGTERM to be consumed")
    assert p.poll() is None and proc_state(p.pid) not in ("Z", "X", None)
    assert host.snapshot()[0]["procs"] == {str(p.pid): 100}
    p.send_signal(signal.SIGKILL)
    assert p.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    assert host.snapshot()[0]["procs"] == {}


def test_cli_orphan_is_reparented_and_detached(host):
    # Run the launcher under a subreaper so the orphan is reparented to a process we own
    # (it plays init) and can be reaped here instead of by this machine's PID 1.
    ready = os.path.join(host.root, "orphan.ready")
    script = textwrap.dedent("""
        import ctypes, json, os, signal, subprocess, sys
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        launcher = subprocess.Popen([%r, "--orphan", "--gpu", "1", "--mib", "77",
                                     "--name", "orphan_worker", "--ready-file", %r],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, errout = launcher.communicate(timeout=%d)  # returns although the holder lives on
        pid = int(out)
        with open("/proc/%%d/stat" %% pid) as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        with open(%r) as f:
            ready_pid = int(f.read())
        res = {"me": os.getpid(), "launcher": launcher.pid, "rc": launcher.returncode, "pid": pid,
               "ppid": int(fields[1]), "sid": int(fields[3]), "my_sid": os.getsid(0), "ready": ready_pid,
               "stdin": os.readlink("/proc/%%d/fd/0" %% pid)}
        res["nvml"] = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True,
                                     text=True, timeout=%d).stdout
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(json.dumps(res))
    """ % (GPU_HOLD, ready, DEADLINE_S, ready, DEADLINE_S))
    nvml = textwrap.dedent("""
        import pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(1)
        print(sorted((p.pid, p.usedGpuMemory >> 20) for p in n.nvmlDeviceGetComputeRunningProcesses(h)))
    """)
    res = subprocess.run([sys.executable, "-c", script, nvml], env=host.env, capture_output=True, check=False, text=True,
                         timeout=3 * DEADLINE_S)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["rc"] == 0 and got["ready"] == got["pid"]
    assert got["ppid"] == got["me"] != got["launcher"]  # parent gone, adopted by the reaper
    assert got["sid"] not in (got["my_sid"], got["pid"])  # own session, but not its leader
    assert got["stdin"] == "/dev/null"
    assert got["nvml"].strip() == str([(got["pid"], 77)])


def test_cli_rejects_unpaired_arguments(host):
    res = subprocess.run([GPU_HOLD, "--gpu", "0", "--gpu", "1", "--mib", "5"],
                         env=host.env, capture_output=True, check=False, text=True, timeout=DEADLINE_S)
    assert res.returncode == 2 and "pairs" in res.stderr
    assert os.listdir(host.registry) == []


def test_cli_fails_fast_without_device_node(host):
    res = subprocess.run([GPU_HOLD, "--gpu", "7", "--mib", "5"],
                         env=host.env, capture_output=True, check=False, text=True, timeout=DEADLINE_S)
    assert res.returncode != 0 and "nvidia7" in res.stderr
    res = subprocess.run([GPU_HOLD, "--orphan", "--gpu", "7", "--mib", "5"],
                         env=host.env, capture_output=True, check=False, text=True, timeout=DEADLINE_S)
    assert res.returncode == 1 and "nvidia7" in res.stderr
    assert os.listdir(host.registry) == []
