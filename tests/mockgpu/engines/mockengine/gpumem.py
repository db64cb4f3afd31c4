# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU memory as the engines see it: totals from the GPU config, usage from live holders.

Reading usage follows the holder-registry contract (docs/architecture.md) the way the
NVML shim does, so a second engine on a busy GPU fails like a real one
("Free memory on device ... is less than desired GPU memory utilization").
Holding goes through mockgpu_hold.hold(), the one writer of the registry.
"""
import glob
import json
import os
import sys

from .settings import ENGINES_DIR, load_gpus

_HOLD_DIRS = ("/usr/local/lib/mockgpu", os.path.join(os.path.dirname(ENGINES_DIR), "lib"))


def import_hold():
    for path in _HOLD_DIRS:
        if os.path.exists(os.path.join(path, "mockgpu_hold.py")) and path not in sys.path:
            sys.path.insert(0, path)
    import mockgpu_hold  # noqa: E402  (found through the paths above)
    return mockgpu_hold


def registry_dir():
    return os.environ.get("MOCKGPU_REGISTRY") or "/run/mockgpu/holders"


def _dev_node(gpu):
    return os.path.join(os.environ.get("MOCKGPU_DEV_DIR") or "/dev", "nvidia%d" % gpu)


def _live(pid, starttime, node):
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    if fields[0] in ("Z", "X") or int(fields[19]) != int(starttime):
        return False
    real = os.path.realpath(node)
    for fd in glob.glob("/proc/%d/fd/*" % pid):
        try:
            if os.readlink(fd) == real:
                return True
        except OSError:
            continue
    return False


def used_mib(gpu):
    total = 0
    for path in glob.glob(os.path.join(registry_dir(), "*.%d" % gpu)):
        try:
            with open(path, encoding="utf-8") as f:
                entry = json.loads(f.readline())
            if int(entry["gpu"]) == gpu and _live(int(entry["pid"]), entry["starttime"], _dev_node(gpu)):
                total += int(entry["mib"])
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return total


def gpu_info(gpu):
    """(total_mib, free_mib) of a mock GPU, or None when it does not exist."""
    info = load_gpus().get(gpu)
    if info is None:
        return None
    total = int(info["memory_total_mib"])
    free = total - int(info.get("reserved_mib", 0)) - used_mib(gpu)
    return total, free


def visible_gpus():
    """CUDA_VISIBLE_DEVICES as a list of indices (None = every GPU in the config)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return sorted(load_gpus())
    out = []
    for item in cvd.split(","):
        item = item.strip()
        if not item:
            continue
        if item.isdigit():
            out.append(int(item))
        else:  # a UUID
            for idx, g in load_gpus().items():
                if g.get("uuid") == item:
                    out.append(idx)
    return out
