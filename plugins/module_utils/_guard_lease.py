# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of the guard: arm it, confirm it, read its status (``switch_guard``), docs/guard.md.

ARM checks the restore sources (the snapshot of the unit file and its sha256, or ``absent``; baseline
files) before anything may stop production, installs the guard's host code under ``lib_dir``
(:func:`install_library`: ``_guard`` and the module_utils it imports, from this module's own payload) and
its boot unit, writes the state file (``_guard_state``) and starts the watcher, a transient systemd unit
that runs ``python3 -m ...._guard watch STATEFILE`` in its own cgroup, so it outlives the controller, its
SSH session and its AWX job. CONFIRM removes the state file and stops the watcher once the controller
verified the host; the deadline between the two is renewed with ``_guard_state.renew``.

Standard library plus the collection's own module_utils; ``_guard`` is imported for its files: a module
that arms the guard carries them in its AnsiballZ payload, and :func:`payload` ships them to the host.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import os
import pkgutil
import re
import socket
import sys
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _files, _guard, _guard_state, _lock, _systemd

# The files the watcher imports, found from this one by following its imports (payload()); they are
# installed on the host. Any of them importing ``ansible.*`` (not on the host's Python) is refused.
PAYLOAD_ROOT = "_guard.py"
PACKAGE_DIRS = ("ansible_collections", "llmops", "specdec", "plugins", "module_utils")
LIB_DIR = "/usr/local/lib/llmops-specdec"
UNIT_DIR = "/etc/systemd/system"
WATCHER_PREFIX = "llmops-specdec-guard-"
BOOT_TEMPLATE = "llmops-specdec-guard-boot@.service"
# Paths that go into a unit file unquoted: no spaces, no %-specifiers, no quotes.
SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+\-]*$")


sha256_file = _files.sha256_file


# ---------------------------------------------------------------- names

def watcher_name(unit):
    return "%s%s.service" % (WATCHER_PREFIX, _guard_state.unit_stem(unit))


def boot_instance(unit):
    return "%s%s.service" % (BOOT_TEMPLATE[:-len(".service")], _guard_state.unit_stem(unit))


def _check_path(what, path):
    if not SAFE_PATH.match(path or ""):
        raise _guard_state.GuardError("%s %r must be an absolute path of letters, digits and _ . / + - (it is written "
                                      "unquoted into a systemd unit)" % (what, path))


# ---------------------------------------------------------------- library and boot unit on the host

def _read_module(name):
    data = None
    try:
        data = pkgutil.get_data(_guard.PACKAGE, name)
    except (OSError, TypeError, ValueError, ImportError):
        data = None
    if data is None:
        mod = importlib.import_module("%s.%s" % (_guard.PACKAGE, name[:-3]))
        data = mod.__loader__.get_data(mod.__file__)
    return data


def _imports(name, data):
    """``(module_utils files imported, non-stdlib Ansible modules imported)`` by one source file."""
    ours, ansible = set(), set()
    for node in ast.walk(ast.parse(data, name)):
        if isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module]
            if node.module == _guard.PACKAGE:
                mods = ["%s.%s" % (_guard.PACKAGE, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        else:
            continue
        for mod in mods:
            if mod.startswith(_guard.PACKAGE + "."):
                ours.add(mod[len(_guard.PACKAGE) + 1:].split(".")[0] + ".py")
            elif mod == "ansible" or mod.startswith(("ansible.", "ansible_collections.")):
                ansible.add(mod)
    return ours, ansible


def payload():
    """``{file name: bytes}``: _guard.py and the module_utils it imports, transitively.

    pkgutil.get_data works inside AnsiballZ's zip (its packages have ``__init__.py``); a checkout's
    namespace package has no loader with get_data, so each module's own loader is asked then.
    Raises _guard_state.GuardError when one of them imports Ansible itself, which the host's Python lacks.
    """
    files, todo = {}, [PAYLOAD_ROOT]
    while todo:
        name = todo.pop()
        if name in files:
            continue
        files[name] = _read_module(name)
        ours, ansible = _imports(name, files[name])
        if ansible:
            raise _guard_state.GuardError("the guard's host code cannot run outside Ansible: %s imports %s (only the standard "
                                          "library and pynvml are on the host)" % (name, ", ".join(sorted(ansible))))
        todo.extend(sorted(ours - set(files)))
    return files


def library_files(lib_dir):
    """``{path: bytes}`` of everything install_library writes under ``lib_dir``."""
    wanted = {}
    for depth in range(1, len(PACKAGE_DIRS) + 1):
        wanted[os.path.join(lib_dir, *PACKAGE_DIRS[:depth], "__init__.py")] = b""
    target = os.path.join(lib_dir, *PACKAGE_DIRS)
    for name, data in payload().items():
        wanted[os.path.join(target, name)] = data
    return wanted


def install_library(lib_dir, check_mode=False):
    """Write the guard's code under ``lib_dir`` (root 0644 files, 0755 dirs) where it differs; the
    list of paths written (or that would be, in check mode)."""
    written = []
    for path, data in sorted(library_files(lib_dir).items()):
        try:
            same = _guard_state.read_bytes(path) == data and (os.stat(path).st_mode & 0o7777) == 0o644
        except OSError:
            same = False
        if same:
            continue
        written.append(path)
        if check_mode:
            continue
        directory = lib_dir
        _guard_state.ensure_dir(directory, 0o755)
        for part in os.path.relpath(os.path.dirname(path), lib_dir).split(os.sep):
            if part != ".":
                directory = os.path.join(directory, part)
                _guard_state.ensure_dir(directory, 0o755)
        _lock.write_bytes_atomic(path, data, 0o644)
    return written


def boot_unit_text(state_dir, lib_dir, python):
    guard_dir = os.path.join(state_dir, _guard_state.GUARD_SUBDIR)
    return """\
# Installed by llmops.specdec.switch_guard (docs/guard.md); rewritten when it changes.
# A reboot in the middle of a switch: put the previous unit file back before %i.service starts.
[Unit]
Description=llmops.specdec guard: restore %i.service as it was before an unconfirmed switch
Documentation=https://example.invalid/llmops/specdec/docs/guard.md
Before=%i.service
ConditionPathExists={guard_dir}/%i.json
RequiresMountsFor={state_dir} {lib_dir}

[Service]
Type=oneshot
Environment=PYTHONPATH={lib_dir} PYTHONDONTWRITEBYTECODE=1
ExecStart={python} -m {package}._guard boot {guard_dir}/%i.json
TimeoutStartSec=300

[Install]
WantedBy=multi-user.target
""".format(guard_dir=guard_dir, state_dir=state_dir, lib_dir=lib_dir, python=python, package=_guard.PACKAGE)


def install_boot_unit(state_dir, lib_dir, python, unit_dir=None, check_mode=False):
    """Write the boot template unit where it differs; its path when written, else None."""
    path = os.path.join(unit_dir or UNIT_DIR, BOOT_TEMPLATE)
    text = boot_unit_text(state_dir, lib_dir, python).encode()
    if _guard_state.read_bytes(path) == text:
        return None
    if not check_mode:
        _lock.write_bytes_atomic(path, text, 0o644)
    return path


def watcher_argv(unit, statefile, lib_dir, python, poll, run_id, systemd_run="systemd-run"):
    return [systemd_run, "--unit=" + watcher_name(unit),
            "--description=llmops.specdec guard for %s (run %s)" % (unit, run_id),
            "--property=Type=exec", "--property=Restart=on-failure", "--property=RestartSec=5",
            "--property=RestartPreventExitStatus=%d" % _guard_state.EXIT_RESTORE_FAILED, "--property=TimeoutStopSec=30",
            "--setenv=PYTHONPATH=" + lib_dir, "--setenv=PYTHONDONTWRITEBYTECODE=1",
            python, "-m", _guard.PACKAGE + "._guard", "watch", statefile, "--poll", "%g" % poll]


def watcher_state(run_command_, unit):
    """ActiveState/SubState/Result of the watcher unit ('' when it is not loaded)."""
    try:
        props = _systemd.show(run_command_, watcher_name(unit), ["ActiveState", "SubState", "Result"])
    except _systemd.SystemdError:
        props = {}
    return {"unit": watcher_name(unit), "active_state": props.get("ActiveState", ""),
            "sub_state": props.get("SubState", ""), "result": props.get("Result", ""),
            "active": props.get("ActiveState") in ("active", "activating", "reloading")}


def start_watcher(run_command_, unit, statefile, lib_dir, python, poll, run_id, systemd_run="systemd-run"):
    """(Re)start the watcher unit: stop an old one, forget a failed one, then systemd-run."""
    name = watcher_name(unit)
    if watcher_state(run_command_, unit)["active"]:
        _guard_state.checked_run(["systemctl", "stop", name], "stopping the old watcher %s" % name, run_command_)
    run_command_(["systemctl", "reset-failed", name])  # rc 1 when it is not loaded: fine
    _guard_state.checked_run(watcher_argv(unit, statefile, lib_dir, python, poll, run_id, systemd_run),
                             "starting the watcher %s with systemd-run" % name, run_command_)


# ---------------------------------------------------------------- arm, confirm, status

def _sources(params):
    """The restore source and baseline files with their checksums, checked now (before any stop)."""
    snapshot = params["snapshot"]
    if snapshot == "absent":
        restore = {"source": "absent"}
    else:
        if not os.path.isfile(snapshot):
            raise _guard_state.GuardError("snapshot %s does not exist: nothing to restore from, so the guard was not "
                                          "armed (use snapshot=absent when there was no unit before)" % snapshot)
        digest = sha256_file(snapshot)
        if params.get("snapshot_checksum") and params["snapshot_checksum"].lower() != digest:
            raise _guard_state.GuardError("snapshot %s has sha256 %s, not the expected %s; the guard was not armed"
                                          % (snapshot, digest, params["snapshot_checksum"]))
        restore = {"source": snapshot, "sha256": digest, "size": os.path.getsize(snapshot)}
    baselines = []
    for item in params.get("baseline_files") or []:
        if not os.path.isfile(item["src"]):
            raise _guard_state.GuardError("baseline file %s does not exist; the guard was not armed" % item["src"])
        digest = sha256_file(item["src"])
        if item.get("checksum") and item["checksum"].lower() != digest:
            raise _guard_state.GuardError("baseline file %s has sha256 %s, not the expected %s; the guard was not armed"
                                          % (item["src"], digest, item["checksum"]))
        baselines.append({"src": item["src"], "dest": item["dest"], "sha256": digest})
    return restore, baselines


def _take_copies(params, check_mode):
    """Baseline files marked ``take``: copy ``dest`` (what the switch may overwrite) to ``src`` (0600) now, or
    leave the item out when there is no ``dest`` yet (nothing to put back). In check mode nothing is copied
    and ``dest`` stands for the copy it would be."""
    items = []
    for item in params.get("baseline_files") or []:
        if item.get("take"):
            if not os.path.isfile(item["dest"]):
                continue
            if check_mode:
                item = dict(item, src=item["dest"])
            else:
                _files.copy_if_changed(item["dest"], item["src"], 0o600)
        items.append(item)
    return dict(params, baseline_files=items)


def _park_section(params):
    """The candidate unit beside a parked baseline (``park`` of state=armed), checked; None without one."""
    park = params.get("park")
    if not park:
        return None
    if not _guard_state.SAFE_UNIT.match(park.get("unit") or "") or park["unit"] == params["unit"] \
            or not park["unit"].endswith("-candidate.service"):
        raise _guard_state.GuardError("park.unit %r must be a candidate unit name (NAME-candidate.service) other than %s; the guard "
                                      "was not armed" % (park.get("unit"), params["unit"]))
    for key in ("unit_path", "env_file"):
        if park.get(key) and not SAFE_PATH.match(park[key]):
            raise _guard_state.GuardError("park.%s %r is not an absolute path of plain characters; the guard was not armed"
                                          % (key, park[key]))
    return {"unit": park["unit"], "unit_path": park["unit_path"], "env_file": park.get("env_file") or None,
            "wake_timeout": float(park.get("wake_timeout") or 300)}


def build_state(params, now):
    """The state document for ``params`` (the switch_guard module's options for state=armed)."""
    restore, baselines = _sources(params)
    reclaim = {k: v for k, v in (params.get("reclaim") or {}).items() if v is not None}
    reclaim["units"] = list(reclaim.get("units") or [params["unit"]])
    park = _park_section(params)
    if park and park["unit"] not in reclaim["units"]:
        reclaim["units"].append(park["unit"])  # a restart after a failed wake-up stops the candidate too
    owner = {k: v for k, v in (params.get("owner") or {}).items() if v not in (None, "")}
    engine = params.get("engine") or _engine.DEFAULT
    ttl = float(params["ttl"])
    return {
        "version": _guard_state.STATE_VERSION, "phase": _guard_state.PHASE_ARMED, "run_id": params["run_id"], "owner": owner,
        "host": socket.gethostname(), "unit": params["unit"], "unit_path": params["unit_path"],
        "restore": restore, "baseline_files": baselines,
        "ready": {"url": params.get("ready_url") or None, "engine": engine,
                  "model": params.get("model") or None, "api_key_file": params.get("api_key_file") or None,
                  "api_key_var": params.get("api_key_var") or _engine.get(engine).API_KEY_VAR,
                  "timeout": float(params.get("ready_timeout") or 1800)},
        "reclaim": reclaim, "park": park, "lock_path": params.get("lock_path") or None,
        "history": params.get("history") or os.path.join(params["state_dir"], "history.jsonl"),
        "watcher": watcher_name(params["unit"]), "lib_dir": params.get("lib_dir") or LIB_DIR,
        "python": params.get("python") or sys.executable,
        "armed_at": _guard_state.iso(now), "armed_epoch": round(now, 3), "renewed_at": None, "renewed_epoch": None,
        "renewals": 0, "ttl": ttl, "deadline": round(now + ttl, 3), "deadline_at": _guard_state.iso(round(now + ttl, 3)),
        "timings": {"poll": float(params.get("poll_interval") or 1.0), "ttl": ttl},
        "attempts": 0,
    }


def _comparable(state):
    """What makes two arms of the same run the same guard (times and counters left out)."""
    skip = {"armed_at", "armed_epoch", "renewed_at", "renewed_epoch", "renewals", "deadline", "deadline_at",
            "host", "attempts"}
    return {k: v for k, v in (state or {}).items() if k not in skip}


def arm(params, run_command_, check_mode=False, clock=time.time, systemd_run="systemd-run"):
    """Arm (or re-arm, same run id) the guard; install its code and boot unit; start the watcher.

    Returns ``{"changed", "statefile", "guard", "library", "boot_unit", "watcher", "diff"}``. Raises
    _guard_state.GuardError before anything is written when a source is missing or another run's guard is armed.
    """
    unit = params["unit"]
    for what in ("state_dir", "lib_dir", "python"):
        _check_path(what, params[what])
    statefile = _guard_state.state_path(params["state_dir"], unit)
    now = clock()
    existing = _guard_state.read_state(statefile)
    if existing and existing.get("run_id") != params["run_id"]:
        raise _guard_state.GuardError("a guard for %s is armed by another run: %s (phase %s, deadline %s); nothing was changed. "
                                      "Confirm it (state=confirmed, force=true) only once that run is known to be dead."
                                      % (unit, _lock.describe(dict(existing.get("owner", {}), run_id=existing.get("run_id"))),
                                         existing.get("phase"), existing.get("deadline_at")), state=existing)
    if existing and existing.get("phase") != _guard_state.PHASE_ARMED:
        raise _guard_state.GuardError("the guard for %s is %s since %s; it cannot be re-armed now"
                                      % (unit, existing.get("phase"), existing.get("restoring_since")), state=existing)
    state = build_state(_take_copies(params, check_mode), now)
    if existing:
        state["armed_at"], state["armed_epoch"] = existing["armed_at"], existing["armed_epoch"]
        state["renewed_at"], state["renewed_epoch"] = _guard_state.iso(now), round(now, 3)
        state["renewals"] = existing.get("renewals", 0) + 1
    written = install_library(params["lib_dir"], check_mode)
    boot_path = install_boot_unit(params["state_dir"], params["lib_dir"], params["python"],
                                  params.get("unit_dir"), check_mode)
    result = {"changed": bool(written or boot_path) or _comparable(existing) != _comparable(state) or bool(existing),
              "statefile": statefile, "guard": state,
              "library": {"dir": params["lib_dir"], "written": written},
              "boot_unit": {"name": boot_instance(unit), "written": boot_path, "enabled": None},
              "diff": {"before": _guard_state.summary(existing), "after": _guard_state.summary(state)}}
    if check_mode:
        result["watcher"] = watcher_state(run_command_, unit)
        return result
    if boot_path:
        _guard_state.checked_run(["systemctl", "daemon-reload"], "systemctl daemon-reload (boot unit written)", run_command_)
    rc, out, _err = run_command_(["systemctl", "is-enabled", boot_instance(unit)])
    if rc != 0 or out.strip() != "enabled":
        _guard_state.checked_run(["systemctl", "enable", boot_instance(unit)], "enabling %s" % boot_instance(unit), run_command_)
        result["changed"] = True
    result["boot_unit"]["enabled"] = True
    guard_dir = os.path.dirname(statefile)
    _guard_state.ensure_dir(params["state_dir"], 0o755)
    _guard_state.ensure_dir(guard_dir, 0o700)
    with _lock.flocked(_guard_state.flock_path(statefile)):
        again = _guard_state.read_state(statefile)
        if (again or {}).get("run_id") not in (None, params["run_id"]) or \
                (again and again.get("phase") != _guard_state.PHASE_ARMED):
            raise _guard_state.GuardError("the guard for %s changed while arming (run %s, phase %s); nothing was changed"
                                          % (unit, again.get("run_id"), again.get("phase")), state=again)
        _guard_state.write_state(statefile, state)
    _guard_state.renew_lock(state, state["ttl"])
    watcher = watcher_state(run_command_, unit)
    if written or not watcher["active"]:
        try:
            start_watcher(run_command_, unit, statefile, params["lib_dir"], params["python"],
                          state["timings"]["poll"], params["run_id"], systemd_run)
        except _guard_state.GuardError as exc:
            if not existing:
                _files.remove(statefile)
            raise _guard_state.GuardError("%s; the guard is %s, nothing was stopped" % (
                exc.msg, "not armed" if not existing else "armed without a watcher"))
        result["changed"] = True
        watcher = watcher_state(run_command_, unit)
        watcher["started"] = True
    result["watcher"] = watcher
    return result


def confirm(statefile, run_id, run_command_, force=False, history=None, unit=None, check_mode=False):
    """Disarm: remove the state file and stop the watcher. Idempotent; ``{"changed", "guard"}``.

    Raises _guard_state.GuardError when the guard already restored (or is restoring) for this run: the candidate
    the controller wants to confirm is not what runs.
    """
    with _lock.flocked(_guard_state.flock_path(statefile)) if os.path.isdir(os.path.dirname(statefile)) \
            else contextlib.nullcontext():
        state = _guard_state.read_state(statefile)
        if state is None:
            rec = _guard_state.last_record(history, unit, run_id) if history and run_id else None
            if rec and rec.get("outcome") == _guard_state.OUTCOME_FOLLOWED:
                # A following worker whose group held kept the candidate by itself: what the confirm wanted.
                return {"changed": False, "guard": None, "followed": rec}
            if rec:
                raise _guard_state.GuardError("the guard already ended run %s: %s at %s (%s); nothing to confirm"
                                              % (run_id, rec.get("outcome"), rec.get("restored_at") or rec.get("at"),
                                                 rec.get("reason")), record=rec)
            return {"changed": False, "guard": None}
        if state.get("run_id") != run_id and not force:
            raise _guard_state.GuardError("the guard for %s belongs to run %s, not %s; nothing was changed (force=true "
                                          "disarms it)" % (state.get("unit"), state.get("run_id"), run_id), state=state)
        if state.get("phase") != _guard_state.PHASE_ARMED:
            raise _guard_state.GuardError("the guard for %s is %s since %s: the previous configuration is being restored; "
                                          "nothing to confirm" % (state.get("unit"), state.get("phase"),
                                                                  state.get("restoring_since")), state=state)
        if not check_mode:
            _files.remove(statefile)
    if not check_mode:
        # Gone already is fine: the watcher exits by itself within one poll once the file is gone.
        run_command_(["systemctl", "stop", state.get("watcher") or watcher_name(state["unit"])])
    return {"changed": True, "guard": state}


def status(state_dir, unit, run_command_, history=None):
    statefile = _guard_state.state_path(state_dir, unit)
    state = _guard_state.read_state(statefile)
    now = time.time()
    rc, out, _err = run_command_(["systemctl", "is-enabled", boot_instance(unit)])
    deadline = state.get("deadline") if state else None
    return {"statefile": statefile, "armed": bool(state) and state.get("phase") == _guard_state.PHASE_ARMED,
            "phase": state.get("phase") if state else None, "guard": state,
            "deadline": deadline, "deadline_at": _guard_state.iso(deadline) if deadline else None,
            "remaining": round(deadline - now, 1) if deadline else None,
            "owner": dict(state.get("owner", {}), run_id=state.get("run_id")) if state else None,
            "watcher": watcher_state(run_command_, unit),
            "boot_unit": {"name": boot_instance(unit), "enabled": rc == 0 and out.strip() == "enabled"},
            "last_record": _guard_state.last_record(history or os.path.join(state_dir, "history.jsonl"), unit)}
