# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process tree of the engines: naming, parent-death signal, spawning, readiness pipe.

Children are exec'd with argv[0] set to the engine's process title (what ps and the
NVML shim show, e.g. `VLLM::Worker_TP0`) and their comm set with prctl(PR_SET_NAME).
They report readiness as one JSON line each on an inherited pipe.
"""
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

from .settings import max_lifetime

CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15

_libc = None


def _prctl(option, arg):
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(option, ctypes.c_ulong(arg) if isinstance(arg, int) else arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def set_name(name):
    """Set /proc/self/comm (15 bytes max, as the kernel truncates a real engine's title)."""
    _prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))


def die_with_parent(expected_parent):
    """PR_SET_PDEATHSIG(SIGKILL): what keeps real vLLM workers from outliving the API (PR #34816)."""
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != expected_parent:  # the parent died before we armed it
        os._exit(1)


def install_signals(ignore_sigterm, on_term):
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: on_term())
    signal.signal(signal.SIGINT, lambda *_: on_term())


def sleep_forever(stop_check=None):
    """Sleep until the optional lifetime cap (MOCK_ENGINE_MAX_LIFETIME) ends the process."""
    cap = max_lifetime()
    start = time.monotonic()
    while True:
        if cap and time.monotonic() - start > cap:
            os._exit(0)
        if stop_check and stop_check():
            return
        time.sleep(0.2)


def report(fd, **msg):
    msg.setdefault("pid", os.getpid())
    try:
        os.write(fd, (json.dumps(msg) + "\n").encode())
    except OSError:
        pass


def spawn(title, payload, ready_fd, python=None):
    """exec a child whose argv[0] is the engine's process title."""
    env = dict(os.environ)
    payload = dict(payload, ready_fd=ready_fd, parent=os.getpid(), python=python or sys.executable)
    env["MOCKENGINE_CHILD"] = json.dumps(payload)
    return subprocess.Popen([title, CHILD_SCRIPT], executable=payload["python"], env=env,
                            pass_fds=(ready_fd,), close_fds=True)


class Supervisor:
    """Starts a set of rank processes and waits for each to report ready (or fail)."""

    def __init__(self, log, python=None):
        self.log = log
        self.python = python or sys.executable
        self.procs = []  # (payload, Popen)
        self.rfd, self.wfd = os.pipe()
        self._buf = b""
        self.ready = {}

    def start(self, title_and_payloads):
        for title, payload in title_and_payloads:
            self.procs.append((payload, spawn(title, payload, self.wfd, self.python)))
        os.close(self.wfd)

    def _messages(self, timeout):
        got = []
        if select.select([self.rfd], [], [], timeout)[0]:
            chunk = os.read(self.rfd, 65536)
            self._buf += chunk
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                try:
                    got.append(json.loads(line))
                except ValueError:
                    pass
        return got

    def wait_ready(self, count, timeout):
        """Return None when `count` ranks reported ok, else an error string."""
        deadline = time.monotonic() + timeout
        while len(self.ready) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            for msg in self._messages(min(left, 0.2)):
                if not msg.get("ok"):
                    return msg.get("error") or "rank %s failed" % msg.get("rank")
                self.ready[msg.get("rank", len(self.ready))] = msg
            dead = self.crashed()
            if dead:
                return dead
        return None

    def crashed(self):
        """A rank process that exited non-zero (an escaping worker's launcher exits 0)."""
        for payload, proc in self.procs:
            rc = proc.poll()
            if rc not in (None, 0):
                return "%s (rank %s) exited with code %s" % (payload.get("title", "worker"), payload.get("rank"), rc)
        return None

    def stop(self, timeout=5.0):
        for _payload, proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.terminate()
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        for _payload, proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
