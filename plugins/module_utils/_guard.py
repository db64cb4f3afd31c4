# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Commit-confirmed switches on the host: a guard that restores the previous unit unless confirmed.

The controller ARMS the guard before anything may stop production: a state file
``<state_dir>/guard/<unit stem>.json`` (root 0600 in a 0700 directory, written atomically) says what
to restore (the snapshot of the unit file and its sha256, or ``absent``; baseline files), how to free
the GPUs (``_reclaim`` parameters), how to tell the service answers, the lock, the history, and the
``deadline`` (epoch seconds). A WATCHER (``python3 -m ...._guard watch STATEFILE``) runs as a transient
systemd unit, in its own cgroup, so it outlives the controller, its SSH session and its AWX job. It
polls the state file: gone (confirmed) -> exit 0; deadline passed -> RESTORE. The controller RENEWS
the deadline while it works and CONFIRMS (removes the state file) once the host is in a state it
verified: the kept candidate made the baseline, or the rollback healthy.

RESTORE (also run at boot, see BOOT below): check the restore sources' sha256 first (a mismatch
changes nothing), stop the unit and free its GPUs (``_reclaim.reclaim``, the gpu_reclaim rules), put
the previous unit file back (or remove the candidate when there was none) and the baseline files,
``daemon-reload``, ``reset-failed``, start, wait until it answers, append ``restored_by_guard`` to the
history, release the lock and remove the state file. A restore that cannot end with the service
answering is recorded as ``guard_restore_failed``, the lock is kept with a note, the exit status is 3.

PARKED (issue 18, docs/park.md): a switch that parked the baseline arms the guard with ``park`` (the
candidate's own unit beside it). RESTORE then first stops that candidate with the parked unit kept
(``keep_units``), removes the candidate's unit file, wakes the baseline (``_park``) and waits until it
answers: seconds, not a load. A wake-up that fails, or a baseline that does not answer after it, goes on
with the restore above (stop, put back, start), which is what a switch without parking does.

BOOT: a persistent template unit ``llmops-specdec-guard-boot@.service`` ordered ``Before=%i.service``
and conditioned on the state file restores the files at boot, before systemd starts the unit, and
queues the start with ``--no-block`` (a blocking start from a unit ordered before it would deadlock).
So a reboot mid-switch boots the previous configuration, never the candidate.

Everything here is the standard library plus the collection's own module_utils (``_reclaim`` uses
pynvml through ``_nvml``). The module installs these files on the host (``install_library``) from
its own payload, so the watcher runs the same code that the module shipped.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import http.client
import importlib
import json
import os
import pkgutil
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _files, _lock, _park, _reclaim, _systemd, _unitfile

PACKAGE = "ansible_collections.llmops.specdec.plugins.module_utils"
# The files the watcher imports, found from this one by following its imports (payload()); they are
# installed on the host. Any of them importing ``ansible.*`` (not on the host's Python) is refused.
PAYLOAD_ROOT = "_guard.py"
# What answers "ready" per engine (the rule of _ready, without its Ansible HTTP stack): the adapters' paths.
HEALTH_PATH = dict((name, mod.HEALTH_PATH) for name, mod in _engine.ENGINES.items())
REQUEST_TIMEOUT = 25.0
PACKAGE_DIRS = ("ansible_collections", "llmops", "specdec", "plugins", "module_utils")
LIB_DIR = "/usr/local/lib/llmops-specdec"
UNIT_DIR = "/etc/systemd/system"
GUARD_SUBDIR = "guard"
WATCHER_PREFIX = "llmops-specdec-guard-"
BOOT_TEMPLATE = "llmops-specdec-guard-boot@.service"
STATE_FILE_MODE = 0o600  # baselines and history under the state directory, as _record writes them
STATE_VERSION = 1
PHASE_ARMED = "armed"
PHASE_RESTORING = "restoring"
OUTCOME_RESTORED = "restored_by_guard"
OUTCOME_FAILED = "guard_restore_failed"
EXIT_RESTORE_FAILED = 3  # RestartPreventExitStatus of the watcher: a failed restore is not retried
MAX_ATTEMPTS = 3         # restores started (the watcher restarted after a crash resumes one)
COMMAND_TIMEOUT = 120.0  # any one systemctl call
LOCK_MARGIN = 120.0      # the lock outlives the guard's deadline by this much
RESTORE_MARGIN = 120.0   # beyond stop + reclaim + ready timeouts, while a restore holds the lock
PROGRESS_EVERY = 30.0    # a journal line this often while waiting for the service
# Only to size the restore's time budget; _reclaim fills in its own defaults for what is not given.
RECLAIM_TIMEOUTS = {"stop_timeout": 30.0, "term_timeout": 10.0, "verify_timeout": 30.0}
_SAFE_UNIT = re.compile(r"^[A-Za-z0-9:_.\-]+\.service$")
# Paths that go into a unit file unquoted: no spaces, no %-specifiers, no quotes.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+\-]*$")


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
    if not _SAFE_UNIT.match(unit or "") or unit.endswith("@.service"):
        raise GuardError("unit %r: the guard handles plain service units (NAME.service; letters, digits, "
                         "':', '_', '.', '-'), not templates or instances" % unit)
    return unit[:-len(".service")]


def state_path(state_dir, unit):
    return os.path.join(state_dir, GUARD_SUBDIR, unit_stem(unit) + ".json")


def watcher_name(unit):
    return "%s%s.service" % (WATCHER_PREFIX, unit_stem(unit))


def boot_instance(unit):
    return "%s%s.service" % (BOOT_TEMPLATE[:-len(".service")], unit_stem(unit))


def _flock_path(statefile):
    return os.path.join(os.path.dirname(statefile), "." + os.path.basename(statefile) + ".flock")


def _check_path(what, path):
    if not _SAFE_PATH.match(path or ""):
        raise GuardError("%s %r must be an absolute path of letters, digits and _ . / + - (it is written "
                         "unquoted into a systemd unit)" % (what, path))


sha256_file = _files.sha256_file


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


def _write_state(statefile, state):
    _lock.write_json_atomic(statefile, state, mode=0o600)


def _ensure_dir(path, mode):
    if not os.path.isdir(path):
        os.makedirs(path, mode=mode, exist_ok=True)
        os.chmod(path, mode)


def _read_bytes(path):
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


# ---------------------------------------------------------------- commands, HTTP, journal

def run_command(argv, timeout=COMMAND_TIMEOUT):
    """``module.run_command`` for the host side: argv list in, ``(rc, stdout, stderr)`` out, bounded."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return 124, "", "%s timed out after %.0f s" % (argv[0], timeout)
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc)
    return proc.returncode, proc.stdout, proc.stderr


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def http_get(url, timeout, headers=None):
    """GET over urllib (no proxies, no redirects): ``(status or None, body, error text or None)``."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=timeout) as resp:
            return resp.status, resp.read(1 << 20), None
    except urllib.error.HTTPError as exc:
        return exc.code, b"", "HTTP %d" % exc.code
    except urllib.error.URLError as exc:
        return None, b"", str(exc.reason)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return None, b"", "%s: %s" % (type(exc).__name__, exc)


def probe(ready, api_key=None, timeout=REQUEST_TIMEOUT):
    """One readiness probe: ``(ready, detail)``: the engine's ``HEALTH_PATH`` 200, and /v1/models lists
    ``model`` (when one is named) where its adapter says ``READY_LISTS_MODEL``."""
    base = ready["url"].rstrip("/")
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    path = HEALTH_PATH.get(ready.get("engine"), "/health")
    status, _body, err = http_get(base + path, timeout, headers)
    if status != 200:
        return False, "%s: %s" % (path, err or "HTTP %s" % status)
    if not (_engine.known(ready.get("engine")) and _engine.get(ready["engine"]).READY_LISTS_MODEL) or not ready.get("model"):
        return True, "%s: 200" % path
    status, body, err = http_get(base + "/v1/models", timeout, headers)
    try:
        ids = [m["id"] for m in json.loads(body.decode())["data"]] if status == 200 else None
    except (ValueError, KeyError, TypeError):
        ids = None
    if ids is None or ready["model"] not in ids:
        return False, "%s: 200, /v1/models: %s" % (path, err or "lists %s, not %r" % (ids, ready["model"]))
    return True, "%s: 200, /v1/models lists %s" % (path, ready["model"])


def log(msg, level=6):
    """One journal line (stdout of the watcher unit); ``<N>`` sets its syslog priority."""
    sys.stdout.write("<%d>%s\n" % (level, msg))
    sys.stdout.flush()


def _run(argv, what, run_command_=None):
    rc, out, err = (run_command_ or run_command)(argv)
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
        _ensure_dir(directory, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, STATE_FILE_MODE)
    try:
        os.fchmod(fd, STATE_FILE_MODE)
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def last_record(history, unit=None, run_id=None, scan_bytes=1 << 20):
    """The newest guard record (restored_by_guard / guard_restore_failed) in the history, or None."""
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
        if not isinstance(rec, dict) or rec.get("outcome") not in (OUTCOME_RESTORED, OUTCOME_FAILED):
            continue
        if (unit is None or rec.get("unit") == unit) and (run_id is None or rec.get("run_id") == run_id):
            return rec
    return None


# ---------------------------------------------------------------- library and boot unit on the host

def _read_module(name):
    data = None
    try:
        data = pkgutil.get_data(PACKAGE, name)
    except (OSError, TypeError, ValueError, ImportError):
        data = None
    if data is None:
        mod = importlib.import_module("%s.%s" % (PACKAGE, name[:-3]))
        data = mod.__loader__.get_data(mod.__file__)
    return data


def _imports(name, data):
    """``(module_utils files imported, non-stdlib Ansible modules imported)`` by one source file."""
    ours, ansible = set(), set()
    for node in ast.walk(ast.parse(data, name)):
        if isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module]
            if node.module == PACKAGE:
                mods = ["%s.%s" % (PACKAGE, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        else:
            continue
        for mod in mods:
            if mod.startswith(PACKAGE + "."):
                ours.add(mod[len(PACKAGE) + 1:].split(".")[0] + ".py")
            elif mod == "ansible" or mod.startswith(("ansible.", "ansible_collections.")):
                ansible.add(mod)
    return ours, ansible


def payload():
    """``{file name: bytes}``: _guard.py and the module_utils it imports, transitively.

    pkgutil.get_data works inside AnsiballZ's zip (its packages have ``__init__.py``); a checkout's
    namespace package has no loader with get_data, so each module's own loader is asked then.
    Raises GuardError when one of them imports Ansible itself, which the host's Python lacks.
    """
    files, todo = {}, [PAYLOAD_ROOT]
    while todo:
        name = todo.pop()
        if name in files:
            continue
        files[name] = _read_module(name)
        ours, ansible = _imports(name, files[name])
        if ansible:
            raise GuardError("the guard's host code cannot run outside Ansible: %s imports %s (only the standard "
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
            same = _read_bytes(path) == data and (os.stat(path).st_mode & 0o7777) == 0o644
        except OSError:
            same = False
        if same:
            continue
        written.append(path)
        if check_mode:
            continue
        directory = lib_dir
        _ensure_dir(directory, 0o755)
        for part in os.path.relpath(os.path.dirname(path), lib_dir).split(os.sep):
            if part != ".":
                directory = os.path.join(directory, part)
                _ensure_dir(directory, 0o755)
        _lock.write_bytes_atomic(path, data, 0o644)
    return written


def boot_unit_text(state_dir, lib_dir, python):
    guard_dir = os.path.join(state_dir, GUARD_SUBDIR)
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
""".format(guard_dir=guard_dir, state_dir=state_dir, lib_dir=lib_dir, python=python, package=PACKAGE)


def install_boot_unit(state_dir, lib_dir, python, unit_dir=None, check_mode=False):
    """Write the boot template unit where it differs; its path when written, else None."""
    path = os.path.join(unit_dir or UNIT_DIR, BOOT_TEMPLATE)
    text = boot_unit_text(state_dir, lib_dir, python).encode()
    if _read_bytes(path) == text:
        return None
    if not check_mode:
        _lock.write_bytes_atomic(path, text, 0o644)
    return path


def watcher_argv(unit, statefile, lib_dir, python, poll, run_id, systemd_run="systemd-run"):
    return [systemd_run, "--unit=" + watcher_name(unit),
            "--description=llmops.specdec guard for %s (run %s)" % (unit, run_id),
            "--property=Type=exec", "--property=Restart=on-failure", "--property=RestartSec=5",
            "--property=RestartPreventExitStatus=%d" % EXIT_RESTORE_FAILED, "--property=TimeoutStopSec=30",
            "--setenv=PYTHONPATH=" + lib_dir, "--setenv=PYTHONDONTWRITEBYTECODE=1",
            python, "-m", PACKAGE + "._guard", "watch", statefile, "--poll", "%g" % poll]


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
        _run(["systemctl", "stop", name], "stopping the old watcher %s" % name, run_command_)
    run_command_(["systemctl", "reset-failed", name])  # rc 1 when it is not loaded: fine
    _run(watcher_argv(unit, statefile, lib_dir, python, poll, run_id, systemd_run),
         "starting the watcher %s with systemd-run" % name, run_command_)


# ---------------------------------------------------------------- arm, renew, confirm, status

def _sources(params):
    """The restore source and baseline files with their checksums, checked now (before any stop)."""
    snapshot = params["snapshot"]
    if snapshot == "absent":
        restore = {"source": "absent"}
    else:
        if not os.path.isfile(snapshot):
            raise GuardError("snapshot %s does not exist: nothing to restore from, so the guard was not "
                             "armed (use snapshot=absent when there was no unit before)" % snapshot)
        digest = sha256_file(snapshot)
        if params.get("snapshot_checksum") and params["snapshot_checksum"].lower() != digest:
            raise GuardError("snapshot %s has sha256 %s, not the expected %s; the guard was not armed"
                             % (snapshot, digest, params["snapshot_checksum"]))
        restore = {"source": snapshot, "sha256": digest, "size": os.path.getsize(snapshot)}
    baselines = []
    for item in params.get("baseline_files") or []:
        if not os.path.isfile(item["src"]):
            raise GuardError("baseline file %s does not exist; the guard was not armed" % item["src"])
        digest = sha256_file(item["src"])
        if item.get("checksum") and item["checksum"].lower() != digest:
            raise GuardError("baseline file %s has sha256 %s, not the expected %s; the guard was not armed"
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
    if not _SAFE_UNIT.match(park.get("unit") or "") or park["unit"] == params["unit"] \
            or not park["unit"].endswith("-candidate.service"):
        raise GuardError("park.unit %r must be a candidate unit name (NAME-candidate.service) other than %s; the guard "
                         "was not armed" % (park.get("unit"), params["unit"]))
    for key in ("unit_path", "env_file"):
        if park.get(key) and not _SAFE_PATH.match(park[key]):
            raise GuardError("park.%s %r is not an absolute path of plain characters; the guard was not armed"
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
        "version": STATE_VERSION, "phase": PHASE_ARMED, "run_id": params["run_id"], "owner": owner,
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
        "armed_at": iso(now), "armed_epoch": round(now, 3), "renewed_at": None, "renewed_epoch": None,
        "renewals": 0, "ttl": ttl, "deadline": round(now + ttl, 3), "deadline_at": iso(round(now + ttl, 3)),
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
    GuardError before anything is written when a source is missing or another run's guard is armed.
    """
    unit = params["unit"]
    for what in ("state_dir", "lib_dir", "python"):
        _check_path(what, params[what])
    statefile = state_path(params["state_dir"], unit)
    now = clock()
    existing = read_state(statefile)
    if existing and existing.get("run_id") != params["run_id"]:
        raise GuardError("a guard for %s is armed by another run: %s (phase %s, deadline %s); nothing was changed. "
                         "Confirm it (state=confirmed, force=true) only once that run is known to be dead."
                         % (unit, _lock.describe(dict(existing.get("owner", {}), run_id=existing.get("run_id"))),
                            existing.get("phase"), existing.get("deadline_at")), state=existing)
    if existing and existing.get("phase") != PHASE_ARMED:
        raise GuardError("the guard for %s is %s since %s; it cannot be re-armed now"
                         % (unit, existing.get("phase"), existing.get("restoring_since")), state=existing)
    state = build_state(_take_copies(params, check_mode), now)
    if existing:
        state["armed_at"], state["armed_epoch"] = existing["armed_at"], existing["armed_epoch"]
        state["renewed_at"], state["renewed_epoch"] = iso(now), round(now, 3)
        state["renewals"] = existing.get("renewals", 0) + 1
    written = install_library(params["lib_dir"], check_mode)
    boot_path = install_boot_unit(params["state_dir"], params["lib_dir"], params["python"],
                                  params.get("unit_dir"), check_mode)
    result = {"changed": bool(written or boot_path) or _comparable(existing) != _comparable(state) or bool(existing),
              "statefile": statefile, "guard": state,
              "library": {"dir": params["lib_dir"], "written": written},
              "boot_unit": {"name": boot_instance(unit), "written": boot_path, "enabled": None},
              "diff": {"before": summary(existing), "after": summary(state)}}
    if check_mode:
        result["watcher"] = watcher_state(run_command_, unit)
        return result
    if boot_path:
        _run(["systemctl", "daemon-reload"], "systemctl daemon-reload (boot unit written)", run_command_)
    rc, out, _err = run_command_(["systemctl", "is-enabled", boot_instance(unit)])
    if rc != 0 or out.strip() != "enabled":
        _run(["systemctl", "enable", boot_instance(unit)], "enabling %s" % boot_instance(unit), run_command_)
        result["changed"] = True
    result["boot_unit"]["enabled"] = True
    guard_dir = os.path.dirname(statefile)
    _ensure_dir(params["state_dir"], 0o755)
    _ensure_dir(guard_dir, 0o700)
    with _lock.flocked(_flock_path(statefile)):
        again = read_state(statefile)
        if (again or {}).get("run_id") not in (None, params["run_id"]) or \
                (again and again.get("phase") != PHASE_ARMED):
            raise GuardError("the guard for %s changed while arming (run %s, phase %s); nothing was changed"
                             % (unit, again.get("run_id"), again.get("phase")), state=again)
        _write_state(statefile, state)
    _renew_lock(state, state["ttl"])
    watcher = watcher_state(run_command_, unit)
    if written or not watcher["active"]:
        try:
            start_watcher(run_command_, unit, statefile, params["lib_dir"], params["python"],
                          state["timings"]["poll"], params["run_id"], systemd_run)
        except GuardError as exc:
            if not existing:
                _files.remove(statefile)
            raise GuardError("%s; the guard is %s, nothing was stopped" % (
                exc.msg, "not armed" if not existing else "armed without a watcher"))
        result["changed"] = True
        watcher = watcher_state(run_command_, unit)
        watcher["started"] = True
    result["watcher"] = watcher
    return result


def _renew_lock(state, ttl):
    """Move the lock's deadline past the guard's when this run holds it; whether it did."""
    if not state.get("lock_path"):
        return False
    try:
        _lock.renew(state["lock_path"], state["run_id"], ttl + LOCK_MARGIN)
    except (_lock.LockError, OSError):
        return False
    return True


def renew(statefile, run_id, ttl, clock=time.time):
    """Extend the guard's deadline to now + ``ttl`` seconds (and the lock's, when this run holds it).

    Tiny and stdlib on purpose: modules that wait on the host (engine_ready, spec_bench) can call it
    between their polls. Returns the new state (plus ``lock_renewed``). Raises GuardError when no guard
    is armed, another run armed it, or it is already restoring.
    """
    now = clock()
    with _lock.flocked(_flock_path(statefile)):
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
        _write_state(statefile, state)
    return dict(state, lock_renewed=_renew_lock(state, float(ttl)))


def confirm(statefile, run_id, run_command_, force=False, history=None, unit=None, check_mode=False):
    """Disarm: remove the state file and stop the watcher. Idempotent; ``{"changed", "guard"}``.

    Raises GuardError when the guard already restored (or is restoring) for this run: the candidate
    the controller wants to confirm is not what runs.
    """
    with _lock.flocked(_flock_path(statefile)) if os.path.isdir(os.path.dirname(statefile)) \
            else contextlib.nullcontext():
        state = read_state(statefile)
        if state is None:
            rec = last_record(history, unit, run_id) if history and run_id else None
            if rec:
                raise GuardError("the guard already ended run %s: %s at %s (%s); nothing to confirm"
                                 % (run_id, rec.get("outcome"), rec.get("restored_at") or rec.get("at"),
                                    rec.get("reason")), record=rec)
            return {"changed": False, "guard": None}
        if state.get("run_id") != run_id and not force:
            raise GuardError("the guard for %s belongs to run %s, not %s; nothing was changed (force=true "
                             "disarms it)" % (state.get("unit"), state.get("run_id"), run_id), state=state)
        if state.get("phase") != PHASE_ARMED:
            raise GuardError("the guard for %s is %s since %s: the previous configuration is being restored; "
                             "nothing to confirm" % (state.get("unit"), state.get("phase"),
                                                     state.get("restoring_since")), state=state)
        if not check_mode:
            _files.remove(statefile)
    if not check_mode:
        # Gone already is fine: the watcher exits by itself within one poll once the file is gone.
        run_command_(["systemctl", "stop", state.get("watcher") or watcher_name(state["unit"])])
    return {"changed": True, "guard": state}


def status(state_dir, unit, run_command_, history=None):
    statefile = state_path(state_dir, unit)
    state = read_state(statefile)
    now = time.time()
    rc, out, _err = run_command_(["systemctl", "is-enabled", boot_instance(unit)])
    deadline = state.get("deadline") if state else None
    return {"statefile": statefile, "armed": bool(state) and state.get("phase") == PHASE_ARMED,
            "phase": state.get("phase") if state else None, "guard": state,
            "deadline": deadline, "deadline_at": iso(deadline) if deadline else None,
            "remaining": round(deadline - now, 1) if deadline else None,
            "owner": dict(state.get("owner", {}), run_id=state.get("run_id")) if state else None,
            "watcher": watcher_state(run_command_, unit),
            "boot_unit": {"name": boot_instance(unit), "enabled": rc == 0 and out.strip() == "enabled"},
            "last_record": last_record(history or os.path.join(state_dir, "history.jsonl"), unit)}


# ---------------------------------------------------------------- restore

def _api_key(ready):
    path = ready.get("api_key_file")
    if not path:
        return None
    with open(path) as handle:
        lines = [line.strip() for line in handle if line.strip() and not line.lstrip().startswith("#")]
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip().replace("export ", "") == ready.get("api_key_var", _engine.get(_engine.DEFAULT).API_KEY_VAR):
            return value.strip().strip("'\"")
    if len(lines) == 1 and "=" not in lines[0]:
        return lines[0]
    return None


def _verify(state):
    """Read the restore sources and check their sha256; ``(unit bytes or None, [(dest, bytes)])``."""
    restore = state["restore"]
    data = None
    if restore["source"] != "absent":
        data = _read_bytes(restore["source"])
        if data is None:
            raise GuardError("the snapshot %s is gone" % restore["source"])
        digest = hashlib.sha256(data).hexdigest()
        if digest != restore["sha256"]:
            raise GuardError("the snapshot %s changed since the guard was armed (sha256 %s, armed with %s)"
                             % (restore["source"], digest, restore["sha256"]))
    baselines = []
    for item in state.get("baseline_files", []):
        blob = _read_bytes(item["src"])
        if blob is None or hashlib.sha256(blob).hexdigest() != item["sha256"]:
            raise GuardError("the baseline copy %s is %s since the guard was armed"
                             % (item["src"], "gone" if blob is None else "changed"))
        baselines.append((item["dest"], blob))
    return data, baselines


def _timeout(reclaim, key):
    value = (reclaim or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else RECLAIM_TIMEOUTS[key]


def _free_gpus(state, run_command_, reclaim_kw):
    """Stop the unit and free its GPUs with _reclaim; never raises. The summary, and whether the unit
    is stopped (a start of a still-active candidate would be a no-op that looks like success)."""
    params = dict(state.get("reclaim") or {})
    params["units"] = list(params.get("units") or [state["unit"]])
    kwargs = {"warn": lambda text: log("reclaim: %s" % text, 4)}
    kwargs.update(reclaim_kw or {})
    try:
        res = _reclaim.reclaim(params, run_command_, **kwargs)
        out = {"ok": True, "elapsed": res.get("elapsed")}
    except _reclaim.ReclaimError as exc:
        res = exc.result or {}
        out = {"ok": False, "error": exc.msg, "elapsed": res.get("elapsed")}
        log("reclaim failed: %s" % exc.msg, 3)
    out["signalled"] = [{k: s.get(k) for k in ("pid", "name", "mib", "signal")} for s in res.get("signalled", [])]
    out["units"] = [{k: u.get(k) for k in ("name", "active_before", "action", "killed")} for u in res.get("units", [])]
    out["gpus"] = [{k: g.get(k) for k in ("index", "used_mib_before", "used_mib_after")} for g in res.get("gpus", [])]
    try:
        stop = _systemd.stop_unit(run_command_, state["unit"], _timeout(params, "stop_timeout"))
        out["stopped"] = True
        if stop["was_active"]:
            out["units"].append({"name": state["unit"], "action": "stopped", "killed": stop["killed"]})
    except _systemd.SystemdError as exc:
        out["stopped"] = False
        out["stop_error"] = str(exc)
    return out


def _remove_parked_candidate(state, run_command_):
    """Remove the unit file (and secrets file) of the candidate that ran beside a parked baseline."""
    park = state.get("park")
    if not park:
        return
    for path in (park["unit_path"], park.get("env_file")):
        if path and os.path.lexists(path):
            if path == park["unit_path"]:
                if not _unitfile.written_by_us(path):
                    log("left %s as it is: the collection did not write it (no %r header)"
                        % (path, _unitfile.MANAGED_HEADER), 3)
                    continue
                run_command_(["systemctl", "disable", park["unit"]])  # best effort, like _put_back
            os.unlink(path)
            log("removed %s, the candidate beside the parked baseline" % path)


def _put_back(state, data, baselines, run_command_):
    _remove_parked_candidate(state, run_command_)
    unit_path = state["unit_path"]
    if data is None:
        if os.path.lexists(unit_path):
            run_command_(["systemctl", "disable", state["unit"]])  # its [Install] links; best effort
            os.unlink(unit_path)
            log("removed the candidate %s: there was no unit before" % unit_path)
    else:
        _lock.write_bytes_atomic(unit_path, data, 0o644)
        log("put back %s from %s (sha256 %s)" % (unit_path, state["restore"]["source"], state["restore"]["sha256"]))
    for dest, blob in baselines:
        _lock.write_bytes_atomic(dest, blob, STATE_FILE_MODE)  # 0600, as _record writes baselines
        log("put back %s" % dest)


def wait_ready(state, run_command_, clock=time.time, sleep=time.sleep):
    """Poll until the service answers (``probe``), the unit fails, or the ready timeout passes.
    ``(ready, detail)``."""
    ready = state["ready"]
    unit = state["unit"]
    end = clock() + ready["timeout"]
    interval = max(0.05, state.get("timings", {}).get("poll", 1.0))
    api_key = _api_key(ready)
    last_progress = clock()
    detail = ""
    while True:
        active = ""
        try:
            active = _systemd.show(run_command_, unit, ["ActiveState"]).get("ActiveState", "")
        except _systemd.SystemdError as exc:
            detail = str(exc)
        if ready.get("url"):
            ok, detail = probe(ready, api_key, min(REQUEST_TIMEOUT, max(1.0, end - clock())))
        else:
            ok, detail = active == "active", "no ready URL: ActiveState=%s" % active
        if ok:
            return True, detail
        if active == "failed":
            return False, "%s failed while starting (%s); see journalctl -u %s" % (unit, detail, unit)
        if clock() >= end:
            return False, "%s did not answer within %.0f s (%s, ActiveState=%s)" % (unit, ready["timeout"], detail, active)
        if clock() - last_progress >= PROGRESS_EVERY:
            log("waiting for %s: %s, ActiveState=%s" % (unit, detail, active))
            last_progress = clock()
        sleep(interval)


def _open_url(url, method="GET", data=None, headers=None, timeout=REQUEST_TIMEOUT, validate_certs=True,
              follow_redirects="none"):
    """The part of ansible's open_url that ``_park.request`` uses, over urllib (no proxies, no redirects).
    ``validate_certs`` and ``follow_redirects`` are accepted for its signature; redirects are never followed."""
    del validate_certs, follow_redirects
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    return opener.open(urllib.request.Request(url, data=data, headers=headers or {}, method=method), timeout=timeout)


def wake_parked(state, run_command_, clock=time.time, sleep=time.sleep, reclaim_kw=None):
    """Stop the candidate beside the parked baseline (kept), remove its unit, wake the baseline and wait
    until it answers. ``(ok, detail, record)``; never raises for the engine's or systemd's failures."""
    park = state["park"]
    unit = state["unit"]
    rec = {"candidate": park["unit"], "woke": False, "wake_seconds": None}
    candidate = dict(state, unit=park["unit"],
                     reclaim=dict(state.get("reclaim") or {}, units=[park["unit"]], keep_units=[unit]))
    freed = _free_gpus(candidate, run_command_, reclaim_kw)
    rec["reclaim"] = freed
    if not freed.get("stopped"):
        return False, "the candidate %s could not be stopped (%s)" % (park["unit"], freed.get("stop_error")), rec
    try:
        _remove_parked_candidate(state, run_command_)
        _run(["systemctl", "daemon-reload"], None, run_command_)
    except (OSError, GuardError) as exc:
        return False, "removing the candidate %s failed: %s" % (park["unit"], getattr(exc, "msg", exc)), rec
    run_command_(["systemctl", "reset-failed", park["unit"]])  # rc 1 when it never failed: fine
    api_key = _api_key(state["ready"])
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    try:
        parking = _park.Parking(run_command_, _open_url, state["ready"]["engine"], unit, state["ready"]["url"],
                                park["wake_timeout"], headers)
    except _systemd.SystemdError as exc:
        return False, "reading %s failed: %s" % (unit, exc), rec
    if not parking.active:
        return False, "%s is not running any more: there is nothing to wake" % unit, rec
    try:
        seconds = parking.wake()
    except _park.ParkError as exc:
        return False, str(exc), rec
    rec.update(woke=True, wake_seconds=seconds)
    log("woke the parked %s in %.2f s; waiting until it answers" % (unit, seconds))
    ok, detail = wait_ready(state, run_command_, clock, sleep)
    return ok, detail, rec


def _boot_time():
    try:
        with open("/proc/uptime") as handle:
            return time.time() - float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def restore(statefile, state, why, run_command_=run_command, clock=time.time, sleep=time.sleep, reclaim_kw=None):
    """Put the previous configuration back (see the module docstring). Returns the exit status:
    0 restored and answering (or, at boot, queued), EXIT_RESTORE_FAILED otherwise (recorded)."""
    unit = state["unit"]
    started = clock()
    boot = why == "boot"
    fault = state.get("deadline") if not boot else _boot_time()
    heartbeat = state.get("renewed_epoch") or state.get("armed_epoch")
    rec = {"host": socket.gethostname(), "unit": unit, "run_id": state.get("run_id"),
           "label": state.get("owner", {}).get("label"), "owner": state.get("owner", {}), "why": why,
           "decision": "rollback", "speedup": None, "armed_at": state.get("armed_at"),
           "last_heartbeat_at": iso(heartbeat), "deadline": state.get("deadline_at"), "fault_at": iso(fault),
           "guard_started_at": iso(started), "restore_source": state["restore"].get("source"),
           "restored_at": None, "ready_at": None, "seconds_deadline_to_ready": None,
           "seconds_fault_to_ready": None, "attempt": state.get("attempts")}
    log("restoring %s for run %s (why: %s, deadline %s, last heartbeat %s)"
        % (unit, state.get("run_id"), why, state.get("deadline_at"), iso(heartbeat)))

    def finish(ok, reason):
        now = clock()
        rec.update(at=iso(now), outcome=OUTCOME_RESTORED if ok else OUTCOME_FAILED, reason=reason,
                   seconds_total=round(now - started, 3))
        try:
            append_history(state["history"], rec)
        except OSError as exc:
            log("could not append to %s: %s" % (state["history"], exc), 3)
        if state.get("lock_path"):
            try:
                if ok:
                    _lock.release(state["lock_path"], state["run_id"])
                else:
                    _lock.annotate(state["lock_path"], state["run_id"],
                                   {"outcome": OUTCOME_FAILED, "at": iso(now), "msg": reason})
            except OSError as exc:
                log("lock %s: %s" % (state["lock_path"], exc), 3)
        with _lock.flocked(_flock_path(statefile)):
            _files.remove(statefile)
        log("%s: %s" % (rec["outcome"], reason), 6 if ok else 3)
        return 0 if ok else EXIT_RESTORE_FAILED

    try:
        data, baselines = _verify(state)
    except GuardError as exc:
        return finish(False, "%s; nothing was stopped or overwritten: the candidate stays as it is, and the "
                             "previous unit must be restored by hand" % exc.msg)
    if state.get("lock_path") and not boot:
        budget = sum(_timeout(state["reclaim"], key) for key in RECLAIM_TIMEOUTS) + state["ready"]["timeout"]
        _renew_lock(state, budget + RESTORE_MARGIN - LOCK_MARGIN)
    notes = []
    if not boot and state.get("park"):
        ok, detail, rec["park"] = wake_parked(state, run_command_, clock, sleep, reclaim_kw)
        if ok:
            _ready_times(rec, state, fault, clock())
            return finish(True, "the controller did not confirm run %s by its deadline: the candidate %s was "
                                "stopped and the parked baseline woken; it answers (%s)"
                          % (state.get("run_id"), state["park"]["unit"], detail))
        log("waking the parked %s did not bring it back (%s): restarting it" % (unit, detail), 4)
        notes.append("waking the parked baseline failed (%s), so it was restarted" % detail)
    if not boot:
        freed = _free_gpus(state, run_command_, reclaim_kw)
        rec["reclaim"] = freed
        log("stopped %s and reclaimed its GPUs: %s" % (unit, "ok" if freed["ok"] else freed.get("error")))
        if not freed["ok"]:
            notes.append("reclaim failed: %s" % freed.get("error"))
    try:
        _put_back(state, data, baselines, run_command_)
        rec["restored_at"] = iso(clock())
        _run(["systemctl", "daemon-reload"], None, run_command_)
        run_command_(["systemctl", "reset-failed", unit])  # rc 1 when it never failed: fine
    except (OSError, GuardError) as exc:
        return finish(False, "restoring the files failed: %s" % getattr(exc, "msg", exc))
    if not boot and not rec["reclaim"].get("stopped"):
        return finish(False, "%s could not be stopped (%s); the previous unit file is back on disk, restart "
                             "the unit once it stops" % (unit, rec["reclaim"].get("stop_error")))
    if data is None:
        return finish(True, "there was no %s before the switch: the candidate was removed" % unit)
    try:
        _run(["systemctl", "start", "--no-block", unit], None, run_command_)
    except GuardError as exc:
        return finish(False, exc.msg)
    if boot:
        return finish(True, "reboot during an unconfirmed switch: the previous unit file was put back "
                            "before %s started; its start is queued" % unit)
    log("started %s; waiting until it answers (at most %.0f s)" % (unit, state["ready"]["timeout"]))
    ok, detail = wait_ready(state, run_command_, clock, sleep)
    if ok:
        _ready_times(rec, state, fault, clock())
    reason = ("the controller did not confirm run %s by its deadline: the previous configuration was restored "
              "and answers (%s)" % (state.get("run_id"), detail)) if ok else \
        "the previous configuration was put back but does not answer: %s" % detail
    if notes:
        reason += "; " + "; ".join(notes)
    return finish(ok, reason)


def _ready_times(rec, state, fault, now):
    rec["ready_at"] = iso(now)
    if state.get("deadline"):
        rec["seconds_deadline_to_ready"] = round(now - state["deadline"], 3)
    if fault:
        rec["seconds_fault_to_ready"] = round(now - fault, 3)


def _claim(statefile, why, clock, when_due=False):
    """Under the flock: mark the guard as restoring. ``(state, claimed)``; ``(None, False)`` when no
    guard is armed (confirmed), ``(state, False)`` when ``when_due`` and a renew moved the deadline."""
    with _lock.flocked(_flock_path(statefile)):
        state = read_state(statefile)
        if state is None:
            return None, False
        if state.get("phase") == PHASE_RESTORING:
            why = why if why in ("boot", "manual") else "resume"
        elif when_due and clock() < state["deadline"]:
            return state, False
        state.update(phase=PHASE_RESTORING, restoring_since=state.get("restoring_since") or iso(clock()),
                     why=why, attempts=state.get("attempts", 0) + 1)
        _write_state(statefile, state)
        return state, True


def watch(statefile, poll=1.0, run_command_=run_command, clock=time.time, sleep=time.sleep, reclaim_kw=None):
    """The watcher's loop: exit 0 once the state file is gone; restore once the deadline passed."""
    seen = None
    log("watching %s" % statefile)
    while True:
        try:
            state = read_state(statefile)
            if state is not None and (state.get("phase") == PHASE_RESTORING or clock() >= state["deadline"]):
                state, claimed = _claim(statefile, "deadline", clock, when_due=True)
            else:
                claimed = False
        except GuardError as exc:
            log(exc.msg, 3)
            return 1
        if state is None:
            log("the guard was confirmed (%s is gone); exiting" % statefile)
            return 0
        if claimed:
            if state["attempts"] > MAX_ATTEMPTS:
                reason = "%d restore attempts did not finish (the watcher crashed); restore by hand" % MAX_ATTEMPTS
                append_history(state["history"], {"at": iso(clock()), "unit": state["unit"], "run_id": state["run_id"],
                                                  "outcome": OUTCOME_FAILED, "why": state["why"], "reason": reason})
                _files.remove(statefile)
                log(reason, 3)
                return EXIT_RESTORE_FAILED
            return restore(statefile, state, state["why"], run_command_, clock, sleep, reclaim_kw)
        now = clock()
        if state.get("deadline") != seen:
            seen = state.get("deadline")
            log("run %s armed: deadline %s (in %.0f s)"
                % (state.get("run_id"), state.get("deadline_at"), state["deadline"] - now))
        sleep(max(0.05, min(poll, state["deadline"] - now)))


def boot(statefile, run_command_=run_command, clock=time.time):
    """The boot unit's ExecStart: restore the files before the unit starts; queue its start."""
    state, _claimed = _claim(statefile, "boot", clock)
    if state is None:
        return 0
    return restore(statefile, state, "boot", run_command_, clock)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m %s._guard" % PACKAGE,
                                     description="llmops.specdec switch guard (docs/guard.md)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("watch", "poll the state file; restore when its deadline passes"),
                       ("boot", "restore the files at boot, before the unit starts"),
                       ("restore", "restore now, whatever the deadline (by hand)")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("statefile")
        if name == "watch":
            cmd.add_argument("--poll", type=float, default=1.0)
    renew_cmd = sub.add_parser("renew", help="extend the deadline: STATEFILE RUN_ID TTL")
    renew_cmd.add_argument("statefile")
    renew_cmd.add_argument("run_id")
    renew_cmd.add_argument("ttl", type=float)
    opts = parser.parse_args(argv)
    if opts.command == "watch":
        return watch(opts.statefile, opts.poll)
    if opts.command == "boot":
        return boot(opts.statefile)
    if opts.command == "restore":
        state, _claimed = _claim(opts.statefile, "manual", time.time)
        return 0 if state is None else restore(opts.statefile, state, "manual")
    try:
        state = renew(opts.statefile, opts.run_id, opts.ttl)
    except GuardError as exc:
        sys.stderr.write(exc.msg + "\n")
        return 1
    sys.stdout.write(json.dumps({"deadline": state["deadline"], "deadline_at": state["deadline_at"]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
