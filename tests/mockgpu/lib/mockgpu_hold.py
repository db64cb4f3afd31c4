# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold mock GPU memory the way the mock NVML shim counts it (stdlib only, Python >= 3.9).

Library: ``hold(gpu, mib)`` -> Holding (``release()``). Command line (``gpu-hold`` execs this file):

  gpu-hold --gpu K --mib N [--gpu K2 --mib N2 ...] [--ignore-sigterm] [--name NAME]
           [--orphan] [--ready-file PATH]

Pairs of --gpu/--mib are matched in order (a tensor-parallel worker can span GPUs).
--orphan: double-fork + setsid so the holder is reparented to init (like leftover vLLM
workers); the launcher exits once the holder is registered and prints the holder's pid.
--ready-file: written (holder pid inside) after every hold is registered.

A process holds N MiB on mock GPU k while it keeps ``$DEV_DIR/nvidia<k>`` open and
``$REGISTRY/<pid>.<k>`` names it with its /proc starttime. The shim checks both against the
live process on every query, so the memory frees the moment the process dies, as on real
hardware; no cleanup is needed for that (stale entries are ignored).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
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

    def resize(self, mib: int) -> None:
        """Hold `mib` MiB from now on, the device node still open (a parked engine keeps its context)."""
        if self.fd is None or int(mib) < 0:
            raise ValueError("resize needs a live hold and mib >= 0")
        record = {"pid": self.pid, "gpu": self.gpu, "mib": int(mib), "starttime": proc_starttime(self.pid)}
        _write_atomic(self.entry, json.dumps(record) + "\n")
        self.mib = int(mib)

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


# ---- gpu-hold command line ----

PR_SET_NAME = 15


def parse_args(argv):
    p = argparse.ArgumentParser(prog="gpu-hold", description="Hold mock GPU memory until killed.")
    p.add_argument("--gpu", type=int, action="append", required=True, help="GPU index (repeatable)")
    p.add_argument("--mib", type=int, action="append", required=True, help="MiB to hold on the matching --gpu")
    p.add_argument("--ignore-sigterm", action="store_true", help="survive SIGTERM (only SIGKILL ends it)")
    p.add_argument("--name", help="process name (prctl PR_SET_NAME, max 15 chars shown in comm)")
    p.add_argument("--orphan", action="store_true", help="double-fork + setsid, reparent the holder to init")
    p.add_argument("--ready-file", help="written with the holder pid once every hold is registered")
    args = p.parse_args(argv)
    if len(args.gpu) != len(args.mib):
        p.error("--gpu and --mib must come in pairs (got %d --gpu, %d --mib)" % (len(args.gpu), len(args.mib)))
    if len(set(args.gpu)) != len(args.gpu):
        p.error("each GPU may appear once")
    return args


def set_name(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME) failed")


def write_ready(path: str) -> None:
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("%d\n" % os.getpid())
    os.replace(tmp, path)


def become_holder(args) -> list:
    """Name, signals, holds, ready file: everything before the holder sleeps.

    Holding has no finalizer, so the device nodes stay open until the process exits
    whether or not the caller keeps the returned list."""
    if args.name:
        set_name(args.name)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    holds = [hold(g, m) for g, m in zip(args.gpu, args.mib)]
    if args.ready_file:
        write_ready(args.ready_file)
    return holds


def sleep_forever() -> None:
    while True:
        signal.pause()


def run_orphan(args) -> int:
    """Launcher side: fork, let the child setsid + fork again, report the grandchild."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)  # the grandchild loses its parent and is reparented to init
        try:
            become_holder(args)
        except BaseException as exc:  # report any failure to the launcher, then die
            os.write(w, ("error %s\n" % exc).encode())
            os._exit(1)
        os.write(w, ("%d\n" % os.getpid()).encode())
        os.close(w)
        # a daemon keeps no terminal or pipes of its launcher open
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sleep_forever()
    os.close(w)
    os.waitpid(child, 0)
    with os.fdopen(r, "r") as f:
        line = f.readline().strip()
    if not line or line.startswith("error"):
        sys.stderr.write("gpu-hold: orphan failed: %s\n" % (line[6:] or "exited before registering"))
        return 1
    print(line, flush=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.orphan:
        return run_orphan(args)
    try:
        become_holder(args)
    except (OSError, ValueError) as exc:
        sys.stderr.write("gpu-hold: %s\n" % exc)
        return 1
    sleep_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
