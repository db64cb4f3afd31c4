# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host for the switch guard's tests: a fake systemd at the lowest boundary (``systemctl`` and
``systemd-run`` executables on PATH), real processes under it, a real loopback HTTP engine.

The fake systemd keeps its state in files under ``$FAKE_SYSTEMD_DIR``:
- ``loaded/NAME.json``: what ``daemon-reload`` parsed from ``$FAKE_UNIT_DIR/NAME`` (ExecStart= split
  like a shell would, Environment=). ``start`` runs the *loaded* definition, as systemd does, so a
  unit file put back without a daemon-reload would start the old command.
- ``units/NAME.json``: runtime state: the main pid, whether a stop was asked, the exit status.
  Each started unit runs under a small supervisor process (this script, ``supervise``) that waits
  for the main process and records how it ended: exit 0 or killed after a stop -> inactive,
  otherwise failed. A transient unit (systemd-run) that exited 0 is unloaded.
- ``calls.log``: one JSON line per invocation (argv, and the environment systemd-run passed on).
- ``units/NAME.log``: the unit's stdout and stderr (the journal).
Only the environment a systemd host would give a unit reaches it (PATH and the mock GPU host's
variables), plus ``Environment=`` / ``--setenv``: never this test process's PYTHONPATH.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_lease, _guard_state, _lock, _nvml
from ansible_collections.llmops.specdec.tests.unit.mockgpu.mockgpu_testhost import wait_for
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import REPO, alive

HOLD_LIB = os.path.join(REPO, "tests", "mockgpu", "lib")
GPU_HOLD = os.path.join(REPO, "tests", "mockgpu", "bin", "gpu-hold")
FAKE_SYSTEMD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakesystemd.py")

FAKE_ENGINE = r'''
"""A mock engine: holds mock GPU memory, then serves /health and /v1/models on loopback."""
import http.server
import json
import sys
import time
sys.path.insert(0, %(hold_lib)r)
import mockgpu_hold

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
holds = [mockgpu_hold.hold(int(args["--gpu"]), int(args["--mib"]))]
time.sleep(float(args.get("--load", "0")))
if args.get("--never-ready") == "1":
    while True:
        time.sleep(1)


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body, code = b"", 200
        elif self.path == "/v1/models":
            body, code = json.dumps({"data": [{"id": args.get("--model", "prod")}]}).encode(), 200
        else:
            body, code = b"", 404
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


http.server.HTTPServer(("127.0.0.1", int(args["--port"])), H).serve_forever()
'''


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def health(port, timeout=2.0):
    """Status of GET /health on loopback, or None when nothing answers."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", "/health")
        return conn.getresponse().status
    except OSError:
        return None


class FakeSystemd:
    """The fake systemd's directories, executables on PATH, and helpers to read its state."""

    def __init__(self, root, monkeypatch, shim):
        self.root = os.path.join(str(root), "systemd")
        self.unit_dir = os.path.join(str(root), "etc", "systemd", "system")
        self.bin = os.path.join(str(root), "bin")
        for d in (self.root, os.path.join(self.root, "loaded"), os.path.join(self.root, "units"),
                  os.path.join(self.root, "logs"), self.unit_dir, self.bin):
            os.makedirs(d, exist_ok=True)
        script = os.path.join(self.root, "fakesystemd.py")
        with open(FAKE_SYSTEMD) as src, open(script, "w") as handle:  # this Python, not PATH's python3
            handle.write("#!%s\n" % sys.executable + src.read().split("\n", 1)[1])
        os.chmod(script, 0o755)
        for name in ("systemctl", "systemd-run"):
            os.symlink(script, os.path.join(self.bin, name))
        self.engine = os.path.join(str(root), "fake_engine.py")
        with open(self.engine, "w") as handle:
            handle.write(FAKE_ENGINE % {"hold_lib": HOLD_LIB})
        monkeypatch.setenv("PATH", self.bin + os.pathsep + "/usr/bin:/bin:" + os.environ.get("PATH", ""))
        monkeypatch.setenv("FAKE_SYSTEMD_DIR", self.root)
        monkeypatch.setenv("FAKE_UNIT_DIR", self.unit_dir)
        monkeypatch.setenv("LD_LIBRARY_PATH", os.path.dirname(shim))
        self.env = os.environ  # live view: monkeypatched values

    def systemctl(self, *args):
        out = subprocess.run([os.path.join(self.bin, "systemctl")] + list(args), capture_output=True, text=True,
                             timeout=30, check=False)
        return out.returncode, out.stdout, out.stderr

    def run_command(self, argv, **_kw):
        """``module.run_command`` over the fake (argv[0] resolved on PATH, as subprocess does)."""
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        return out.returncode, out.stdout, out.stderr

    def unit(self, name):
        try:
            with open(os.path.join(self.root, "units", name + ".json")) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def prop(self, name, prop):
        return self.systemctl("show", name, "--property=" + prop)[1].strip().partition("=")[2]

    def calls(self, cmd=None):
        try:
            with open(os.path.join(self.root, "calls.log")) as handle:
                rows = [json.loads(line) for line in handle]
        except FileNotFoundError:
            return []
        return [r for r in rows if cmd is None or r["cmd"] == cmd]

    def journal(self, name):
        try:
            with open(os.path.join(self.root, "logs", name + ".log")) as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def write_unit(self, name, argv, mode=0o644):
        path = os.path.join(self.unit_dir, name)
        with open(path, "w") as handle:
            handle.write("[Unit]\nDescription=%s\n\n[Service]\nType=exec\nExecStart=%s\n\n[Install]\n"
                         "WantedBy=multi-user.target\n" % (name, " ".join(argv)))
        os.chmod(path, mode)
        return path

    def engine_argv(self, port, gpu, mib, load=0.0, never_ready=False):
        return [sys.executable, self.engine, "--port", str(port), "--gpu", str(gpu), "--mib", str(mib),
                "--load", str(load), "--never-ready", "1" if never_ready else "0"]

    def holder_argv(self, gpu, mib, ignore_sigterm=False):
        return [GPU_HOLD, "--gpu", str(gpu), "--mib", str(mib)] + (["--ignore-sigterm"] if ignore_sigterm else [])

    def reboot(self):
        """Every process of every unit is gone and systemd forgot the runtime state; unit files and
        enablement stay (the boot re-reads the files)."""
        for fname in os.listdir(os.path.join(self.root, "units")):
            path = os.path.join(self.root, "units", fname)
            with open(path) as handle:
                u = json.load(handle)
            for pid in (u.get("pid"), u.get("supervisor")):
                if pid and alive(pid):
                    os.kill(pid, signal.SIGKILL)
            if u.get("transient"):
                os.unlink(path)
            else:
                with open(path, "w") as handle:
                    json.dump({"enabled": u.get("enabled", False)}, handle)
        for fname in os.listdir(os.path.join(self.root, "loaded")):
            os.unlink(os.path.join(self.root, "loaded", fname))
        self.systemctl("daemon-reload")

    def cleanup(self):
        for fname in os.listdir(os.path.join(self.root, "units")):
            try:
                with open(os.path.join(self.root, "units", fname)) as handle:
                    u = json.load(handle)
            except (OSError, ValueError):
                continue
            for pid in (u.get("pid"), u.get("supervisor")):
                if pid and alive(pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def wait_until(cond, what, deadline_s=40.0):
    wait_for(cond, what, deadline_s)


def wait_gone(pid, deadline_s=20.0):
    wait_for(lambda: not alive(pid), "pid %d gone" % pid, deadline_s)


# ------------------------------------------------------------ one host mid-switch (test__guard*.py)

UNIT = "vllm-server.service"
RUN = "run-0001"
OWNER = {"controller": "ctl.example", "user": "ops", "pid": 4242, "awx_job_id": "77", "label": "ngram k=4"}
PROD_MIB = 60000
CAND_MIB = 90000


def gpu_procs(index):
    nvml = _nvml.Nvml()
    try:
        gpu = nvml.devices()[index]
        return nvml.compute_processes(gpu), nvml.memory(gpu)[0]
    finally:
        nvml.close()


class Switch:
    """One host mid-switch: production running, snapshot taken, lock held; the test plays the controller."""

    def __init__(self, root, sd, previous=True, never_ready=False):
        self.sd = sd
        self.root = str(root)
        self.state_dir = os.path.join(self.root, "var", "lib", "llmops-specdec")
        self.lib = os.path.join(self.root, "usr", "local", "lib", "llmops-specdec")
        self.lock = os.path.join(self.root, "run", "llmops-specdec.lock")
        os.makedirs(os.path.dirname(self.lock))
        os.makedirs(os.path.join(self.state_dir, "snapshot"))
        self.port = free_port()
        self.unit_path = os.path.join(sd.unit_dir, UNIT)
        self.snapshot = "absent"
        self.prod_bytes = None
        if previous:
            sd.write_unit(UNIT, sd.engine_argv(self.port, 0, PROD_MIB, never_ready=never_ready))
            sd.systemctl("daemon-reload")
            sd.systemctl("enable", UNIT)
            assert sd.systemctl("start", UNIT)[0] == 0
            if not never_ready:
                wait_until(lambda: health(self.port) == 200, "production answers")
            self.take_snapshot()
        _lock.acquire(self.lock, RUN, OWNER, ttl=600)
        self.history = os.path.join(self.state_dir, "history.jsonl")
        self.statefile = _guard_state.state_path(self.state_dir, UNIT)

    def take_snapshot(self):
        """What snapshot.yml does: production's unit file, byte for byte, under snapshot/."""
        with open(self.unit_path, "rb") as handle:
            self.prod_bytes = handle.read()
        self.snapshot = os.path.join(self.state_dir, "snapshot", UNIT)
        with open(self.snapshot, "wb") as handle:
            handle.write(self.prod_bytes)

    def params(self, **kw):
        base = {"unit": UNIT, "unit_path": self.unit_path, "state_dir": self.state_dir, "snapshot": self.snapshot,
                "snapshot_checksum": None, "baseline_files": [], "ready_url": "http://127.0.0.1:%d" % self.port,
                "engine": "vllm", "model": None, "api_key_file": None, "api_key_var": "VLLM_API_KEY",
                "ready_timeout": 30, "lock_path": self.lock, "history": None, "ttl": 60, "run_id": RUN,
                "owner": OWNER, "lib_dir": self.lib, "python": sys.executable, "poll_interval": 0.2,
                "unit_dir": self.sd.unit_dir,
                "reclaim": {"scope": "gpu", "gpus": ["0"], "stop_timeout": 2, "term_timeout": 1, "verify_timeout": 15}}
        base.update(kw)
        return base

    def arm(self, **kw):
        return _guard_lease.arm(self.params(**kw), self.sd.run_command)

    def install_candidate(self, ignore_sigterm=False):
        """What the role does after the reclaim: production stopped, the candidate unit installed and started."""
        self.sd.systemctl("stop", UNIT)
        wait_until(lambda: self.sd.prop(UNIT, "ActiveState") in ("inactive", "failed"), "production stopped")
        self.sd.write_unit(UNIT, self.sd.holder_argv(0, CAND_MIB, ignore_sigterm=ignore_sigterm))
        self.sd.systemctl("daemon-reload")
        assert self.sd.systemctl("start", UNIT)[0] == 0
        wait_until(lambda: int(self.sd.prop(UNIT, "MainPID") or 0) and
                   int(self.sd.prop(UNIT, "MainPID")) in gpu_procs(0)[0], "candidate holds GPU 0")
        return int(self.sd.prop(UNIT, "MainPID"))

    def records(self):
        try:
            with open(self.history) as handle:
                return [json.loads(line) for line in handle]
        except FileNotFoundError:
            return []

    def wait_record(self, deadline_s=60.0):
        wait_until(lambda: self.records() and not os.path.exists(self.statefile), "a guard record", deadline_s)
        return self.records()[-1]

    def watcher(self):
        return self.sd.unit(_guard_lease.watcher_name(UNIT))
