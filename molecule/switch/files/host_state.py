# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print one JSON document of what a switch may have changed on this host (for verify plays).

Usage: host_state.py UNIT PORT [STATE_DIR] [LOCK_PATH]. Reads the unit file, systemd's view of the
unit (systemctl show), the main process's argv, the switch state kept under STATE_DIR (history,
baselines, the unit kept for rollback), whether the lock exists, GPU memory through pynvml (with
molecule/_shared/files/gpu_state.py, which steps/prepare.yml copies beside the mock's libraries: one
round trip per reading instead of two), and sends one real completion to the engine on 127.0.0.1:PORT.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, "/usr/local/lib/mockgpu")
import gpu_state  # noqa: E402  (copied there by steps/prepare.yml)
import pynvml  # noqa: E402

SHOW = ["ActiveState", "SubState", "MainPID", "ExecStart", "NRestarts", "ControlGroup", "Result"]


def _file(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {"exists": False}
    return {"exists": True, "sha256": hashlib.sha256(data).hexdigest(), "mtime_ns": os.stat(path).st_mtime_ns,
            "text": data.decode(errors="replace")}


def _show(unit):
    out = subprocess.run(["systemctl", "show", unit] + ["-p" + p for p in SHOW],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _argv(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [w.decode() for w in f.read().split(b"\0")[:-1]]
    except (OSError, ValueError):
        return []


def _completion(port):
    """A real request: /v1/models for the name, then a short non-streaming completion."""
    base = "http://127.0.0.1:%s" % port
    try:
        with urllib.request.urlopen(base + "/v1/models", timeout=10) as r:
            model = json.load(r)["data"][0]["id"]
        body = json.dumps({"model": model, "prompt": "Say something about GPUs.", "max_tokens": 8}).encode()
        req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            answer = json.load(r)
        return {"ok": bool(answer["choices"][0]["text"].strip()), "model": model,
                "completion_tokens": answer["usage"]["completion_tokens"]}
    except Exception as exc:  # any failure is a finding, reported rather than raised
        return {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}


def _gpus():
    pynvml.nvmlInit()
    try:
        return gpu_state.gpu_state()
    finally:
        pynvml.nvmlShutdown()


def _history(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def main():
    unit, port = sys.argv[1], sys.argv[2]
    state_dir = sys.argv[3] if len(sys.argv) > 3 else "/var/lib/llmops-specdec"
    lock = sys.argv[4] if len(sys.argv) > 4 else "/run/llmops-specdec.lock"
    show = _show(unit)
    # ExecStart also carries the last run's pid and times; argv[] is the configured command line.
    found = re.search(r"argv\[\]=(.*?) ; ignore_errors=", show.get("ExecStart", ""))
    show["ExecArgv"] = found.group(1) if found else ""
    baselines_dir = os.path.join(state_dir, "baselines")
    baselines = sorted(os.listdir(baselines_dir)) if os.path.isdir(baselines_dir) else []
    print(json.dumps({
        "unit": _file("/etc/systemd/system/" + unit),
        "show": show,
        "argv": _argv(int(show.get("MainPID") or 0)),
        "history": _history(os.path.join(state_dir, "history.jsonl")),
        "baselines": baselines,
        "baseline_mtimes": {name: os.stat(os.path.join(baselines_dir, name)).st_mtime_ns for name in baselines},
        "previous": _file(os.path.join(state_dir, "previous", unit)),
        "lock": os.path.exists(lock),
        "serving": _completion(port) if show.get("ActiveState") == "active" else {"ok": False, "error": "inactive"},
        "gpus": _gpus(),
    }))


if __name__ == "__main__":
    main()
