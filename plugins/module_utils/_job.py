# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job that Ansible started on the host with ``async`` and ``poll: 0``, read from its results file.

Ansible's ``async_wrapper`` writes the job's results file (``~/.ansible_async/JID``) atomically: first
``{"started": true, "finished": false, ...}``, then the module's own result (without ``started``) when it
ends, or ``{"failed": true, "msg": "Timeout exceeded"}`` when the ``async`` limit killed it. ``wait_job``
polls that file for one bounded cycle, so the controller's wait loop (``spec_bench_wait``) prints a line
and renews the guard's lease once per cycle.
"""
from __future__ import annotations

import json
import time

__all__ = ["JobError", "read_job", "wait_job"]


class JobError(Exception):
    """The results file is missing or unreadable: no job to wait for."""


def read_job(path):
    """The job's result once it has finished, None while it runs. Raises JobError."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        raise JobError("no async job results file at %s (the job was never started, or was cleaned up)" % path)
    except OSError as exc:
        raise JobError("cannot read the async job results file %s: %s" % (path, exc))
    if not text.strip():
        return None  # async_wrapper has not written it yet
    try:
        data = json.loads(text)
    except ValueError:
        raise JobError("the async job results file %s is not JSON: %.200s" % (path, text))
    if not isinstance(data, dict):
        raise JobError("the async job results file %s holds %s, not a result" % (path, type(data).__name__))
    if data.get("started") and not data.get("finished"):
        return None
    return data


def wait_job(path, timeout, poll=1.0, clock=time.monotonic, sleep=time.sleep):
    """Poll the job's results file for at most ``timeout`` seconds: ``(result or None, seconds waited)``."""
    start = clock()
    while True:
        result = read_job(path)
        waited = clock() - start
        if result is not None or waited >= timeout:
            return result, round(waited, 3)
        sleep(max(0.01, min(poll, timeout - waited)))
