# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit systemd actually loads, and a snapshot of it that a rollback can trust.

``inspect(run_command, unit, managed_path)`` reads ``systemctl show`` (``LoadState``,
``FragmentPath``, ``DropInPaths``, ``ActiveState``) and the drop-ins themselves, and names the
problem when the role's view of the unit is wrong: the unit is loaded from another file (a unit
shipped in ``/lib/systemd/system``, a copy in ``/run``), or a drop-in sets ``ExecStart=`` (it would
silently replace every candidate's command). ``snapshot(...)`` copies the managed file to the state
directory (0600, atomically), checks that the copy has the same SHA-256 as the file and that
``systemd-analyze verify`` reads it without an error. Both run before anything is stopped.
The rollback itself is ``_restore``'s (the guard's restore, which the controller runs too); it checks its
source with ``check_restore_source``.
"""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _files

__all__ = ["inspect", "snapshot", "n_restarts", "systemctl", "read_small", "check_restore_source", "archive",
           "newest_archived", "sha256_file", "exec_start_drop_ins", "UnitFileError", "MANAGED_HEADER", "written_by_us",
           "check_ours"]

# The first line of every unit file the collection writes (roles/spec_server/templates/spec_server.service.j2).
MANAGED_HEADER = "# Managed by llmops.specdec"

SHOW = ["LoadState", "FragmentPath", "DropInPaths", "ActiveState", "UnitFileState"]
_EXEC_START = re.compile(r"^\s*ExecStart\s*=", re.M)


class UnitFileError(Exception):
    """The unit is not where the role manages it, or its snapshot cannot be trusted."""


def written_by_us(path):
    """Whether the regular file ``path`` starts with MANAGED_HEADER (the collection wrote it)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        with open(path, "rb") as handle:
            return handle.read(len(MANAGED_HEADER)) == MANAGED_HEADER.encode()
    except OSError:
        return False


def check_ours(path, what="write"):
    """Raise UnitFileError when ``path`` exists but the collection did not write it (its header says so).

    A unit the collection only creates (the candidate beside a parked baseline) is never written over or
    removed when another one of that name is there: ``spec_switch_park_unit: sshd.service`` touches nothing.
    """
    if os.path.lexists(path) and not written_by_us(path):
        raise UnitFileError("refusing to %s %s: it exists and was not written by llmops.specdec (its first line is not "
                            "%r); nothing was changed" % (what, path, MANAGED_HEADER))


sha256_file = _files.sha256_file


def exec_start_drop_ins(paths, read=None):
    """The drop-ins among ``paths`` that set ``ExecStart=`` (in their [Service] section or anywhere)."""
    read = read or _read
    return [p for p in paths if _EXEC_START.search(read(p) or "")]


READ_LIMIT = 16 << 20


def read_small(path, limit=READ_LIMIT):
    """The text of a small state file (UTF-8, undecodable bytes replaced), or None when it does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise UnitFileError("%s is larger than %d bytes, not a state file of this collection" % (path, limit))
    return data.decode("utf-8", errors="replace")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _show(run_command, unit):
    rc, out, err = run_command(["systemctl", "show", unit, "--property=" + ",".join(SHOW)])
    if rc != 0:
        raise UnitFileError("systemctl show %s failed (rc=%d): %s" % (unit, rc, (err or out).strip()))
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {k: props.get(k, "") for k in SHOW}


def inspect(run_command, unit, managed_path, read=None):
    """What systemd loads for ``unit``; ``problem`` is None when it is the role's file with no ExecStart drop-in."""
    props = _show(run_command, unit)
    drop_ins = props["DropInPaths"].split() if props["DropInPaths"] else []
    fragment = props["FragmentPath"]
    info = {
        "load_state": props["LoadState"], "active_state": props["ActiveState"], "fragment_path": fragment,
        "drop_in_paths": drop_ins, "exec_start_drop_ins": exec_start_drop_ins(drop_ins, read),
        "exists": os.path.isfile(managed_path), "problem": None,
    }
    if fragment and os.path.realpath(fragment) != os.path.realpath(managed_path):
        info["problem"] = ("%s is loaded from %s, not from %s, which this role manages: a switch would install a "
                           "candidate systemd never reads, and a rollback would lose it. Move the unit to %s (or set "
                           "spec_server_unit_path to %s)" % (unit, fragment, managed_path, managed_path, fragment))
    elif info["exec_start_drop_ins"]:
        info["problem"] = ("%s has drop-ins that set ExecStart= (%s): they replace every candidate's command. "
                           "Remove ExecStart= from them (other settings in drop-ins are fine)"
                           % (unit, ", ".join(info["exec_start_drop_ins"])))
    return info


def snapshot(run_command, src, dest):
    """Copy ``src`` to ``dest`` (0600, atomic) and verify it; returns {path, sha256, changed}."""
    want = sha256_file(src)
    changed = not (os.path.isfile(dest) and sha256_file(dest) == want)
    if changed:
        _copy(src, dest)
    got = sha256_file(dest)
    if got != want:
        raise UnitFileError("the snapshot %s of %s has SHA-256 %s, the unit %s: refusing to switch" % (dest, src, got, want))
    verify(run_command, dest, os.path.basename(src))
    return {"path": dest, "sha256": got, "changed": changed}


def verify(run_command, path, unit_name):
    """``systemd-analyze verify`` on a copy named as the unit (it derives the type from the name)."""
    directory = tempfile.mkdtemp(prefix="specdec-verify-")
    try:
        copy = os.path.join(directory, unit_name)
        with open(path, "rb") as f, open(copy, "wb") as out:
            out.write(f.read())
        rc, out, err = run_command(["systemd-analyze", "verify", copy])
        if rc != 0:
            raise UnitFileError("systemd-analyze verify refuses %s (rc=%d): %s" % (path, rc, (err or out).strip()[-800:]))
    finally:
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


def check_restore_source(src):
    """Root copies ``src`` into the unit directory: only a regular file owned by root that nobody else can write."""
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        raise UnitFileError("%s is missing" % src)
    if not stat.S_ISREG(st.st_mode):
        raise UnitFileError("%s is not a regular file" % src)
    if st.st_uid != 0:
        raise UnitFileError("%s is owned by uid %d, not root" % (src, st.st_uid))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnitFileError("%s is writable by others than root (mode %04o)" % (src, stat.S_IMODE(st.st_mode)))


def systemctl(run_command, argv, ok_rc=(0,)):
    """Run ``systemctl ARGV``; raise UnitFileError with its words unless rc is in ``ok_rc``; return (rc, out)."""
    rc, out, err = run_command(["systemctl"] + argv)
    if rc not in ok_rc:
        raise UnitFileError("systemctl %s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()[-800:]))
    return rc, out


def n_restarts(run_command, unit):
    """systemd's count of the unit's automatic restarts (``NRestarts``); a manual restart resets it."""
    return int(systemctl(run_command, ["show", unit, "--property=NRestarts", "--value"])[1].strip() or 0)


MANIFEST = "MANIFEST.json"


def archive(src, directory, unit, keep=5, now=None):
    """Keep a copy of ``src`` (the unit a kept switch replaced) in ``directory`` with its SHA-256.

    Files are ``<UTC time>-<sha12>-<unit>`` (0600); ``MANIFEST.json`` lists them newest first with
    their checksums; only the newest ``keep`` are kept. Returns ``{"path", "sha256", "pruned", "changed"}``.
    """
    digest = sha256_file(src)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError):
        entries = []
    if entries and entries[0].get("sha256") == digest and os.path.isfile(os.path.join(directory, entries[0]["file"])):
        return {"path": os.path.join(directory, entries[0]["file"]), "sha256": digest, "pruned": [], "changed": False}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    name = "%s-%s-%s" % (stamp, digest[:12], unit)
    _copy(src, os.path.join(directory, name))
    entries.insert(0, {"file": name, "sha256": digest, "at": stamp, "unit": unit})
    pruned = [e["file"] for e in entries[keep:]]
    for old in pruned:
        try:
            os.unlink(os.path.join(directory, old))
        except FileNotFoundError:
            pass
    entries = entries[:keep]
    _files.write_atomic(path, json.dumps(entries, indent=1), 0o600)
    return {"path": os.path.join(directory, name), "sha256": digest, "pruned": pruned, "changed": True}


def _copy(src, dest):
    """Copy ``src`` to ``dest`` atomically, 0600 (a reader never sees half a unit file)."""
    _files.copy_if_changed(src, dest, 0o600)


def newest_archived(directory):
    """The newest entry of the archive's manifest (``file``, ``sha256``, ``at``, ``unit``), or None."""
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return None
    return entries[0] if entries else None
