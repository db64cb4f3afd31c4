# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guard's state file: where it is, how it is read and written, its history, and the deadline's renewal.

One guard per unit: ``<state_dir>/guard/<unit stem>.json`` (root 0600 in a 0700 directory, written
atomically under a ``flock`` beside it) says what the guard restores and by when (``deadline``, epoch
seconds); docs/guard.md. ``_guard_lease`` writes it when it arms the guard and removes it on confirm,
:func:`renew` moves its deadline (the controller's heartbeat, from ``switch_guard``, ``_lease`` and the
host's ``python3 -m ...._guard renew``), and ``_guard`` (the restore on the host) claims it and appends
``restored_by_guard`` / ``guard_restore_failed`` to the history.

Standard library and ``_lock`` only: ``_lease`` imports this file alone, and the host runs it.
"""
from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _lock

GUARD_SUBDIR = "guard"
STATE_FILE_MODE = 0o600  # baselines and history under the state directory, as _record writes them
STATE_VERSION = 1
PHASE_ARMED = "armed"
PHASE_RESTORING = "restoring"
OUTCOME_RESTORED = "restored_by_guard"
OUTCOME_FAILED = "guard_restore_failed"
OUTCOME_FOLLOWED = "kept_with_group"  # a serving group's node whose group held: it kept what runs (follow)
EXIT_RESTORE_FAILED = 3  # RestartPreventExitStatus of the watcher: a failed restore is not retried
LOCK_MARGIN = 120.0      # the lock outlives the guard's deadline by this much
SAFE_UNIT = re.compile(r"^[A-Za-z0-9:_.\-]+\.service$")


iso = _lock.iso


class GuardError(Exception):
    """The guard could not be armed, renewed, confirmed or read; ``record`` is a guard history record."""

    def __init__(self, msg, record=None, state=None):
        super().__init__(msg)
        self.msg = msg
        self.record = record
        self.state = state


# ---------------------------------------------------------------- names and files

def unit_stem(unit):
    if not SAFE_UNIT.match(unit or "") or unit.endswith("@.service"):
        raise GuardError("unit %r: the guard handles plain service units (NAME.service; letters, digits, "
                         "':', '_', '.', '-'), not templates or instances" % unit)
    return unit[:-len(".service")]


def state_path(state_dir, unit):
    return os.path.join(state_dir, GUARD_SUBDIR, unit_stem(unit) + ".json")


def flock_path(statefile):
    return os.path.join(os.path.dirname(statefile), "." + os.path.basename(statefile) + ".flock")


def read_state(statefile):
    """The guard's state document, or None when no guard is armed for that unit."""
    try:
        with open(statefile) as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise GuardError("guard state %s is not JSON (%s); look at it, then remove it by hand" % (statefile, exc))
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
        raise GuardError("guard state %s has an unknown format (version %r)" % (
            statefile, doc.get("version") if isinstance(doc, dict) else None))
    return doc


def write_state(statefile, state):
    _lock.write_json_atomic(statefile, state, mode=0o600)


def ensure_dir(path, mode):
    if not os.path.isdir(path):
        os.makedirs(path, mode=mode, exist_ok=True)
        os.chmod(path, mode)


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def summary(state):
    """The few fields that say what the guard does, for diffs and messages."""
    if not state:
        return {}
    return {"run_id": state.get("run_id"), "phase": state.get("phase"), "unit": state.get("unit"),
            "deadline_at": state.get("deadline_at"), "restore": state.get("restore", {}).get("source"),
            "baseline_files": [b.get("dest") for b in state.get("baseline_files", [])]}


# ---------------------------------------------------------------- commands and history

def checked_run(argv, what, run_command_):
    """``run_command_(argv)``'s stdout; a GuardError naming ``what`` (or the command) when it fails."""
    rc, out, err = run_command_(argv)
    if rc != 0:
        raise GuardError("%s failed (rc=%s): %s" % (what or " ".join(argv), rc, (err or out).strip()))
    return out


def append_history(path, record):
    """Append one JSON line (one write(2) on an O_APPEND fd, then fsync).

    The history is 0600 in a 0700 directory, as ``_record`` writes it on the normal path; a file an
    older guard left 0644 is made 0600 too.
    """
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        ensure_dir(directory, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, STATE_FILE_MODE)
    try:
        os.fchmod(fd, STATE_FILE_MODE)
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def last_record(history, unit=None, run_id=None, scan_bytes=1 << 20):
    """The newest guard record (restored_by_guard / guard_restore_failed / kept_with_group) in the history, or None."""
    try:
        with open(history, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - scan_bytes))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("outcome") not in (OUTCOME_RESTORED, OUTCOME_FAILED, OUTCOME_FOLLOWED):
            continue
        if (unit is None or rec.get("unit") == unit) and (run_id is None or rec.get("run_id") == run_id):
            return rec
    return None


# ---------------------------------------------------------------- the deadline

def renew_lock(state, ttl):
    """Move the lock's deadline past the guard's when this run holds it; whether it did."""
    if not state.get("lock_path"):
        return False
    try:
        _lock.renew(state["lock_path"], state["run_id"], ttl + LOCK_MARGIN)
    except (_lock.LockError, OSError):
        return False
    return True


def renew(statefile, run_id, ttl, clock=time.time, follow=None):
    """Extend the guard's deadline to now + ``ttl`` seconds (and the lock's, when this run holds it).

    Tiny and stdlib on purpose: modules that wait on the host (engine_ready, spec_bench) can call it
    between their polls. Returns the new state (plus ``lock_renewed``). Raises GuardError when no guard
    is armed, another run armed it, or it is already restoring. ``follow``: see :func:`follow`.
    """
    now = clock()
    with _lock.flocked(flock_path(statefile)):
        state = read_state(statefile)
        if state is None:
            raise GuardError("no guard is armed at %s: it was confirmed, or it restored the previous "
                             "configuration (see the host's history)" % statefile)
        if state.get("run_id") != run_id:
            raise GuardError("the guard at %s belongs to run %s, not %s" % (statefile, state.get("run_id"), run_id),
                             state=state)
        if state.get("phase") != PHASE_ARMED:
            raise GuardError("the guard at %s is %s since %s (its deadline %s passed): too late to renew"
                             % (statefile, state.get("phase"), state.get("restoring_since"), state.get("deadline_at")),
                             state=state)
        deadline = round(now + float(ttl), 3)
        state.update(deadline=deadline, deadline_at=iso(deadline), renewed_at=iso(now),
                     renewed_epoch=round(now, 3), renewals=state.get("renewals", 0) + 1)
        # A plain renewal puts the controller in charge again: a following worker stops following, so that the
        # controller's own rollback of it is not raced by the watcher seeing its stop as a broken group.
        if follow:
            state["follow"] = dict(follow, since=iso(now))
        else:
            state.pop("follow", None)
        write_state(statefile, state)
    return dict(state, lock_renewed=renew_lock(state, float(ttl)))


def follow(statefile, run_id, ttl, unit_state, clock=time.time):
    """Put a serving group's worker node in follow mode (docs/group.md): at its deadline, now + ``ttl``, its guard
    restores only when its group broke since now, that is when ``unit_state`` (the unit's ``MainPID`` and
    ``NRestarts`` now, its engine joined to the head's) no longer holds; else it keeps what runs, as the head did.

    The controller sets it on every worker before it confirms the head, so whatever dies when, the workers end on
    the side the head ends on: a head restored by its own guard stops its engine, which takes the workers' engines
    down (the group breaks), and a confirmed head keeps them joined. A renewal of an armed guard with the follow
    recorded; raises GuardError as :func:`renew` does.
    """
    main_pid, restarts = int(unit_state["main_pid"]), int(unit_state["n_restarts"])
    if main_pid <= 0:
        raise GuardError("%s has no main process: its group is not serving, nothing to follow" % unit_state.get("unit"))
    return renew(statefile, run_id, ttl, clock, follow={"main_pid": main_pid, "n_restarts": restarts})


def group_held(follow_state, unit_state):
    """Whether a following node's group held since it began to follow: its unit still active under the same main
    process, never restarted. ``(held, why)``."""
    if unit_state.get("active_state") != "active":
        return False, "the unit is %s" % (unit_state.get("active_state") or "unknown")
    if int(unit_state.get("main_pid") or 0) != follow_state["main_pid"]:
        return False, "its main process changed (%s, then %s)" % (follow_state["main_pid"], unit_state.get("main_pid"))
    if int(unit_state.get("n_restarts") or 0) != follow_state["n_restarts"]:
        return False, "systemd restarted it (%s restarts, then %s)" % (
            follow_state["n_restarts"], unit_state.get("n_restarts"))
    return True, "its engine has run joined to the head since %s" % follow_state["since"]
