# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one restore: put the previous configuration of a unit back and start it (issue 30, "one rollback").

Both rollbacks run this code: the host's guard when the controller is lost (``_guard.restore``, from the
guard's state file) and the controller's own rollback (``spec_unit`` with ``restore``, from the same inputs:
the snapshot and its sha256, the unit, the reclaim settings). So the two cannot drift.

The PLAN is the guard state's shape (``_guard_state``): ``unit``, ``unit_path``, ``restore`` (``source``: the
file to put back, or ``absent`` when there was no unit before; ``sha256``: its checksum, checked when given),
``baseline_files`` (``src``, ``dest``, ``sha256``), ``reclaim`` (``_reclaim``'s parameters; ``units``
defaults to the unit), ``park`` (the candidate beside a parked baseline, removed with the unit) and
``env_file`` (a secrets file removed with a unit that had no previous one).

The steps, in order (:func:`restore`):

1. VERIFY the sources (:func:`verify`): the sha256 of the unit's source and of each baseline copy; with
   ``check_owner`` also that root owns the source and nobody else can write it. A failure changes nothing.
2. FREE the GPUs (:func:`free_gpus`): stop the unit and free its GPUs with ``_reclaim`` (the gpu_reclaim rules
   and allow-lists, scoped to the service's own GPUs and processes), then ``systemctl stop`` the unit. Never
   raises: a failed reclaim is a warning, production is started whatever happens.
3. PUT BACK (:func:`put_back`): the unit file (or remove the candidate's when there was none, disabling its
   links first), the parked candidate's unit, the baseline files.
4. RELOAD: ``reset-failed`` (manual starts count toward ``StartLimitBurst``) and ``daemon-reload``.
5. START the unit (``restart``, or ``start --no-block`` from the guard, which waits with its own probe).

Standard library plus the collection's host-side module_utils: the guard's host runs it (``_guard_lease``
installs it with ``_guard``).
"""
from __future__ import annotations

import hashlib
import os

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _guard_state, _lock, _reclaim, _systemd, _unitfile

BASELINE_MODE = 0o600      # baselines under the state directory, as _record writes them
UNIT_MODE = 0o644          # readable to systemd's tools
RECLAIM_WARNING = "the candidate's GPUs were not verified free before the rollback: "
# Only to size a stop; _reclaim fills in its own defaults for what is not given.
STOP_TIMEOUT = 30.0


class RestoreError(Exception):
    """A step of the restore failed. ``stage``: ``verify`` (nothing was touched), ``lease`` (the lease was lost
    after the reclaim, the files were not touched), ``files``, ``stop`` (the files are back, the unit still
    runs) or ``start``. ``result``: what was done up to there (``reclaim``, ``file``)."""

    def __init__(self, msg, stage, result=None):
        super().__init__(msg)
        self.msg = msg
        self.stage = stage
        self.result = result or {}


def _quiet(_msg, _level=6):
    return None


read_bytes = _guard_state.read_bytes


def plan(unit, unit_path, src, sha256=None, reclaim=None, env_file=None):
    """The plan of a restore from the controller's inputs (``src`` None: there was no unit before), in the shape
    of the guard's state. ``env_file``: the secrets file removed with the unit (a parked candidate's)."""
    return {"unit": unit, "unit_path": unit_path, "restore": {"source": src or "absent", "sha256": sha256},
            "baseline_files": [], "reclaim": dict((k, v) for k, v in (reclaim or {}).items() if v is not None),
            "env_file": env_file}


# ---------------------------------------------------------------- 1. verify

def verify(plan, check_owner=False):
    """Read the restore sources and check them; ``(unit bytes or None, [(dest, bytes)])``. Raises RestoreError
    (stage ``verify``) before anything is touched."""
    restore = plan["restore"]
    data = None
    if restore["source"] != "absent":
        if check_owner:
            try:
                _unitfile.check_restore_source(restore["source"])
            except _unitfile.UnitFileError as exc:
                raise RestoreError("refusing to install %s as %s: %s; nothing was changed"
                                   % (restore["source"], plan["unit_path"], exc), "verify")
        data = read_bytes(restore["source"])
        if data is None:
            raise RestoreError("the snapshot %s is gone" % restore["source"], "verify")
        if restore.get("sha256"):
            digest = hashlib.sha256(data).hexdigest()
            if digest != restore["sha256"].lower():
                raise RestoreError("the snapshot %s changed since the guard was armed (sha256 %s, armed with %s)"
                                   % (restore["source"], digest, restore["sha256"]), "verify")
    baselines = []
    for item in plan.get("baseline_files") or []:
        blob = read_bytes(item["src"])
        if blob is None or hashlib.sha256(blob).hexdigest() != item["sha256"]:
            raise RestoreError("the baseline copy %s is %s since the guard was armed"
                               % (item["src"], "gone" if blob is None else "changed"), "verify")
        baselines.append((item["dest"], blob))
    return data, baselines


# ---------------------------------------------------------------- 2. free the GPUs

def _stop_timeout(reclaim):
    value = (reclaim or {}).get("stop_timeout")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else STOP_TIMEOUT


def free_gpus(plan, run_command, reclaim_kw=None, log=_quiet):
    """Stop the unit and free its GPUs with _reclaim; never raises. A summary (``ok``, ``error``, ``signalled``,
    ``units``, ``gpus``, ``elapsed``), and whether the unit is stopped (``stopped``; a start of a still-active
    candidate would be a no-op that looks like success)."""
    params = dict(plan.get("reclaim") or {})
    params["units"] = list(params.get("units") or [plan["unit"]])
    kwargs = {"warn": lambda text: log("reclaim: %s" % text, 4)}
    kwargs.update(reclaim_kw or {})
    try:
        res = _reclaim.reclaim(params, run_command, **kwargs)
        out = {"ok": True, "elapsed": res.get("elapsed")}
    except _reclaim.ReclaimError as exc:
        res = exc.result or {}
        out = {"ok": False, "error": exc.msg, "elapsed": res.get("elapsed")}
        log("reclaim failed: %s" % exc.msg, 3)
    out["signalled"] = [{k: s.get(k) for k in ("pid", "name", "mib", "signal")} for s in res.get("signalled", [])]
    out["units"] = [{k: u.get(k) for k in ("name", "active_before", "action", "killed")} for u in res.get("units", [])]
    out["gpus"] = [{k: g.get(k) for k in ("index", "used_mib_before", "used_mib_after")} for g in res.get("gpus", [])]
    try:
        stop = _systemd.stop_unit(run_command, plan["unit"], _stop_timeout(params))
        out["stopped"] = True
        if stop["was_active"]:
            out["units"].append({"name": plan["unit"], "action": "stopped", "killed": stop["killed"]})
    except _systemd.SystemdError as exc:
        out["stopped"] = False
        out["stop_error"] = str(exc)
    return out


# ---------------------------------------------------------------- 3. put back

def remove_parked_candidate(plan, run_command, log=_quiet):
    """Remove the unit file (and secrets file) of the candidate that ran beside a parked baseline."""
    park = plan.get("park")
    if not park:
        return
    for path in (park["unit_path"], park.get("env_file")):
        if path and os.path.lexists(path):
            if path == park["unit_path"]:
                if not _unitfile.written_by_us(path):
                    log("left %s as it is: the collection did not write it (no %r header)"
                        % (path, _unitfile.MANAGED_HEADER), 3)
                    continue
                run_command(["systemctl", "disable", park["unit"]])  # best effort, like put_back
            os.unlink(path)
            log("removed %s, the candidate beside the parked baseline" % path)


def put_back(plan, data, baselines, run_command, log=_quiet, owned_only=False):
    """Write the unit file back (``data``), or remove the candidate's when ``data`` is None; then the baselines.
    ``file``: ``restored``, ``unchanged``, ``removed``, ``absent``, or ``foreign`` (with ``owned_only``, a file
    the collection did not write is left as it is)."""
    remove_parked_candidate(plan, run_command, log)
    unit_path = plan["unit_path"]
    if data is None:
        file = "absent"
        if os.path.lexists(unit_path):
            if owned_only and not _unitfile.written_by_us(unit_path):
                log("left %s as it is: the collection did not write it" % unit_path, 4)
                file = "foreign"
            else:
                run_command(["systemctl", "disable", plan["unit"]])  # its [Install] links; best effort
                os.unlink(unit_path)
                log("removed the candidate %s: there was no unit before" % unit_path)
                file = "removed"
        if plan.get("env_file") and os.path.lexists(plan["env_file"]):
            os.unlink(plan["env_file"])  # its secrets, whoever wrote the unit (as the guard's parked candidate)
            log("removed %s" % plan["env_file"])
    elif _files.write_if_changed(unit_path, data, UNIT_MODE):
        log("put back %s from %s (sha256 %s)" % (unit_path, plan["restore"]["source"],
                                                 plan["restore"].get("sha256") or hashlib.sha256(data).hexdigest()))
        file = "restored"
    else:
        log("%s already holds %s" % (unit_path, plan["restore"]["source"]))
        file = "unchanged"
    for dest, blob in baselines:
        _lock.write_bytes_atomic(dest, blob, BASELINE_MODE)
        log("put back %s" % dest)
    return file


def _systemctl(run_command, argv):
    rc, out, err = run_command(["systemctl"] + argv)
    if rc != 0:
        raise RestoreError("systemctl %s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out).strip()[-800:]),
                           "start")
    return out


# ---------------------------------------------------------------- the whole restore

def restore(plan, run_command, check_mode=False, free=True, check_owner=False, require_stopped=False,
            no_block=False, owned_only=False, lease_lost=None, reclaim_kw=None, log=_quiet, clock=None, sources=None,
            warn=None):
    """Run the steps of the module docstring. Returns ``{"file", "started", "changed", "n_restarts", "reclaim",
    "warnings", "restored_at"}``; raises RestoreError (its ``stage`` says how far it got).

    ``free``: stop the unit and free its GPUs first (False at boot, and for a candidate's removal).
    ``require_stopped``: a unit that could not be stopped is not started (the guard's rule: a start of the still
    active candidate would look like success); otherwise it is restarted all the same (the controller's:
    production is started whatever happens). ``no_block``: ``start --no-block`` (the guard, at boot a blocking
    start would deadlock) and no ``NRestarts``; otherwise ``restart``. ``lease_lost``: a callable asked after the
    reclaim; a true answer (why) stops the restore before the files (the guard restores the host itself).
    ``warn``: called with each of ``warnings`` too (``module.warn``).
    ``check_mode``: verify, then say what would be done; nothing is stopped or written. ``sources``: what
    :func:`verify` returned, when the caller verified first (the guard, before it renews its lock).
    """
    data, baselines = sources if sources is not None else verify(plan, check_owner)
    unit = plan["unit"]
    out = {"file": None, "started": False, "changed": True, "n_restarts": None, "reclaim": None, "warnings": [],
           "restored_at": None}
    if check_mode:
        current = read_bytes(plan["unit_path"])
        if data is None:
            exists = os.path.lexists(plan["unit_path"])
            out["file"] = ("foreign" if exists and owned_only and not _unitfile.written_by_us(plan["unit_path"])
                           else "removed" if exists else "absent")
            out["changed"] = out["file"] == "removed"
        else:
            out["file"] = "unchanged" if current == data else "restored"
            out["started"] = True
        return out
    if free:
        freed = out["reclaim"] = free_gpus(plan, run_command, reclaim_kw, log)
        log("stopped %s and reclaimed its GPUs: %s" % (unit, "ok" if freed["ok"] else freed.get("error")))
        if not freed["ok"]:
            out["warnings"].append(RECLAIM_WARNING + (freed.get("error") or "?"))
            if warn:
                warn(out["warnings"][-1])
    lost = lease_lost() if lease_lost else None
    if lost:
        raise RestoreError("the lease on the host's guard was lost, the host is being restored to its previous "
                           "configuration: %s; the unit file was not touched" % lost, "lease", out)
    try:
        out["file"] = put_back(plan, data, baselines, run_command, log, owned_only)
    except OSError as exc:
        raise RestoreError("restoring the files failed: %s" % exc, "files", out)
    out["restored_at"] = clock() if clock else None
    if out["file"] in ("absent", "foreign"):
        out["changed"] = bool(free)
        if out["file"] == "foreign" or not free:
            return out
    # Best effort: rc 1 when it never failed or is not loaded; a start that the limit refuses says so itself.
    run_command(["systemctl", "reset-failed", unit])
    try:
        _systemctl(run_command, ["daemon-reload"])
    except RestoreError as exc:
        raise RestoreError("restoring the files failed: %s" % exc.msg, "files", out)
    if require_stopped and out["reclaim"] and not out["reclaim"].get("stopped"):
        raise RestoreError("%s could not be stopped (%s); the previous unit file is back on disk, restart the unit "
                           "once it stops" % (unit, out["reclaim"].get("stop_error")), "stop", out)
    if data is None:
        return out
    try:
        _systemctl(run_command, ["start", "--no-block", unit] if no_block else ["restart", unit])
    except RestoreError as exc:
        raise RestoreError(exc.msg, "start", out)
    out["started"] = True
    if not no_block:
        try:
            out["n_restarts"] = _unitfile.n_restarts(run_command, unit)
        except _unitfile.UnitFileError as exc:
            raise RestoreError(str(exc), "start", out)
    return out
