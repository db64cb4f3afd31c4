# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the mock engine tests: a mock GPU host in a temp dir, engines as real processes,
a small SSE client over http.client (arrival time per event), and /proc helpers."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ENGINES = os.path.join(REPO, "tests", "mockgpu", "engines")
VLLM = os.path.join(ENGINES, "bin", "vllm")
TOTAL_MIB = 143771
if ENGINES not in sys.path:
    sys.path.insert(0, ENGINES)

REASONING = ("A train leaves at noon going sixty miles per hour and another leaves two hours later at "
             "ninety; explain step by step when the second train catches up and why.")
REPETITIVE = "Summarize these log lines:\n" + "\n".join(
    "2024-05-0%d INFO worker %d started task on node alpha with status ok and exit code zero" % (i % 9 + 1, i % 3)
    for i in range(30))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MockGpuHost:
    """gpus.json, device nodes and registry under a temp dir; env pointing the engines at them."""

    def __init__(self, root, load_seconds=0.4, profile=None, gpus=8):
        self.root = str(root)
        self.dev = os.path.join(self.root, "dev")
        self.registry = os.path.join(self.root, "holders")
        os.makedirs(self.dev)
        os.makedirs(self.registry)
        for name in ["nvidiactl"] + ["nvidia%d" % i for i in range(gpus)]:
            open(os.path.join(self.dev, name), "w").close()
        gpus = [{"index": i, "name": "NVIDIA H200", "uuid": "GPU-%d" % i, "memory_total_mib": TOTAL_MIB,
                 "reserved_mib": 615} for i in range(gpus)]
        self.config = os.path.join(self.root, "gpus.json")
        with open(self.config, "w") as f:
            json.dump({"gpus": gpus}, f)
        self.profile = os.path.join(self.root, "profile.json")
        with open(self.profile, "w") as f:
            json.dump(dict({"load_seconds": load_seconds}, **(profile or {})), f)
        self.faults = os.path.join(self.root, "faults.json")

    def set_faults(self, faults):
        with open(self.faults, "w") as f:
            json.dump(faults, f)

    def env(self, **extra):
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.update(MOCKGPU_CONFIG=self.config, MOCKGPU_REGISTRY=self.registry, MOCKGPU_DEV_DIR=self.dev,
                   MOCK_ENGINE_PROFILE=self.profile, MOCK_ENGINE_FAULTS=self.faults,
                   MOCK_ENGINE_MAX_LIFETIME="90", PYTHONPATH=ENGINES)
        env.update(extra)
        return env

    def holders(self):
        """Registry entries whose process is alive (not checking the device node)."""
        out = []
        for name in sorted(os.listdir(self.registry)):
            if name.startswith("."):
                continue
            with open(os.path.join(self.registry, name)) as f:
                entry = json.loads(f.readline())
            if alive(entry["pid"]):
                out.append(entry)
        return out


class Engine:
    """One engine process started in its own session so teardown can end its whole group."""

    def __init__(self, host, argv, env=None, port=None):
        self.host = host
        self.port = port
        self.out = os.path.join(host.root, "engine-%d.log" % time.monotonic_ns())
        with open(self.out, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         env=env or host.env(), start_new_session=True)
        self.started = time.monotonic()

    @classmethod
    def vllm(cls, host, *args, env=None, model="org/model-7b"):
        port = free_port()
        argv = [VLLM, "serve", model, "--host", "127.0.0.1", "--port", str(port)] + list(args)
        return cls(host, argv, env, port)

    @classmethod
    def sglang(cls, host, *args, env=None, model="org/model-7b"):
        port = free_port()
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--host", "127.0.0.1",
                "--port", str(port)] + list(args)
        return cls(host, argv, env, port)

    def log(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def status(self, path="/health"):
        """HTTP status, or 'refused' when nothing listens."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        except ConnectionRefusedError:
            return "refused"
        finally:
            conn.close()

    def wait_ready(self, timeout=15.0):
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "engine exited %s:\n%s" % (self.proc.returncode, self.log())
            st = self.status()
            if not seen or seen[-1] != st:
                seen.append(st)
            if st == 200:
                return seen
            time.sleep(0.05)
        raise AssertionError("not ready after %ss; states %s\n%s" % (timeout, seen, self.log()))

    def get_json(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def metrics(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", "/metrics")
            return parse_prom(conn.getresponse().read().decode())
        finally:
            conn.close()

    def request(self, method, path, body=None):
        """Any method, JSON body optional: (status, json or None)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None, {"content-type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def post(self, path, body):
        """Non-streaming POST: (status, json)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def stream(self, path, body):
        """Streaming POST: list of (arrival monotonic, parsed event or '[DONE]'), plus `complete`
        (False when the connection ended before the terminating chunk)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        events, complete = [], True
        try:
            conn.request("POST", path, json.dumps(dict(body, stream=True)), {"content-type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200, resp.read()
            while True:
                try:
                    line = resp.readline()
                except (http.client.IncompleteRead, ConnectionError):
                    complete = False
                    break
                if not line:
                    # readline() swallows IncompleteRead; only a stream that reached its zero-size
                    # terminating chunk leaves chunk_left at None
                    complete = complete and resp.chunk_left is None
                    break
                line = line.strip()
                if line.startswith(b"data: "):
                    data = line[6:]
                    events.append((time.monotonic(), "[DONE]" if data == b"[DONE]" else json.loads(data)))
        finally:
            conn.close()
        return events, complete

    def terminate(self, sig=signal.SIGTERM, timeout=10):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill_group(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def parse_prom(text):
    """{(name, frozenset(labels)): value} from Prometheus text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _brace, labels = head.partition("{")
        pairs = frozenset(tuple(p.split("=", 1)) for p in labels.rstrip("}").replace('"', "").split(",") if p)
        out[(name, pairs)] = float(value)
    return out


def metric(prom, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    want = {(k, str(v)) for k, v in labels.items()}
    return sum(v for (n, pairs), v in prom.items() if n == name and want <= pairs)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def argv0(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")[0].decode()


def ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if ppid(int(entry)) == pid:
                    out.append(int(entry))
            except (OSError, IndexError):
                continue
    return sorted(out)


def wait_until(predicate, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def chunk_tokens(events):
    """Token counts per SSE content chunk (the fake tokenizer: one token per word)."""
    out = []
    for _arrival, ev in events:
        if ev == "[DONE]" or not ev["choices"]:
            continue
        choice = ev["choices"][0]
        text = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content", "")
        if text:
            out.append(len(text.split()))
    return out


@pytest.fixture
def gpu_host(tmp_path):
    return MockGpuHost(tmp_path)


@pytest.fixture
def engines():
    """Start engines through this list's helpers; every one is ended at teardown."""
    started = []

    class _Starter:
        def vllm(self, host, *args, **kw):
            e = Engine.vllm(host, *args, **kw)
            started.append(e)
            return e

        def sglang(self, host, *args, **kw):
            e = Engine.sglang(host, *args, **kw)
            started.append(e)
            return e

    yield _Starter()
    for e in started:
        e.kill_group()
