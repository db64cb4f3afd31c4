# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guard on the host: restore the previous unit unless the controller confirmed the switch in time.

This file is what runs on the host (``python3 -m ...._guard watch|boot|restore|renew STATEFILE``, from the
copy ``_guard_lease.install_library`` wrote under ``lib_dir``); the state file it reads is ``_guard_state``'s,
armed, renewed and confirmed by the controller through ``_guard_lease`` (docs/guard.md).

The WATCHER polls the state file: gone (confirmed) -> exit 0; deadline passed -> RESTORE.

RESTORE (also run at boot, see BOOT below) is ``_restore``'s, the one restore that the controller's
rollback runs too: check the restore sources' sha256 first (a mismatch
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
pynvml through ``_nvml``); none of them may import Ansible (``_guard_lease.payload`` refuses it).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _files, _guard_state, _lock, _park, _restore, _systemd

# The package of the guard's files, in the collection and under lib_dir on the host (_guard_lease installs them).
PACKAGE = "ansible_collections.llmops.specdec.plugins.module_utils"
# What answers "ready" per engine (the rule of _ready, without its Ansible HTTP stack): the adapters' paths.
HEALTH_PATH = dict((name, mod.HEALTH_PATH) for name, mod in _engine.ENGINES.items())
REQUEST_TIMEOUT = 25.0
MAX_ATTEMPTS = 3         # restores started (the watcher restarted after a crash resumes one)
COMMAND_TIMEOUT = 120.0  # any one systemctl call
RESTORE_MARGIN = 120.0   # beyond stop + reclaim + ready timeouts, while a restore holds the lock
PROGRESS_EVERY = 30.0    # a journal line this often while waiting for the service
# Only to size the restore's time budget; _reclaim fills in its own defaults for what is not given.
RECLAIM_TIMEOUTS = {"stop_timeout": 30.0, "term_timeout": 10.0, "verify_timeout": 30.0}


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
    """Read the restore sources and check their sha256 (``_restore.verify``); ``(unit bytes or None, [(dest, bytes)])``."""
    try:
        return _restore.verify(state)
    except _restore.RestoreError as exc:
        raise _guard_state.GuardError(exc.msg)


def _timeout(reclaim, key):
    value = (reclaim or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else RECLAIM_TIMEOUTS[key]


def _free_gpus(state, run_command_, reclaim_kw):
    """``_restore.free_gpus`` (the one restore's step), logging to the journal."""
    return _restore.free_gpus(state, run_command_, reclaim_kw, log)


def _remove_parked_candidate(state, run_command_):
    """``_restore.remove_parked_candidate``, logging to the journal."""
    _restore.remove_parked_candidate(state, run_command_, log)


def _put_back(state, data, baselines, run_command_):
    """``_restore.put_back``, logging to the journal."""
    return _restore.put_back(state, data, baselines, run_command_, log)


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
        _guard_state.checked_run(["systemctl", "daemon-reload"], None, run_command_)
    except (OSError, _guard_state.GuardError) as exc:
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


def _boot_time(proc="/proc", clock=time.time):
    """When this system booted: when its PID 1 started. /proc/uptime alone is the kernel's, which in a container
    (systemd-nspawn, the mock hosts) is the machine's boot, not this system's; PID 1's start time (ticks since the
    kernel's boot, /proc/1/stat field 22) is this system's on a host and in a container alike."""
    try:
        with open(os.path.join(proc, "uptime")) as handle:
            kernel = clock() - float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(os.path.join(proc, "1", "stat")) as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        return kernel + ticks / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return kernel


def restore(statefile, state, why, run_command_=run_command, clock=time.time, sleep=time.sleep, reclaim_kw=None):
    """Put the previous configuration back (see the module docstring). Returns the exit status:
    0 restored and answering (or, at boot, queued), _guard_state.EXIT_RESTORE_FAILED otherwise (recorded)."""
    unit = state["unit"]
    started = clock()
    boot = why == "boot"
    # The fault: the deadline passed, the host booted, or (a following worker) its group broke just now.
    fault = _boot_time() if boot else (started if why == "group_broke" else state.get("deadline"))
    heartbeat = state.get("renewed_epoch") or state.get("armed_epoch")
    rec = {"host": socket.gethostname(), "unit": unit, "run_id": state.get("run_id"),
           "label": state.get("owner", {}).get("label"), "owner": state.get("owner", {}), "why": why,
           "decision": "rollback", "speedup": None, "armed_at": state.get("armed_at"),
           "last_heartbeat_at": _guard_state.iso(heartbeat), "deadline": state.get("deadline_at"), "fault_at": _guard_state.iso(fault),
           "guard_started_at": _guard_state.iso(started), "restore_source": state["restore"].get("source"),
           "restored_at": None, "ready_at": None, "seconds_deadline_to_ready": None,
           "seconds_fault_to_ready": None, "attempt": state.get("attempts")}
    log("restoring %s for run %s (why: %s, deadline %s, last heartbeat %s)"
        % (unit, state.get("run_id"), why, state.get("deadline_at"), _guard_state.iso(heartbeat)))

    def finish(ok, reason, outcome=None):
        now = clock()
        outcome = outcome or (_guard_state.OUTCOME_RESTORED if ok else _guard_state.OUTCOME_FAILED)
        rec.update(at=_guard_state.iso(now), outcome=outcome, reason=reason, seconds_total=round(now - started, 3))
        try:
            _guard_state.append_history(state["history"], rec)
        except OSError as exc:
            log("could not append to %s: %s" % (state["history"], exc), 3)
        if state.get("lock_path"):
            try:
                if ok:
                    _lock.release(state["lock_path"], state["run_id"])
                else:
                    _lock.annotate(state["lock_path"], state["run_id"],
                                   {"outcome": _guard_state.OUTCOME_FAILED, "at": _guard_state.iso(now), "msg": reason})
            except OSError as exc:
                log("lock %s: %s" % (state["lock_path"], exc), 3)
        with _lock.flocked(_guard_state.flock_path(statefile)):
            _files.remove(statefile)
        log("%s: %s" % (rec["outcome"], reason), 6 if ok else 3)
        return 0 if ok else _guard_state.EXIT_RESTORE_FAILED

    # A serving group's worker in follow mode (docs/group.md) keeps what runs when its group held: its head was
    # confirmed, and restoring this node alone would split the group. At boot nothing held: it restores.
    if state.get("follow") and not boot:
        held, detail = _group_held(state, run_command_)
        if held:
            rec["decision"] = "keep"
            return finish(True, "the controller did not confirm run %s by its deadline, but this node's group held "
                                "(%s): its head kept the candidate, so this node kept it too" % (state.get("run_id"), detail),
                          _guard_state.OUTCOME_FOLLOWED)
        log("following its group's head, and the group broke (%s): restoring" % detail, 4)
        rec["follow"] = dict(state["follow"], broke=detail)
    try:
        data, baselines = _verify(state)
    except _guard_state.GuardError as exc:
        return finish(False, "%s; nothing was stopped or overwritten: the candidate stays as it is, and the "
                             "previous unit must be restored by hand" % exc.msg)
    if state.get("lock_path") and not boot:
        budget = sum(_timeout(state["reclaim"], key) for key in RECLAIM_TIMEOUTS) + state["ready"]["timeout"]
        _guard_state.renew_lock(state, budget + RESTORE_MARGIN - _guard_state.LOCK_MARGIN)
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
    # The one restore (_restore, which the controller's rollback runs too): stop and free the GPUs (not at
    # boot: nothing runs yet), put the files back, reset-failed, daemon-reload, start --no-block.
    error = None
    try:
        done = _restore.restore(state, run_command_, free=not boot, require_stopped=not boot, no_block=True,
                                reclaim_kw=reclaim_kw, log=log, clock=clock, sources=(data, baselines))
    except _restore.RestoreError as exc:
        done, error = exc.result, exc
    if done.get("reclaim") is not None:
        rec["reclaim"] = done["reclaim"]
        if not done["reclaim"]["ok"]:
            notes.append("reclaim failed: %s" % done["reclaim"].get("error"))
    if done.get("restored_at") is not None:
        rec["restored_at"] = _guard_state.iso(done["restored_at"])
    if error is not None:
        return finish(False, error.msg)
    if data is None:
        return finish(True, "there was no %s before the switch: the candidate was removed" % unit)
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


def _group_held(state, run_command_):
    """Whether a following node's group held (``_guard_state.group_held``), from systemd now."""
    try:
        shown = _systemd.show(run_command_, state["unit"], ["ActiveState", "MainPID", "NRestarts"])
    except _systemd.SystemdError as exc:
        return False, "systemd did not answer: %s" % exc
    return _guard_state.group_held(state["follow"], {"active_state": shown.get("ActiveState"),
                                                     "main_pid": shown.get("MainPID"),
                                                     "n_restarts": shown.get("NRestarts")})


def _ready_times(rec, state, fault, now):
    rec["ready_at"] = _guard_state.iso(now)
    if state.get("deadline"):
        rec["seconds_deadline_to_ready"] = round(now - state["deadline"], 3)
    if fault:
        rec["seconds_fault_to_ready"] = round(now - fault, 3)


def _claim(statefile, why, clock, when_due=False):
    """Under the flock: mark the guard as restoring. ``(state, claimed)``; ``(None, False)`` when no
    guard is armed (confirmed), ``(state, False)`` when ``when_due`` and a _guard_state.renew moved the deadline."""
    with _lock.flocked(_guard_state.flock_path(statefile)):
        state = _guard_state.read_state(statefile)
        if state is None:
            return None, False
        if state.get("phase") == _guard_state.PHASE_RESTORING:
            why = why if why in ("boot", "manual") else "resume"
        elif when_due and clock() < state["deadline"]:
            return state, False
        state.update(phase=_guard_state.PHASE_RESTORING, restoring_since=state.get("restoring_since") or _guard_state.iso(clock()),
                     why=why, attempts=state.get("attempts", 0) + 1)
        _guard_state.write_state(statefile, state)
        return state, True


def watch(statefile, poll=1.0, run_command_=run_command, clock=time.time, sleep=time.sleep, reclaim_kw=None):
    """The watcher's loop: exit 0 once the state file is gone; restore once the deadline passed."""
    seen = None
    log("watching %s" % statefile)
    while True:
        try:
            state = _guard_state.read_state(statefile)
            if state is not None and (state.get("phase") == _guard_state.PHASE_RESTORING or clock() >= state["deadline"]):
                state, claimed = _claim(statefile, "deadline", clock, when_due=True)
            elif state is not None and state.get("follow") and not _group_held(state, run_command_)[0]:
                # A following worker whose group broke (its head restored) restores now, not at its deadline:
                # its restarted engine would only fail the restored head's rendezvous until then.
                state, claimed = _claim(statefile, "group_broke", clock)
            else:
                claimed = False
        except _guard_state.GuardError as exc:
            log(exc.msg, 3)
            return 1
        if state is None:
            log("the guard was confirmed (%s is gone); exiting" % statefile)
            return 0
        if claimed:
            if state["attempts"] > MAX_ATTEMPTS:
                reason = "%d restore attempts did not finish (the watcher crashed); restore by hand" % MAX_ATTEMPTS
                _guard_state.append_history(state["history"], {"at": _guard_state.iso(clock()), "unit": state["unit"], "run_id": state["run_id"],
                                                               "outcome": _guard_state.OUTCOME_FAILED, "why": state["why"], "reason": reason})
                _files.remove(statefile)
                log(reason, 3)
                return _guard_state.EXIT_RESTORE_FAILED
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
        state = _guard_state.renew(opts.statefile, opts.run_id, opts.ttl)
    except _guard_state.GuardError as exc:
        sys.stderr.write(exc.msg + "\n")
        return 1
    sys.stdout.write(json.dumps({"deadline": state["deadline"], "deadline_at": state["deadline_at"]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
