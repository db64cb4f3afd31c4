# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process discovery from /proc, and SIGTERM -> SIGKILL escalation that waits without fixed sleeps.

Identity of a process is ``(pid, starttime)`` so a recycled pid is never signalled by mistake.
Who owns a process (its uids) and what it runs (``/proc/PID/exe``) are read from the kernel, never
from ``argv``, which any process may set to anything.
"""
from __future__ import annotations

import errno
import os
import pwd
import re
import select
import signal
import time

# How often to look again when pidfds are not available (old kernel or Python < 3.9).
POLL_INTERVAL = 0.01
_SIGTERM_BIT = 1 << (signal.SIGTERM - 1)
_NODE = re.compile(r"nvidia(\d+)$")
_NS_INODE = re.compile(r"pid:\[(\d+)\]$")
# The inode of the initial pid namespace, fixed by the kernel (include/linux/proc_ns.h).
PID_NS_INIT_INO = 0xEFFFFFFC


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

    def uids(self, pid):
        """``(real, effective, saved, fs)`` uids of ``pid`` from its status, or None if unreadable."""
        try:
            status = self._read(pid, "status").decode(errors="replace")
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("Uid:"):
                try:
                    return tuple(int(tok) for tok in line.split()[1:5])
                except ValueError:
                    return None
        return None

    def exe(self, pid):
        """``Exe`` of the program ``pid`` runs (the kernel's ``/proc/PID/exe``), or None (kernel thread,
        exited, unreadable). A replaced or deleted file keeps its old path without `` (deleted)``."""
        link = os.path.join(self.root, str(pid), "exe")
        try:
            path = os.readlink(link)
            info = os.stat(link)  # the file the process runs, even if deleted since
        except OSError:
            return None
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        return Exe(path, info.st_uid, info.st_mode)

    def pidns_nested(self):
        """True when this process is proven to run in a child pid namespace.

        Only then can NVML (which reports pids of the host's namespace) name pids that ``/proc`` does
        not show; anywhere else an NVML pid missing from /proc has simply exited. Proof: the inode of
        ``/proc/self/ns/pid`` is not the initial namespace's (the kernel's PROC_PID_INIT_INO), or
        ``NSpid`` in ``/proc/self/status`` lists more than one pid. Nothing readable: not proven.
        """
        try:
            match = _NS_INODE.match(os.readlink(os.path.join(self.root, "self", "ns", "pid")))
        except OSError:
            match = None
        if match and int(match.group(1)) != PID_NS_INIT_INO:
            return True
        try:
            status = self._read("self", "status").decode(errors="replace")
        except OSError:
            return False
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                return len(line.split()) > 2
        return False


class Exe:
    """The executable of a process: path, owner uid and mode of the file."""

    __slots__ = ("path", "owner", "mode")

    def __init__(self, path, owner, mode):
        self.path = path
        self.owner = owner
        self.mode = mode

    @property
    def trusted(self):
        """Owned by root and writable by nobody else: only an administrator put it there."""
        return self.owner == 0 and not self.mode & 0o022


def user_name(uid):
    """The login name of ``uid`` or its number as text."""
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def lookup_uid(user):
    """The uid of a user name or numeric string; raises ValueError for an unknown name."""
    text = str(user).strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ValueError("unknown user %r" % text) from None


class ProtectRule:
    """One ``protect`` entry: ``PROGRAM`` or ``PROGRAM@USER``.

    PROGRAM is an absolute path, compared with the executable's full path, or a bare name, compared
    with the executable's basename; a bare name only counts when that file is owned by root and not
    writable by group or others (so no user can make one up). ``@USER`` (name or uid) also requires
    the process's real uid to be that user's. ``argv`` and ``comm`` are never looked at: any process
    can set them to ``nvidia-smi``.
    """

    def __init__(self, entry):
        text = str(entry).strip()
        program, sep, user = text.rpartition("@") if "@" in text else (text, "", "")
        if not program or (sep and not user):
            raise ValueError("protect entry %r: expected PROGRAM or PROGRAM@USER" % entry)
        self.entry = text
        self.program = program
        self.uid = lookup_uid(user) if sep else None

    def matches(self, exe, uids):
        if exe is None:
            return False
        if self.program.startswith("/"):
            if exe.path != self.program:
                return False
        elif os.path.basename(exe.path) != self.program or not exe.trusted:
            return False
        return self.uid is None or (uids is not None and uids[0] == self.uid)


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


def under(path, prefix):
    """Whether cgroup ``path`` is ``prefix`` or below it (whole path components: ``/a.service`` is
    not below ``/a``)."""
    if not path or not prefix:
        return False
    prefix = prefix.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


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
