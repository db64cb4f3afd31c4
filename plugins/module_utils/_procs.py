# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process discovery from /proc, and SIGTERM -> SIGKILL escalation that waits without fixed sleeps.

Identity of a process is ``(pid, starttime)`` so a recycled pid is never signalled by mistake.
"""
from __future__ import annotations

import errno
import os
import re
import select
import signal
import time

# How often to look again when pidfds are not available (old kernel or Python < 3.9).
POLL_INTERVAL = 0.01
_SIGTERM_BIT = 1 << (signal.SIGTERM - 1)
# Interpreters whose script name, not the binary, tells what a process is.
_INTERPRETERS = re.compile(r"^(python[0-9.]*|perl|ruby|bash|sh|dash|node)$")
_NODE = re.compile(r"nvidia(\d+)$")


class Proc:
    """A snapshot of one process read from ``/proc/<pid>``."""

    __slots__ = ("pid", "ppid", "state", "starttime", "comm", "cmdline", "cgroup")

    def __init__(self, pid, ppid, state, starttime, comm, cmdline, cgroup):
        self.pid = pid
        self.ppid = ppid
        self.state = state
        self.starttime = starttime
        self.comm = comm
        self.cmdline = cmdline
        self.cgroup = cgroup

    @property
    def key(self):
        return (self.pid, self.starttime)

    @property
    def dead(self):
        return self.state in ("Z", "X", "x")

    def names(self):
        """Every name a protect entry may use: comm, argv[0] basename, an interpreter's script."""
        names = {self.comm}
        if self.cmdline:
            first = os.path.basename(self.cmdline[0])
            names.add(first)
            if _INTERPRETERS.match(first) and len(self.cmdline) > 1:
                script = [a for a in self.cmdline[1:] if not a.startswith("-")]
                if script:
                    names.add(os.path.basename(script[0]))
        return names

    def matches(self, protect):
        names = self.names()
        # comm is cut to 15 characters by the kernel ("nvidia-persistenced" -> "nvidia-persiste").
        return any(name in names or name[:15] == self.comm for name in protect)

    def command(self):
        return " ".join(self.cmdline) if self.cmdline else "[%s]" % self.comm


class ProcFS:
    """Reads /proc (``root`` points elsewhere in tests)."""

    def __init__(self, root="/proc"):
        self.root = root

    def _read(self, pid, name):
        with open(os.path.join(self.root, str(pid), name), "rb") as handle:
            return handle.read()

    def pids(self):
        return [int(d) for d in os.listdir(self.root) if d.isdigit()]

    def get(self, pid):
        """The process ``pid``, or None when it does not exist (already exited is not an error)."""
        try:
            stat = self._read(pid, "stat").decode(errors="replace")
            cmdline = self._read(pid, "cmdline").decode(errors="replace")
            cgroup = self._read(pid, "cgroup").decode(errors="replace")
        except (OSError, ValueError):
            return None
        head, _sep, tail = stat.rpartition(")")
        fields = tail.split()
        if len(fields) < 20:
            return None
        comm = head.partition("(")[2]
        args = cmdline.split("\0")
        if args and args[-1] == "":
            args.pop()
        return Proc(pid, int(fields[1]), fields[0], int(fields[19]), comm, args, _systemd_cgroup(cgroup))

    def alive(self, proc):
        """Whether ``proc`` (same pid and starttime) still runs: not gone, not a finished zombie.

        A zombie leader whose other threads still run is alive: a multi-threaded process (torch)
        shows its leader as Z while the remaining threads tear down the GPU context, and a process
        whose main thread exited on its own keeps running in its other threads.
        """
        now = self.get(proc.pid)
        if now is None or now.starttime != proc.starttime:
            return False
        if not now.dead:
            return True
        try:
            return len(os.listdir(os.path.join(self.root, str(proc.pid), "task"))) > 1
        except OSError:
            return False

    def table(self):
        """``{pid: Proc}`` of every process readable now."""
        procs = {}
        for pid in self.pids():
            proc = self.get(pid)
            if proc is not None:
                procs[pid] = proc
        return procs

    def sigterm_ignored(self, pid):
        """True when SIGTERM is ignored (SigIgn): waiting for it to work would be pointless."""
        try:
            status = self._read(pid, "status").decode(errors="replace")
        except OSError:
            return False
        for line in status.splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & _SIGTERM_BIT)
        return False

    def open_nodes(self, pid, dev_dir):
        """Minor numbers of ``<dev_dir>/nvidia<N>`` nodes that ``pid`` holds open."""
        fd_dir = os.path.join(self.root, str(pid), "fd")
        prefix = os.path.join(dev_dir, "nvidia")
        minors = set()
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return minors
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith(prefix):
                match = _NODE.search(target)
                if match and target == prefix + match.group(1):
                    minors.add(int(match.group(1)))
        return minors

    def maps_library(self, pid, fragment):
        """Whether ``pid`` has a library whose path contains ``fragment`` mapped (e.g. libcuda)."""
        try:
            return fragment.encode() in self._read(pid, "maps")
        except OSError:
            return False


def _systemd_cgroup(text):
    """The cgroup path systemd manages: the name=systemd (v1) line, else the unified (0::) line."""
    unified = ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "name=systemd":
            return parts[2]
        if parts[0] == "0":
            unified = parts[2]
    return unified


def ancestors(procs, pid):
    """``pid`` and every ancestor of it in ``procs`` (``{pid: Proc}``)."""
    chain = set()
    while pid and pid not in chain:
        chain.add(pid)
        proc = procs.get(pid)
        pid = proc.ppid if proc else 0
    return chain


def descendants(procs, roots):
    """Every pid in ``procs`` whose ancestry reaches a pid in ``roots`` (roots included)."""
    children = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(), [p for p in roots if p in procs]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


class _Handle:
    """A process being signalled: pidfd when available so a recycled pid can never be hit."""

    def __init__(self, procfs, proc):
        self.proc = proc
        self.procfs = procfs
        self.pidfd = None
        self.signal = None  # the last signal sent
        self.gone = False
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(proc.pid)
            except OSError:
                self.pidfd = None
        # Opened (or not) after the snapshot: check it is still the same process.
        if not procfs.alive(proc):
            self.gone = True

    def send(self, signum):
        try:
            if self.pidfd is not None and hasattr(signal, "pidfd_send_signal"):
                signal.pidfd_send_signal(self.pidfd, signum)
            elif self.procfs.alive(self.proc):  # same pid and starttime, right before the kill
                os.kill(self.proc.pid, signum)
            else:
                self.gone = True
                return False
        except ProcessLookupError:
            self.gone = True
            return False
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                self.gone = True
                return False
            raise
        self.signal = signum
        return True

    def check(self):
        if self.gone:
            return True
        if self.pidfd is not None:
            # Readable once every thread of the process has exited (the kernel's own answer).
            self.gone = bool(select.select([self.pidfd], [], [], 0)[0])
        elif not self.procfs.alive(self.proc):
            self.gone = True
        return self.gone

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def wait_gone(handles, deadline, clock=time.monotonic, sleep=time.sleep):
    """Wait until every handle's process has exited or ``deadline``; pidfds wake us on exit."""
    while True:
        live = [h for h in handles if not h.check()]
        remaining = deadline - clock()
        if not live or remaining <= 0:
            return live
        fds = [h.pidfd for h in live if h.pidfd is not None]
        if fds and len(fds) == len(live):
            poller = select.poll()
            for fd in fds:
                poller.register(fd, select.POLLIN)
            poller.poll(max(1, int(remaining * 1000)))
        else:
            sleep(min(POLL_INTERVAL, remaining))


def escalate(procfs, procs, term_timeout, kill_timeout, clock=time.monotonic, sleep=time.sleep):
    """SIGTERM ``procs``, wait up to ``term_timeout``, SIGKILL the rest, wait up to ``kill_timeout``.

    A process that ignores SIGTERM (SigIgn) or is stopped gets SIGKILL at once: the grace could not
    help it. Returns ``(ended, alive, timings)``: ``ended`` maps pid to the name of the signal that
    ended it (None if it was gone before any signal), ``alive`` lists pids that survived SIGKILL.
    """
    handles = [_Handle(procfs, p) for p in procs]
    try:
        start = clock()
        term, now_kill = [], []
        for h in handles:
            if h.gone:
                continue
            if h.proc.state in ("T", "t") or procfs.sigterm_ignored(h.proc.pid):
                now_kill.append(h)
            else:
                term.append(h)
        for h in now_kill:
            h.send(signal.SIGKILL)
        for h in term:
            h.send(signal.SIGTERM)
        left = wait_gone(term, start + term_timeout, clock, sleep)
        term_done = clock()
        for h in left:
            h.send(signal.SIGKILL)
        alive = wait_gone(left + now_kill, term_done + kill_timeout, clock, sleep)
        kill_done = clock()
        ended = {}
        for h in handles:
            if h not in alive:
                ended[h.proc.pid] = signal.Signals(h.signal).name if h.signal else None
        timings = {"term": term_done - start, "kill": kill_done - term_done}
        return ended, [h.proc.pid for h in alive], timings
    finally:
        for h in handles:
            h.close()
