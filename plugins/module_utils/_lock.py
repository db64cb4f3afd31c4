# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host switch lock: one directory, one owner document, an expiry (stdlib only).

``mkdir`` of the lock directory (``/run/llmops-specdec.lock``, so a reboot clears it) is what takes
the lock. Inside it, ``owner`` is one JSON document: run id, controller host, user, pid, AWX job id,
label, start, and ``deadline`` (epoch seconds). Every operation (take, take over, renew, release,
annotate) runs under an exclusive ``flock`` of ``<lock>.flock``, so "check the owner, then act" is
atomic between runs: a takeover can never remove a lock that another run took a moment before.

A lock is *dead* when its deadline passed, when the host-side guard annotated it (the guard restored
the previous configuration, or tried and failed), or when it has no owner document long after it
was made. A dead lock is reported with its owner and taken over only when asked (``takeover``);
a live lock never. The guard (``_guard``) renews the lock together with its own deadline.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import shutil
import socket
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _files

OWNER_FILE = "owner"
# A lock directory without an owner document is being written (microseconds) or was left by a run
# that died between mkdir and write; after this many seconds it counts as dead.
NO_OWNER_GRACE = 60.0
# How often a waiting run looks at the lock again.
WAIT_INTERVAL = 1.0
OWNER_FIELDS = ("controller", "user", "pid", "awx_job_id", "label")


class LockError(Exception):
    """The lock could not be taken, renewed or released; ``owner`` is the holder's document."""

    def __init__(self, msg, owner=None, dead=None):
        super().__init__(msg)
        self.msg = msg
        self.owner = owner
        self.dead = dead


def iso(epoch):
    """UTC ISO 8601 with a Z, as the switch role's history records write it."""
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).replace(tzinfo=None).isoformat() + "Z"


def write_bytes_atomic(path, data, mode=0o644):
    """Write ``data`` (bytes) to ``path`` atomically (``_files.write_atomic``: temp file, fsync, rename)."""
    _files.write_atomic(path, data, mode)


def write_json_atomic(path, doc, mode=0o600):
    """Write ``doc`` as JSON to ``path`` atomically (see write_bytes_atomic)."""
    write_bytes_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), mode)


@contextlib.contextmanager
def flocked(path, create=True):
    """Hold an exclusive flock on ``path`` (created 0600) for the block.

    With ``create`` false (check mode) a missing ``path`` is not created and nothing is locked.
    """
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0) | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        if create:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def read_owner(path):
    """The owner document of the lock at ``path``; None when there is no lock.

    ``{}`` when the directory has no owner document yet; ``{"raw": text}`` for an owner written in
    the old plain-text format (``label from HOST since TIME``).
    """
    if not os.path.isdir(path):
        return None
    try:
        with open(os.path.join(path, OWNER_FILE)) as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {"raw": text.strip()}
    return doc if isinstance(doc, dict) else {"raw": text.strip()}


def _age(path, now):
    try:
        return max(0.0, now - os.stat(path).st_mtime)
    except OSError:
        return 0.0


def dead_reason(path, owner, now):
    """Why the lock's run is dead (text), or None when it may be alive."""
    if owner is None:
        return None
    guard = owner.get("guard")
    if isinstance(guard, dict):
        return "the host's guard ended that run (%s at %s: %s)" % (
            guard.get("outcome", "?"), guard.get("at", "?"), guard.get("msg", ""))
    if not owner:
        age = _age(path, now)
        if age > NO_OWNER_GRACE:
            return "no owner was ever written into it (%.0f s old)" % age
        return None
    deadline = owner.get("deadline")
    if isinstance(deadline, (int, float)) and now > deadline:
        return "its deadline passed %.0f s ago (%s)" % (now - deadline, iso(deadline))
    return None


def describe(owner, now=None):
    """One line naming the holder: run, label, controller, user, pid, AWX job, since, deadline."""
    now = time.time() if now is None else now
    if owner is None:
        return "nobody"
    if not owner:
        return "owner not written"
    if "raw" in owner and "run_id" not in owner:
        return owner["raw"] or "owner unknown"
    parts = ["run %s" % owner.get("run_id", "?")]
    if owner.get("label"):
        parts.append("(%s)" % owner["label"])
    parts.append("from %s" % (owner.get("controller") or "?"))
    if owner.get("user"):
        parts.append("as %s" % owner["user"])
    if owner.get("pid"):
        parts.append("pid %s" % owner["pid"])
    if owner.get("awx_job_id"):
        parts.append("AWX job %s" % owner["awx_job_id"])
    if owner.get("started"):
        parts.append("since %s" % owner["started"])
    deadline = owner.get("deadline")
    if isinstance(deadline, (int, float)):
        if deadline >= now:
            parts.append("deadline %s (in %.0f s)" % (iso(deadline), deadline - now))
        else:
            parts.append("deadline %s (passed %.0f s ago)" % (iso(deadline), now - deadline))
    return " ".join(parts)


def _owner_doc(run_id, owner, ttl, now):
    doc = {key: (owner or {}).get(key) for key in OWNER_FIELDS}
    doc.update(run_id=run_id, host=socket.gethostname(), started=iso(now), started_epoch=round(now, 3),
               deadline=round(now + ttl, 3), deadline_at=iso(round(now + ttl, 3)), renewed=None)
    return doc


def _write_owner(path, doc):
    write_json_atomic(os.path.join(path, OWNER_FILE), doc, mode=0o644)


def _remove(path):
    """Make the lock directory disappear atomically (rename), then delete what it held."""
    aside = "%s.released.%d.%d" % (path, os.getpid(), int(time.time() * 1000))
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def _flock_path(path):
    return path.rstrip("/") + ".flock"


def acquire(path, run_id, owner=None, ttl=3600.0, wait=0.0, takeover=False, directories=(),
            check_mode=False, clock=time.time, sleep=time.sleep, monotonic=time.monotonic):
    """Take the lock for ``run_id``; wait up to ``wait`` s while a live run holds it.

    Returns ``{"changed", "lock", "previous", "waited", "msg"}``; ``previous`` is the owner of a dead
    lock that was taken over. Raises LockError naming the holder when the lock is held (live, or
    dead without ``takeover``).
    """
    if not run_id:
        raise LockError("run_id is empty")
    start = monotonic()
    for directory in directories:
        if not check_mode:
            # Private to root: baselines, snapshots a rollback installs as unit files, the history.
            os.makedirs(directory, mode=0o700, exist_ok=True)
            os.chmod(directory, 0o700)
    parent = os.path.dirname(path.rstrip("/")) or "/"
    if not os.path.isdir(parent):
        raise LockError("the lock's directory %s does not exist" % parent)
    while True:
        now = clock()
        with flocked(_flock_path(path), create=not check_mode):
            current = read_owner(path)
            if current is None:
                doc = _owner_doc(run_id, owner, ttl, now)
                if not check_mode:
                    try:
                        os.mkdir(path, 0o755)
                    except FileExistsError:  # a taker that does not use the flock (old lock.yml)
                        continue
                    _write_owner(path, doc)
                return {"changed": True, "lock": doc, "previous": None, "waited": round(monotonic() - start, 3),
                        "msg": "took %s for run %s" % (path, run_id)}
            if current.get("run_id") == run_id:
                return {"changed": False, "lock": current, "previous": None, "waited": 0.0,
                        "msg": "%s is already held by this run (%s)" % (path, run_id)}
            dead = dead_reason(path, current, now)
            if dead and takeover:
                doc = _owner_doc(run_id, owner, ttl, now)
                doc["took_over"] = {"owner": current, "why": dead, "at": iso(now)}
                if not check_mode:
                    _remove(path)
                    os.mkdir(path, 0o755)
                    _write_owner(path, doc)
                return {"changed": True, "lock": doc, "previous": current, "waited": round(monotonic() - start, 3),
                        "msg": "took over %s from dead run: %s; %s" % (path, describe(current, now), dead)}
            if dead:
                raise LockError("%s is held by a dead run: %s; %s. Nothing was changed. Take it over with "
                                "takeover=true once you have checked that run is gone."
                                % (path, describe(current, now), dead), current, dead)
        if monotonic() - start >= wait:
            raise LockError("another run holds %s on %s: %s; nothing was changed%s"
                            % (path, socket.gethostname(), describe(current, clock()),
                               " (waited %.0f s)" % wait if wait else ""), current)
        sleep(max(0.0, min(WAIT_INTERVAL, wait - (monotonic() - start))))


def release(path, run_id, check_mode=False):
    """Release the lock if ``run_id`` owns it. Returns ``{"changed", "owner", "msg"}``.

    A lock held by another run is left alone (``changed`` false, ``msg`` says whose it is).
    """
    with flocked(_flock_path(path), create=not check_mode):
        current = read_owner(path)
        if current is None:
            return {"changed": False, "owner": None, "msg": "%s is not held" % path}
        if current.get("run_id") != run_id:
            return {"changed": False, "owner": current, "foreign": True,
                    "msg": "%s is held by another run (%s); left alone" % (path, describe(current))}
        if not check_mode:
            _remove(path)
        return {"changed": True, "owner": current, "msg": "released %s (run %s)" % (path, run_id)}


def renew(path, run_id, ttl, clock=time.time):
    """Move the lock's deadline to now + ``ttl`` when ``run_id`` owns it; return the owner document."""
    now = clock()
    with flocked(_flock_path(path)):
        current = read_owner(path)
        if current is None:
            raise LockError("%s is not held (by run %s or anyone)" % (path, run_id))
        if current.get("run_id") != run_id:
            raise LockError("%s is held by another run: %s" % (path, describe(current, now)), current)
        if isinstance(current.get("guard"), dict):
            raise LockError("%s: the guard ended run %s (%s)" % (path, run_id, current["guard"].get("outcome")),
                            current)
        current.update(deadline=round(now + ttl, 3), deadline_at=iso(round(now + ttl, 3)), renewed=iso(now))
        _write_owner(path, current)
        return current


def annotate(path, run_id, note):
    """Add the guard's ``note`` (outcome, at, msg) to the owner of a lock ``run_id`` holds; True if done."""
    try:
        with flocked(_flock_path(path)):
            current = read_owner(path)
            if current is None or current.get("run_id") != run_id:
                return False
            current["guard"] = note
            _write_owner(path, current)
            return True
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.EROFS):
            return False
        raise
