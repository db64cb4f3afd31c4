# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_procs: /proc parsing, protection names, node holders and escalation, on real processes and signals."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _procs
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import alive, wait_for

PRELUDE = "import ctypes, os, signal, sys, threading, time\n"


@pytest.fixture(params=["pidfd", "proc-polling"])
def waits(request, monkeypatch):
    """Run escalation with pidfds, and as on kernels or Pythons without them."""
    if request.param == "proc-polling":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    return request.param


@pytest.fixture
def spawn(tmp_path):
    """Start a Python child running ``code``; it writes a ready file when set up."""
    started = []

    def start(code):
        ready = str(tmp_path / ("ready%d" % len(started)))
        script = PRELUDE + code + "\nopen(%r, 'w').close()\nwhile True:\n    time.sleep(1)\n" % ready
        proc = subprocess.Popen([sys.executable, "-c", script])
        started.append(proc)
        wait_for(lambda: os.path.exists(ready) or proc.poll() is not None, "child ready")
        assert proc.poll() is None
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_get_reads_stat_comm_cmdline_and_cgroup(spawn):
    child = spawn("ctypes.CDLL(None).prctl(15, b'odd (name) x', 0, 0, 0)")
    proc = _procs.ProcFS().get(child.pid)
    assert proc.comm == "odd (name) x"
    assert proc.ppid == os.getpid() and proc.state in "RS"
    assert proc.cmdline[0] == sys.executable and proc.cmdline[1] == "-c"
    assert proc.starttime > 0 and proc.key == (child.pid, proc.starttime)
    assert isinstance(proc.cgroup, str)
    assert _procs.ProcFS().get(2 ** 22 + 7) is None  # no such pid: not an error


def test_cgroup_line_prefers_the_systemd_hierarchy():
    text = "12:memory:/x\n1:name=systemd:/system.slice/vllm.service\n0::/other\n"
    assert _procs._systemd_cgroup(text) == "/system.slice/vllm.service"
    assert _procs._systemd_cgroup("0::/system.slice/a.service\n") == "/system.slice/a.service"


def test_protect_rules_match_the_executable_and_uid_never_argv():
    smi = _procs.Exe("/usr/bin/nvidia-smi", 0, 0o100755)
    users_copy = _procs.Exe("/home/alice/bin/nvidia-smi", 1001, 0o100755)
    writable = _procs.Exe("/opt/tools/nvidia-smi", 0, 0o100777)
    python = _procs.Exe("/usr/bin/python3.11", 0, 0o100755)
    by_name = _procs.ProtectRule("nvidia-smi")
    assert by_name.matches(smi, (1001,) * 4)              # the real nvidia-smi, run by anyone
    assert not by_name.matches(users_copy, (1001,) * 4)   # a user's own file with that name
    assert not by_name.matches(writable, (0,) * 4)        # root's, but anyone may replace it
    assert not by_name.matches(python, (0,) * 4)          # python3 whatever its argv[0] says
    assert not by_name.matches(None, (0,) * 4)            # kernel thread or unreadable exe
    by_path = _procs.ProtectRule("/opt/tools/nvidia-smi")
    assert by_path.matches(writable, (0,) * 4) and not by_path.matches(smi, (0,) * 4)
    monitor = _procs.ProtectRule("/usr/bin/python3.11@root")
    assert monitor.uid == 0 and monitor.matches(python, (0, 0, 0, 0))
    assert not monitor.matches(python, (1001,) * 4) and not monitor.matches(python, None)
    assert _procs.ProtectRule("dcgm-exporter@65534").uid == 65534
    for bad in ("@root", "nvidia-smi@", "x@no-such-user-x"):
        with pytest.raises(ValueError):
            _procs.ProtectRule(bad)


def test_uids_exe_and_pid_namespace_of_real_processes(spawn, tmp_path):
    child = spawn("os.setresuid(65534, 0, 65534)")  # effective root stays, to write the ready file
    procfs = _procs.ProcFS()
    assert procfs.uids(child.pid) == (65534, 0, 65534, 0)
    assert procfs.uids(os.getpid())[0] == os.getuid()
    exe = procfs.exe(child.pid)
    assert exe.path == os.path.realpath(sys.executable) and exe.owner == os.stat(exe.path).st_uid
    assert procfs.uids(2 ** 22 + 7) is None and procfs.exe(2 ** 22 + 7) is None
    assert _procs.user_name(65534) == "nobody" and _procs.lookup_uid("nobody") == 65534
    assert _procs.lookup_uid("4242") == 4242
    # This test runs in the initial pid namespace: nothing proven. A /proc whose self is in a child
    # namespace (another inode, or NSpid with two levels) is.
    assert procfs.pidns_nested() is False
    fake = tmp_path / "proc"
    (fake / "self" / "ns").mkdir(parents=True)
    os.symlink("pid:[4026532999]", str(fake / "self" / "ns" / "pid"))
    (fake / "self" / "status").write_text("Name:\tx\nNSpid:\t1\n")
    assert _procs.ProcFS(str(fake)).pidns_nested() is True
    os.unlink(str(fake / "self" / "ns" / "pid"))
    os.symlink("pid:[%d]" % _procs.PID_NS_INIT_INO, str(fake / "self" / "ns" / "pid"))
    assert _procs.ProcFS(str(fake)).pidns_nested() is False
    (fake / "self" / "status").write_text("Name:\tx\nNSpid:\t4242\t7\n")
    assert _procs.ProcFS(str(fake)).pidns_nested() is True


def test_cgroup_prefixes_compare_whole_components():
    assert _procs.under("/system.slice/vllm.service", "/system.slice/vllm.service")
    assert _procs.under("/system.slice/vllm.service/worker", "/system.slice/vllm.service/")
    assert not _procs.under("/system.slice/vllm.service2", "/system.slice/vllm.service")
    assert _procs.under("/anything", "/") and not _procs.under("", "/") and not _procs.under("/x", "")


def test_tree_helpers(spawn):
    table = _procs.ProcFS().table()
    chain = _procs.ancestors(table, os.getpid())
    assert os.getpid() in chain and os.getppid() in chain
    child = spawn("pass")
    table = _procs.ProcFS().table()
    assert _procs.descendants(table, [os.getpid()]) >= {os.getpid(), child.pid}
    assert child.pid not in _procs.ancestors(table, os.getpid())


def test_open_nodes_and_sigterm_mask(spawn, tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia3", "nvidia-uvm", "nvidia31"):
        (dev / name).write_text("")
    holder = spawn("fds = [open(os.path.join(%r, n)) for n in ('nvidiactl', 'nvidia3', 'nvidia-uvm')]\n"
                   "signal.signal(signal.SIGTERM, signal.SIG_IGN)" % str(dev))
    procfs = _procs.ProcFS()
    assert procfs.open_nodes(holder.pid, str(dev)) == {3}
    assert procfs.sigterm_ignored(holder.pid) is True
    assert procfs.sigterm_ignored(os.getpid()) is False
    assert procfs.maps_library(holder.pid, "libc.so") is True
    assert procfs.maps_library(holder.pid, "libcuda.so") is False


def test_escalate_picks_the_signal_each_process_needs(spawn, waits):
    obeys = spawn("pass")
    ignores = spawn("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    handles = spawn("signal.signal(signal.SIGTERM, lambda *a: None)")  # caught, then ignored
    procfs = _procs.ProcFS()
    procs = [procfs.get(p.pid) for p in (obeys, ignores, handles)]
    ended, left, timings = _procs.escalate(procfs, procs, term_timeout=0.3, kill_timeout=10)
    assert ended == {obeys.pid: "SIGTERM", ignores.pid: "SIGKILL", handles.pid: "SIGKILL"}
    assert left == []
    assert timings["term"] >= 0.3  # the handler got its grace; SIG_IGN did not need one
    assert not alive(obeys.pid) and not alive(ignores.pid) and not alive(handles.pid)


def test_sig_ign_is_killed_without_waiting_for_the_grace(spawn):
    ignores = spawn("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    procfs = _procs.ProcFS()
    ended, left, timings = _procs.escalate(procfs, [procfs.get(ignores.pid)], term_timeout=60, kill_timeout=10)
    assert ended == {ignores.pid: "SIGKILL"} and left == []
    assert timings["term"] < 60  # nothing was waited for: SIGTERM was never sent


LEADER_EXITS_C = r"""
#include <pthread.h>
#include <unistd.h>
static void *work(void *arg) { (void)arg; for (;;) pause(); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, work, 0); pthread_exit(0); }
"""


def test_process_whose_main_thread_exited_is_still_alive_and_gets_signalled(tmp_path, waits):
    """Its leader shows Z while a thread still runs: not gone, so it must still be signalled."""
    src = tmp_path / "leader_exits.c"
    src.write_text(LEADER_EXITS_C)
    subprocess.run(["gcc", "-pthread", "-o", str(tmp_path / "leader_exits"), str(src)], check=True, timeout=60)
    child = subprocess.Popen([str(tmp_path / "leader_exits")])
    try:
        procfs = _procs.ProcFS()
        wait_for(lambda: procfs.get(child.pid).dead, "main thread exit")
        proc = procfs.get(child.pid)
        assert proc.state == "Z" and procfs.alive(proc) is True
        ended, left, _t = _procs.escalate(procfs, [proc], term_timeout=5, kill_timeout=10)
        assert ended == {child.pid: "SIGTERM"} and left == []
        assert procfs.alive(proc) is False
    finally:
        child.kill()
        child.wait(timeout=10)


def test_gone_zombie_and_recycled_pids_are_not_signalled(spawn, waits):
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: _procs.ProcFS().get(exited.pid) is None or _procs.ProcFS().get(exited.pid).dead,
             "child exit")
    procfs = _procs.ProcFS()
    zombie = procfs.get(exited.pid)
    assert zombie is not None and zombie.dead and procfs.alive(zombie) is False
    victim = spawn("pass")
    real = procfs.get(victim.pid)
    recycled = _procs.Proc(real.pid, real.ppid, "S", real.starttime + 1, real.comm, real.cmdline, "")
    ended, left, _t = _procs.escalate(procfs, [zombie, recycled], term_timeout=1, kill_timeout=1)
    assert ended == {exited.pid: None, victim.pid: None} and left == []
    assert alive(victim.pid)  # a different process that reuses the pid is never hit
    exited.wait(timeout=10)
