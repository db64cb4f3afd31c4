# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print what NVML reports for every GPU of this host as one JSON document (for verify playbooks).

Runs on the (mock) GPU host through ansible.builtin.script; reads NVML through unmodified pynvml,
so on the mock host it exercises the shim exactly as the collection's modules do.
"""
from __future__ import annotations

import json

import pynvml


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _cgroup(pid):
    """The process's cgroup v2 path ("0::" line), which is what systemd tracks units by."""
    for line in _read(f"/proc/{pid}/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return ""


def gpu_state():
    gpus = []
    for k in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(k)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
        procs = [{"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) >> 20,
                  "cmdline": _read(f"/proc/{p.pid}/cmdline").replace("\0", " ").strip(),
                  "cgroup": _cgroup(p.pid)}
                 for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
        gpus.append({"index": k, "uuid": pynvml.nvmlDeviceGetUUID(h), "total_mib": mem.total >> 20,
                     "used_mib": mem.used >> 20, "reserved_mib": mem.reserved >> 20, "procs": procs})
    return gpus


def main():
    pynvml.nvmlInit()
    try:
        print(json.dumps({"gpus": gpu_state()}))
    finally:
        pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
