# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helpers for the mock GPU host parts: the NVML shim built from source, a mock host laid out in a
temp dir (config, registry, device nodes), unmodified pynvml run in subprocesses that load the shim
through LD_LIBRARY_PATH, and real holder processes started with gpu-hold."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MOCKGPU = os.path.join(REPO, "tests", "mockgpu")
GPU_HOLD = os.path.join(MOCKGPU, "bin", "gpu-hold")
HOLD_LIB = os.path.join(MOCKGPU, "lib")
MIB = 1024 * 1024
DEADLINE_S = 15.0

GPUS = [
    # listed out of index order on purpose: the shim orders devices by index
    {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
     "memory_total_mib": 143771, "reserved_mib": 615},
    {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-6f1c0d2e-0000-4000-8000-000000000000",
     "memory_total_mib": 143771, "reserved_mib": 615},
]

# Prepended to every probe: fail loudly unless pynvml really loaded the shim under test.
PROBE_HEADER = """
import json, os, sys, ctypes
import pynvml as n
def _loaded_shim():
    with open("/proc/self/maps") as f:
        return [l.split()[-1] for l in f if "libnvidia-ml" in l]
def node_fds():
    dev = os.path.realpath(os.environ["MOCKGPU_DEV_DIR"])
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink("/proc/self/fd/" + fd)
        except FileNotFoundError:
            continue
        if t.startswith(dev + "/"):
            out.append(os.path.basename(t))
    return sorted(out)
def err(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except n.NVMLError as e:
        return type(e).__name__
    return None
def emit(obj):
    maps = _loaded_shim()
    assert maps and all(m == os.environ["EXPECT_SHIM"] for m in maps), maps
    print("PROBE " + json.dumps(obj))
"""


class MockHost:
    """A mock GPU host in a temp dir, plus helpers to query it through pynvml and to start holders."""

    def __init__(self, root, shim):
        self.root = root
        self.config = os.path.join(root, "gpus.json")
        self.registry = os.path.join(root, "holders")
        self.dev = os.path.join(root, "dev")
        self.shim = shim
        os.makedirs(self.registry)
        os.makedirs(self.dev)
        for name in ["nvidiactl"] + ["nvidia%d" % g["index"] for g in GPUS]:
            open(os.path.join(self.dev, name), "w").close()
        self.write_config({"gpus": GPUS})
        self.env = dict(os.environ)
        self.env.update(MOCKGPU_CONFIG=self.config, MOCKGPU_REGISTRY=self.registry,
                        MOCKGPU_DEV_DIR=self.dev, LD_LIBRARY_PATH=os.path.dirname(shim),
                        EXPECT_SHIM=os.path.realpath(shim))
        # gpu-hold runs `python3` from PATH: the system one, as on the Debian mock host
        self.env["PATH"] = "/usr/bin:" + self.env.get("PATH", "")
        self.procs = []

    def write_config(self, obj):
        with open(self.config, "w") as f:
            f.write(json.dumps(obj) if not isinstance(obj, str) else obj)

    def probe(self, code, args=()):
        """Run `code` with real pynvml on the shim in a fresh interpreter; return what it emit()s."""
        script = PROBE_HEADER + textwrap.dedent(code)
        res = subprocess.run([sys.executable, "-c", script, *args], env=self.env, capture_output=True, check=False,
                             text=True, timeout=DEADLINE_S)
        lines = [l for l in res.stdout.splitlines() if l.startswith("PROBE ")]
        assert res.returncode == 0 and lines, "probe failed rc=%d\n%s\n%s" % (res.returncode, res.stdout, res.stderr)
        return json.loads(lines[-1][len("PROBE "):])

    def snapshot(self):
        """Per GPU index: v1 used MiB, v2 used/reserved MiB, and compute processes {pid: MiB}."""
        return {int(k): v for k, v in self.probe("""
            n.nvmlInit()
            out = {}
            for i in range(n.nvmlDeviceGetCount()):
                h = n.nvmlDeviceGetHandleByIndex(i)
                v1 = n.nvmlDeviceGetMemoryInfo(h)
                v2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
                procs = n.nvmlDeviceGetComputeRunningProcesses(h)
                out[n.nvmlDeviceGetIndex(h)] = {
                    "v1_used": v1.used // 2**20, "v1_free": v1.free // 2**20,
                    "v2_used": v2.used // 2**20, "v2_free": v2.free // 2**20,
                    "reserved": v2.reserved // 2**20, "total": v2.total // 2**20,
                    "procs": {str(p.pid): p.usedGpuMemory // 2**20 for p in procs}}
            n.nvmlShutdown()
            emit(out)
        """).items()}

    def start_holder(self, *args, ready=True):
        """Start gpu-hold with args; wait (bounded) until it has registered."""
        ready_file = os.path.join(self.root, "ready.%d" % len(self.procs))
        argv = [GPU_HOLD, *args, "--ready-file", ready_file]
        p = subprocess.Popen(argv, env=self.env)
        self.procs.append(p)
        if ready:
            wait_for(lambda: os.path.exists(ready_file) or p.poll() is not None, "holder ready")
            assert p.poll() is None, "gpu-hold exited with %s" % p.returncode
        return p

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=DEADLINE_S)


def wait_for(cond, what, deadline_s=DEADLINE_S):
    """Poll cond() until true; fail after a bounded deadline (no fixed sleeps in tests)."""
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            pytest.fail("timed out waiting for " + what)
        time.sleep(0.01)


def proc_state(pid):
    """State letter of /proc/<pid>/stat, or None when the pid is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    return stat[stat.rindex(")") + 2]
