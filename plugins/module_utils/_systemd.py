# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and stop a systemd unit through ``systemctl`` (argv lists only, bounded waits).

Contract (docs/architecture.md): ``show(run_command, unit, props) -> dict``,
``stop(run_command, unit, timeout) -> bool`` and ``cgroup_pids(control_group) -> list[int]``.
``run_command`` is ``module.run_command``: it takes an argv list and returns ``(rc, stdout, stderr)``.
"""
from __future__ import annotations

import os
import shlex
import time

# States in which a unit has no processes left that systemd still manages.
STOPPED_STATES = frozenset(("inactive", "failed"))
# Interval between ActiveState polls while waiting for a stop: short, since every poll is cheap.
POLL_INTERVAL = 0.02
# After the grace expires and SIGKILL was sent to the whole cgroup, how long to wait for systemd to
# notice (the kernel reaps within milliseconds; this only bounds a wedged systemd).
KILL_WAIT = 5.0
# Where the unit's control group may be mounted: unified (v2), hybrid (v2 beside v1), legacy (v1).
CGROUP_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd")


class SystemdError(Exception):
    """systemctl failed or a unit could not be stopped within its bounds."""


def show(run_command, unit, props):
    """Return ``{prop: value}`` (strings) for ``unit`` from ``systemctl show``.

    A unit that does not exist is not an error here: systemd answers ``LoadState=not-found``.
    """
    argv = ["systemctl", "show", unit, "--property=" + ",".join(props)]
    rc, out, err = run_command(argv)
    if rc != 0:
        raise SystemdError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out).strip()))
    values = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    return values


def environment(value):
    """``{name: value}`` from a unit's ``Environment`` property as ``systemctl show`` prints it.

    systemd prints the assignments separated by spaces and quotes one that contains a space or a
    quote (``"A=x y"``), C-style; older versions print them bare. A later assignment wins, as in
    systemd. ``EnvironmentFile=`` contents are not part of this property.
    """
    try:
        items = shlex.split(value)
    except ValueError:  # unbalanced quote in an unquoting systemd: take words as they are
        items = value.split()
    env = {}
    for item in items:
        name, sep, val = item.partition("=")
        if sep and name:
            env[name] = val
    return env


def active_state(run_command, unit):
    return show(run_command, unit, ["ActiveState"]).get("ActiveState", "")


def _wait_stopped(run_command, unit, deadline, clock, sleep):
    """Poll ActiveState until the unit is stopped or ``deadline`` passes; return the last state."""
    while True:
        state = active_state(run_command, unit)
        if state in STOPPED_STATES or clock() >= deadline:
            return state
        sleep(min(POLL_INTERVAL, max(0.0, deadline - clock())))


def stop_unit(run_command, unit, timeout, clock=time.monotonic, sleep=time.sleep):
    """Stop ``unit``: queue the stop, wait up to ``timeout`` s, then SIGKILL its whole cgroup.

    Returns ``{"was_active": bool, "killed": bool, "state": str}``. ``killed`` says that the grace
    expired and ``systemctl kill --signal=SIGKILL`` was needed. Raises SystemdError when the unit is
    still not stopped after that.
    """
    state = active_state(run_command, unit)
    if state in STOPPED_STATES or state == "":
        return {"was_active": False, "killed": False, "state": state}
    # --no-block: systemd runs the stop job itself; we bound the wait, not systemctl.
    rc, out, err = run_command(["systemctl", "stop", "--no-block", unit])
    if rc != 0:
        raise SystemdError("systemctl stop %s failed (rc=%s): %s" % (unit, rc, (err or out).strip()))
    state = _wait_stopped(run_command, unit, clock() + timeout, clock, sleep)
    killed = False
    if state not in STOPPED_STATES:
        killed = True
        rc, out, err = run_command(["systemctl", "kill", "--signal=SIGKILL", unit])
        if rc != 0:
            raise SystemdError("systemctl kill %s failed (rc=%s): %s" % (unit, rc, (err or out).strip()))
        state = _wait_stopped(run_command, unit, clock() + KILL_WAIT, clock, sleep)
        if state not in STOPPED_STATES:
            raise SystemdError("unit %s is still %s after SIGKILL" % (unit, state))
    return {"was_active": True, "killed": killed, "state": state}


def stop(run_command, unit, timeout):
    """Stop ``unit`` within ``timeout`` seconds (then SIGKILL); return whether it was active."""
    return stop_unit(run_command, unit, timeout)["was_active"]


def cgroup_pids(control_group, roots=CGROUP_ROOTS):
    """Pids in ``control_group`` and every cgroup below it (a unit may delegate sub-cgroups).

    ``control_group`` is the unit's ``ControlGroup`` property (``/system.slice/x.service``); an
    empty value (unit not running) gives ``[]``.
    """
    if not control_group:
        return []
    rel = control_group.lstrip("/")
    for root in roots:
        top = os.path.join(root, rel)
        if not os.path.isfile(os.path.join(top, "cgroup.procs")):
            continue
        pids = set()
        for dirpath, _dirs, files in os.walk(top):
            if "cgroup.procs" not in files:
                continue
            try:
                with open(os.path.join(dirpath, "cgroup.procs")) as handle:
                    pids.update(int(tok) for tok in handle.read().split())
            except OSError:
                continue  # the cgroup went away while we walked it
        return sorted(pids)
    return []
