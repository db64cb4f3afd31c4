"""Hold mock GPU memory the way the mock NVML shim counts it (stdlib only, Python >= 3.9).

A process holds N MiB on mock GPU k while it keeps ``$DEV_DIR/nvidia<k>`` open and
``$REGISTRY/<pid>.<k>`` names it with its /proc starttime. The shim checks both against the
live process on every query, so the memory frees the moment the process dies, as on real
hardware; no cleanup is needed for that (stale entries are ignored).
"""
from __future__ import annotations

import json
import os
from typing import Optional

DEFAULT_CONFIG = "/etc/mockgpu/gpus.json"
DEFAULT_REGISTRY = "/run/mockgpu/holders"
DEFAULT_DEV_DIR = "/dev"


# (pid, gpu) of the holds this process has made: one entry file per pid and GPU
_active = set()


def env_config_path() -> str:
    return os.environ.get("MOCKGPU_CONFIG") or DEFAULT_CONFIG


def env_registry_dir() -> str:
    return os.environ.get("MOCKGPU_REGISTRY") or DEFAULT_REGISTRY


def env_dev_dir() -> str:
    return os.environ.get("MOCKGPU_DEV_DIR") or DEFAULT_DEV_DIR


def load_config(path: Optional[str] = None) -> list:
    """The GPU entries of gpus.json (list of dicts), sorted by index."""
    with open(path or env_config_path(), encoding="utf-8") as f:
        gpus = json.load(f)["gpus"]
    return sorted(gpus, key=lambda g: g["index"])


def proc_starttime(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot); identifies a pid's lifetime."""
    with open("/proc/%d/stat" % pid, "rb") as f:
        stat = f.read()
    # comm (field 2) may contain spaces and ')': count fields after the last ')'
    rest = stat[stat.rindex(b")") + 2:].split()
    return int(rest[22 - 3])


def _write_atomic(path: str, text: str) -> None:
    tmp = "%s/.%s.%d.tmp" % (os.path.dirname(path), os.path.basename(path), os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Holding:
    """One registered hold: the open device node and its registry entry."""

    def __init__(self, gpu: int, mib: int, fd: int, entry: str):
        self.pid = os.getpid()
        self.gpu = gpu
        self.mib = mib
        self.fd = fd
        self.entry = entry

    @property
    def held(self) -> bool:
        return self.fd is not None

    def release(self) -> None:
        """Drop the hold: remove the entry, then close the node. Safe to call twice."""
        if self.fd is None:
            return
        try:
            os.unlink(self.entry)
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        _active.discard((self.pid, self.gpu))

    def __enter__(self) -> "Holding":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return "Holding(gpu=%d, mib=%d, held=%s)" % (self.gpu, self.mib, self.held)


def hold(gpu: int, mib: int, registry: Optional[str] = None, dev_dir: Optional[str] = None) -> Holding:
    """Make this process hold `mib` MiB on mock GPU `gpu` until release() or exit."""
    gpu, mib = int(gpu), int(mib)
    if gpu < 0 or mib < 0:
        raise ValueError("gpu and mib must be >= 0, got gpu=%d mib=%d" % (gpu, mib))
    pid = os.getpid()
    if (pid, gpu) in _active:
        raise ValueError("this process already holds GPU %d; release it first" % gpu)
    registry = registry or env_registry_dir()
    node = os.path.join(dev_dir or env_dev_dir(), "nvidia%d" % gpu)
    # open first: the shim needs the node open before the entry may count
    try:
        fd = os.open(node, os.O_RDWR | os.O_CLOEXEC)
    except PermissionError:
        fd = os.open(node, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.makedirs(registry, exist_ok=True)
        entry = os.path.join(registry, "%d.%d" % (pid, gpu))
        record = {"pid": pid, "gpu": gpu, "mib": mib, "starttime": proc_starttime(pid)}
        _write_atomic(entry, json.dumps(record) + "\n")
    except BaseException:
        os.close(fd)
        raise
    _active.add((pid, gpu))
    return Holding(gpu, mib, fd, entry)
