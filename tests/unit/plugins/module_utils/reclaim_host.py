# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A mock GPU host for the gpu_reclaim tests: the real NVML shim loaded into this process, real
holder processes (tests/mockgpu/bin/gpu-hold), and a fake systemctl whose unit owns real processes.

Only systemd is faked (no systemd here); NVML is the shim answering from real processes.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys

# The mock host's own test helpers: one bounded poll, one /proc state reader.
from ansible_collections.llmops.specdec.tests.unit.mockgpu.mockgpu_testhost import proc_state, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
GPU_HOLD = os.path.join(REPO, "tests", "mockgpu", "bin", "gpu-hold")
HOLD_LIB = os.path.join(REPO, "tests", "mockgpu", "lib")
NOBODY = 65534
BUILD_SHIM = os.path.join(REPO, "tests", "mockgpu", "nvml", "build.sh")
DEADLINE_S = 15.0
UUIDS = ["GPU-0a000000-0000-4000-8000-000000000000", "GPU-1b000000-0000-4000-8000-000000000000",
         "GPU-2c000000-0000-4000-8000-000000000000"]

_loaded = []


def load_shim(path):
    """Load the shim by path once; pynvml's dlopen("libnvidia-ml.so.1") then finds it by soname."""
    if not _loaded:
        _loaded.append(ctypes.CDLL(path))
    return _loaded[0]


def build_shim(out_dir):
    out = os.path.join(str(out_dir), "libnvidia-ml.so.1")
    subprocess.run([BUILD_SHIM, out], check=True, timeout=120)
    return out


def alive(pid):
    """Exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state not in "ZX"


class GpuHost:
    """Config, registry and device nodes in a temp dir; holders started as real processes."""

    def __init__(self, root, shim, monkeypatch, gpus=3):
        self.root = str(root)
        self.shim = shim
        self.dev = os.path.join(self.root, "dev")
        self.registry = os.path.join(self.root, "holders")
        os.makedirs(self.dev)
        os.makedirs(self.registry)
        for name in ["nvidiactl"] + ["nvidia%d" % i for i in range(gpus)]:
            open(os.path.join(self.dev, name), "w").close()
        config = os.path.join(self.root, "gpus.json")
        with open(config, "w") as handle:
            json.dump({"gpus": [{"index": i, "name": "NVIDIA H200", "uuid": UUIDS[i],
                                 "memory_total_mib": 143771, "reserved_mib": 615} for i in range(gpus)]},
                      handle)
        monkeypatch.setenv("MOCKGPU_CONFIG", config)
        monkeypatch.setenv("MOCKGPU_REGISTRY", self.registry)
        monkeypatch.setenv("MOCKGPU_DEV_DIR", self.dev)
        load_shim(shim)
        self.popens = []
        self.orphans = []
        self._n = 0

    def _ready_file(self):
        self._n += 1
        return os.path.join(self.root, "ready.%d" % self._n)

    def hold(self, *holds, ignore_sigterm=False, name=None):
        """Start gpu-hold holding ``(gpu, mib)`` pairs; return its pid once registered."""
        ready = self._ready_file()
        argv = [GPU_HOLD, "--ready-file", ready]
        for gpu, mib in holds:
            argv += ["--gpu", str(gpu), "--mib", str(mib)]
        if ignore_sigterm:
            argv.append("--ignore-sigterm")
        if name:
            argv += ["--name", name]
        proc = subprocess.Popen(argv)
        self.popens.append(proc)
        wait_for(lambda: os.path.exists(ready) or proc.poll() is not None, "holder ready")
        assert proc.poll() is None, "gpu-hold exited with %s" % proc.returncode
        return proc.pid

    def hold_as(self, *holds, uid=None, exe=None, argv0=None, comm=None, orphan=False):
        """A holder registered as root that then becomes ``uid`` (os.setuid in the child, as another
        user's job would run), optionally running a copy of Python named ``exe`` (so /proc/PID/exe has
        that basename), with ``argv0`` as argv[0] and ``comm`` as its name; its pid once ready.
        ``orphan``: double fork + setsid first, so it is reparented to init."""
        ready = self._ready_file()
        code = ("import json, os, signal, sys\n"
                "cfg = json.loads(sys.argv[1])\n"
                "sys.path.insert(0, cfg['lib'])\n"
                "import mockgpu_hold\n"
                "if cfg['orphan']:\n"
                "    if os.fork(): os._exit(0)\n"
                "    os.setsid()\n"
                "    if os.fork(): os._exit(0)\n"
                "holds = [mockgpu_hold.hold(g, m) for g, m in cfg['holds']]\n"
                "if cfg['comm']: mockgpu_hold.set_name(cfg['comm'])\n"
                "fd = os.open(cfg['ready'], os.O_WRONLY | os.O_CREAT, 0o644)\n"  # opened as root
                "if cfg['uid'] is not None:\n"
                "    os.setgroups([]); os.setgid(cfg['uid']); os.setuid(cfg['uid'])\n"
                "os.write(fd, b'%d\\n' % os.getpid()); os.close(fd)\n"
                "while True: signal.pause()\n")
        cfg = {"lib": HOLD_LIB, "orphan": orphan, "holds": list(holds), "comm": comm, "uid": uid, "ready": ready}
        binary = exe or os.path.realpath(sys.executable)
        proc = subprocess.Popen([argv0 or binary, "-c", code, json.dumps(cfg)], executable=binary)
        self.popens.append(proc)

        def written():
            try:
                with open(ready) as handle:
                    return handle.read().endswith("\n")
            except OSError:
                return proc.poll() not in (None, 0)

        wait_for(written, "holder ready")
        with open(ready) as handle:
            pid = int(handle.read())
        if orphan:
            self.orphans.append(pid)
        return pid

    def program(self, name):
        """A root-owned 0755 copy of this Python named ``name``: a process running it has that exe."""
        path = os.path.join(self.root, "bin", name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copy(os.path.realpath(sys.executable), path)
            os.chmod(path, 0o755)
        return path

    def orphan(self, gpu, mib):
        """A holder reparented to init (double fork + setsid); its pid."""
        out = subprocess.run([GPU_HOLD, "--orphan", "--gpu", str(gpu), "--mib", str(mib)],
                             check=True, capture_output=True, text=True, timeout=DEADLINE_S)
        pid = int(out.stdout.strip())
        self.orphans.append(pid)
        return pid

    def monitor(self):
        """A process that only initialises NVML (holds every /dev/nvidia* node) and polls it."""
        ready = self._ready_file()
        code = ("import ctypes, os, time, pynvml; ctypes.CDLL(%r); pynvml.nvmlInit(); "
                "open(%r, 'w').close()\n"
                "while True:\n"
                "    [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i))"
                " for i in range(pynvml.nvmlDeviceGetCount())]; time.sleep(0.05)\n") % (self.shim, ready)
        proc = subprocess.Popen([sys.executable, "-c", code])
        self.popens.append(proc)
        wait_for(lambda: os.path.exists(ready) or proc.poll() is not None, "monitor ready")
        assert proc.poll() is None
        return proc.pid

    def cleanup(self):
        for pid in self.orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.popens:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=DEADLINE_S)


class FakeUnits:
    """systemctl for units whose cgroups hold real pids. ``escaped`` pids were in the cgroup when it
    was listed but left it since, so the stop does not reach them (as with a worker that moved out)."""

    def __init__(self, monkeypatch, module):
        self.units = {}
        self.calls = []
        monkeypatch.setattr(module, "cgroup_pids", self.cgroup_pids)

    def add(self, name, pids, escaped=(), state="active", env="", user=""):
        """``env``: the Environment property as systemctl prints it; ``user``: User= ("" is root)."""
        self.units[name] = {"pids": list(pids), "escaped": set(escaped), "state": state, "env": env,
                            "user": user}

    def cgroup_pids(self, control_group):
        unit = self.units.get(control_group.rsplit("/", 1)[-1])
        if not unit or unit["state"] in ("inactive", "failed"):
            return []
        return [p for p in unit["pids"] if alive(p)]

    def _members(self, unit):
        return [p for p in unit["pids"] if p not in unit["escaped"] and alive(p)]

    def _signal(self, unit, signum):
        for pid in self._members(unit):
            os.kill(pid, signum)

    def __call__(self, argv):
        self.calls.append(list(argv))
        verb, name = argv[1], [a for a in argv[2:] if not a.startswith("--")][0]
        unit = self.units.get(name)
        if verb == "show":
            if unit is None:
                return 0, ("LoadState=not-found\nActiveState=inactive\nMainPID=0\nControlGroup=\nUser=\n"
                           "DynamicUser=no\nEnvironment=\n"), ""
            if unit["state"] == "deactivating" and not self._members(unit):
                unit["state"] = "inactive"
            running = unit["state"] not in ("inactive", "failed")
            main = unit["pids"][0] if running and unit["pids"] else 0
            group = "/system.slice/%s" % name if running else ""
            return 0, ("LoadState=loaded\nActiveState=%s\nMainPID=%d\nControlGroup=%s\nUser=%s\n"
                       "DynamicUser=no\nEnvironment=%s\n" % (unit["state"], main, group, unit["user"], unit["env"])), ""
        if verb == "stop":
            unit["state"] = "deactivating"
            self._signal(unit, signal.SIGTERM)
            return 0, "", ""
        if verb == "kill":
            self._signal(unit, signal.SIGKILL)
            return 0, "", ""
        return 1, "", "unexpected systemctl call %r" % argv

    def verbs(self, name):
        return [c[1] for c in self.calls if name in c]
