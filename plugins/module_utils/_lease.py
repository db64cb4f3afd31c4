# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's lease on the host's guard, as the modules that run on the host use it.

A switch arms the guard (``_guard_lease``) before anything may stop the service; the guard (``_guard``,
on the host) restores the previous configuration once its deadline passes. Only the controller's
liveness may move that deadline: each renewal is a task the controller runs (``switch_guard
state=renewed``, or a module's ``renew`` at the start of one bounded cycle: ``engine_ready``,
``spec_bench_wait``), so a lost controller costs at most one ttl. This file reads and renews the guard's
state file through ``_guard_state`` alone.

``LEASE_ARGSPEC`` is the ``lease`` option of these modules (doc fragment ``llmops.specdec.lease``).
``renew(lease)`` extends the deadline once. ``Watch(lease)`` never renews: it reads the guard's state
file every second while a long job runs on the host (``spec_bench``, started with ``async``) and ends
that job once the lease ran out (the deadline passed, the guard restores or restored, or another run
owns it). ``Heartbeat(lease)`` renews from a thread while one bounded step runs (``gpu_reclaim``'s stop
and verification, which the guard must not race), and keeps the first failure in ``lost``.
"""
from __future__ import annotations

import copy
import threading
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state

__all__ = ["LEASE_ARGSPEC", "lease_argspec", "renew", "lease_problem", "Watch", "Heartbeat", "LeaseLost"]

LEASE_ARGSPEC = dict(type="dict", options=dict(
    statefile=dict(type="path", required=True),
    run_id=dict(type="str", required=True),
    ttl=dict(type="float", required=True),
))


class LeaseLost(Exception):
    """The guard is gone or not ours: the host is being (or was) restored."""


def lease_argspec():
    return copy.deepcopy(LEASE_ARGSPEC)


def renew(lease):
    """Extend the guard's deadline to now + ttl; None without a lease. Raises LeaseLost."""
    if not lease:
        return None
    try:
        return _guard_state.renew(lease["statefile"], lease["run_id"], lease["ttl"])
    except (_guard_state.GuardError, OSError, ValueError) as exc:
        raise LeaseLost(str(exc))


class _EveryInterval(object):
    """``with`` block that calls ``_tick()`` once at its start and then every ``interval`` seconds in a daemon
    thread, until the block ends or a tick returns a true value (the thread is not started when the first
    one does). Subclasses set ``lease``, ``interval`` and ``_thread_name``."""

    _thread_name = "specdec-lease"

    def __init__(self):
        self._stop = threading.Event()
        self._thread = None

    def _tick(self):
        raise NotImplementedError

    def _run(self):
        while not self._stop.wait(self.interval):
            if self._tick():
                return

    def __enter__(self):
        if self.lease and not self._tick():
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        return False


class Heartbeat(_EveryInterval):
    """``with Heartbeat(lease):`` renews at the start and every ttl/3 seconds until the block ends."""

    def __init__(self, lease, interval=None):
        super(Heartbeat, self).__init__()
        self.lease = lease
        self.lost = None
        self.renewals = 0
        if lease:
            self.interval = interval if interval is not None else max(1.0, float(lease["ttl"]) / 3.0)

    def _beat(self):
        try:
            renew(self.lease)
            self.renewals += 1
        except LeaseLost as exc:
            self.lost = self.lost or str(exc)

    def _tick(self):
        self._beat()  # a failed renewal is kept in ``lost``; the beat goes on until the block ends
        return False


def lease_problem(state, run_id, now):
    """Why the lease held by ``run_id`` is lost, given the guard's state (None when no file), or None.

    Lost when no guard is armed (confirmed, or the guard restored and removed it), another run armed it,
    it is restoring, or its deadline has passed (the watcher claims the restore within a poll).
    """
    if state is None:
        return "no guard is armed: it was confirmed, or it restored the previous configuration"
    if state.get("run_id") != run_id:
        return "the guard belongs to run %s, not %s" % (state.get("run_id"), run_id)
    if state.get("phase") != _guard_state.PHASE_ARMED:
        return "the guard is %s since %s" % (state.get("phase"), state.get("restoring_since"))
    try:
        deadline = float(state.get("deadline"))
    except (TypeError, ValueError):
        return "the guard's state has no deadline"
    if now >= deadline:
        return "the guard's deadline %s passed %.1f s ago without a renewal from the controller" % (
            state.get("deadline_at"), now - deadline)
    return None


class Watch(_EveryInterval):
    """``with Watch(lease) as w:`` checks the guard's state file now and every ``interval`` seconds until the
    block ends, and never renews. The first time the lease is lost it keeps why in ``lost`` and calls every
    function given to ``on_lost`` (at once for one given after the loss). Without a lease it does nothing.
    """

    _thread_name = "specdec-lease-watch"

    def __init__(self, lease, interval=1.0, clock=time.time, read=None):
        super(Watch, self).__init__()
        self.lease = lease
        self.interval = interval
        self.clock = clock
        self.read = read or _guard_state.read_state
        self.lost = None
        self.checks = 0
        self._callbacks = []
        self._guard = threading.Lock()

    def check(self):
        """Read the state once; returns why the lease is lost, or None."""
        try:
            why = lease_problem(self.read(self.lease["statefile"]), self.lease["run_id"], self.clock())
        except (_guard_state.GuardError, OSError, ValueError) as exc:
            why = "cannot read the guard's state %s: %s" % (self.lease["statefile"], exc)
        self.checks += 1
        if why:
            self._lose(why)
        return why

    def _lose(self, why):
        with self._guard:
            if self.lost:
                return
            self.lost = why
            callbacks = list(self._callbacks)
        for fn in callbacks:
            fn(why)

    def on_lost(self, fn):
        """Call ``fn(why)`` once the lease is lost (now, if it already is)."""
        with self._guard:
            self._callbacks.append(fn)
            lost = self.lost
        if lost:
            fn(lost)

    def _tick(self):
        return self.check()
