# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's lease on the host's guard, renewed by the modules that wait on the host.

A switch arms the guard (``_guard``) before anything may stop the service; the guard restores the
previous configuration once its deadline passes. The waits that take longest (a model load in
``engine_ready``'s cycles, a benchmark in ``spec_bench``, a stop in ``gpu_reclaim``) renew it while
they run, with a short ttl: a lost controller then costs at most one ttl, not a whole 30-minute step.

``LEASE_ARGSPEC`` is the ``lease`` option of these modules (doc fragment ``llmops.specdec.lease``).
``renew(lease)`` extends the deadline once; ``Heartbeat(lease)`` renews it in a thread every third of
its ttl until the block ends, and keeps the first failure in ``lost`` (the guard restored the host, or
another run owns it: what the module was measuring is then not what runs).
"""
from __future__ import annotations

import copy
import threading

from ansible_collections.llmops.specdec.plugins.module_utils import _guard

__all__ = ["LEASE_ARGSPEC", "lease_argspec", "renew", "Heartbeat", "LeaseLost"]

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
        return _guard.renew(lease["statefile"], lease["run_id"], lease["ttl"])
    except (_guard.GuardError, OSError, ValueError) as exc:
        raise LeaseLost(str(exc))


class Heartbeat(object):
    """``with Heartbeat(lease):`` renews at the start and every ttl/3 seconds until the block ends."""

    def __init__(self, lease, interval=None):
        self.lease = lease
        self.lost = None
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = None
        if lease:
            self.interval = interval if interval is not None else max(1.0, float(lease["ttl"]) / 3.0)

    def _beat(self):
        try:
            renew(self.lease)
            self.renewals += 1
        except LeaseLost as exc:
            self.lost = self.lost or str(exc)

    def _run(self):
        while not self._stop.wait(self.interval):
            self._beat()

    def __enter__(self):
        if self.lease:
            self._beat()
            self._thread = threading.Thread(target=self._run, name="specdec-lease", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        return False
