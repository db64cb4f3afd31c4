# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parking a running engine instead of stopping it (issue 18; docs/park.md): its GPU memory given back
without the process exiting, so a lost experiment wakes it in seconds instead of loading it again.

- ``PROTOCOLS``: per engine, the flag that makes parking free memory, the routes that park, wake and
  ask, as the pinned engines define them (each adapter's ``PARK``, ``_engine``; the mock engines are held
  to them by tests/contracts/test_park_contracts.py).
- ``park_problem()`` / ``cpu_memory_problem()``: why this engine may not be parked (None: it may), read
  from the running process itself (its argv and environment), ``/proc/meminfo`` and the weights on disk.
- ``Accounting``: what the engine's processes keep on each of its GPUs (NVML, per process) and what that
  leaves free; ``candidate_share()`` lowers a candidate's memory share by it.
- ``request()``: one bounded POST/GET of a park route; never raises for I/O.
- ``Parking``: park and wake one unit's engine, with the host's record of it (``STATE_DIR``/UNIT.json,
  under /run: a reboot starts every engine awake, and takes the record with it). engine_park drives it;
  gpu_reclaim and the guard read the record (``parked()``).

Standard library only (the module runs it on the host).
"""
from __future__ import annotations

import json
import os
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _files, _prewarm, _systemd

# Per engine, its adapter's PARK: the flag without which parking frees nothing, the environment the routes
# need, and the routes themselves (_engine_<name>.py).
PROTOCOLS = dict((name, mod.PARK) for name, mod in _engine.ENGINES.items())

# CPU memory left to the host beyond the offloaded weights: page cache, the engines' own heaps, sshd.
DEFAULT_CPU_HEADROOM_BYTES = 8 * 1024 ** 3
# GPU memory left free beside a parked engine and its candidate (allocator slack, NCCL buffers).
DEFAULT_GPU_HEADROOM_MIB = 1024
GIB = 1024 ** 3
STATE_DIR = "/run/llmops-specdec/parked"


def argv_of(pid, proc="/proc"):
    """The command line of ``pid`` as a list (``[]`` when it is gone or unreadable)."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def environ_of(pid, proc="/proc"):
    """The environment ``pid`` was started with (``{}`` when gone or unreadable)."""
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and name:
            env[name] = value
    return env


def _has_flag(argv, flag):
    # argparse accepts "--flag" and, for the engines' boolean flags, no "--flag=value" form; vLLM's
    # BooleanOptionalAction adds "--no-flag", which a later occurrence may use to turn it off again.
    seen = None
    for arg in argv:
        if arg == flag:
            seen = True
        elif arg == "--no-" + flag[2:]:
            seen = False
    return bool(seen)


def park_problem(engine, argv, environ):
    """Why the engine running with ``argv`` / ``environ`` cannot be parked; None when it can."""
    proto = PROTOCOLS.get(engine)
    if proto is None:
        return "engine %r cannot be parked (known: %s)" % (engine, ", ".join(sorted(PROTOCOLS)))
    if not argv:
        return "the engine's main process is not running (no command line to read)"
    if not _has_flag(argv, proto["flag"]):
        return ("the running %s was started without %s, so parking would free no GPU memory; "
                "deploy the baseline with it to park it" % (engine, proto["flag"]))
    for name, value in proto["env"].items():
        if environ.get(name) != value:
            return ("the running %s has no %s=%s in its environment, so it serves no park routes"
                    % (engine, name, value))
    return None


def weights_bytes(model_path):
    """Bytes of the weight files under ``model_path`` (a directory or one file); None when not on disk."""
    if not model_path or not os.path.exists(model_path):
        return None
    return sum(size for _name, size in _prewarm.weight_files(model_path))


def mem_available_bytes(meminfo_text):
    """``MemAvailable`` of a ``/proc/meminfo`` text, in bytes (None when absent)."""
    for line in meminfo_text.splitlines():
        key, _sep, rest = line.partition(":")
        if key.strip() == "MemAvailable":
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) * 1024
    return None


def cpu_memory_problem(weights, available, headroom=DEFAULT_CPU_HEADROOM_BYTES):
    """Why the host cannot take ``weights`` bytes into CPU memory with ``available`` free; None when it can."""
    if weights is None:
        return ("the size of the weights is unknown (the model is not a path on this host): give "
                "weights_bytes, or the host cannot be checked for room to park")
    if available is None:
        return "MemAvailable is missing from /proc/meminfo: the host cannot be checked for room to park"
    if weights + headroom > available:
        return ("not enough CPU memory to park: the weights take %.1f GiB and %.1f GiB is kept for the host, "
                "but only %.1f GiB is available" % (weights / GIB, headroom / GIB, available / GIB))
    return None


class Accounting:
    """The engine's GPUs as NVML sees them: per GPU total, used, what ``pids`` hold, what is free.

    ``nvml`` is an ``_nvml.Nvml``; ``gpus`` its ``Gpu`` objects for the service's devices.
    """

    def __init__(self, nvml, gpus, pids):
        self.rows = []
        pids = set(pids)
        for gpu in gpus:
            used, _struct = nvml.memory(gpu)
            total, free = nvml.capacity(gpu)
            kept = sum(mib or 0 for pid, mib in nvml.compute_processes(gpu).items() if pid in pids)
            self.rows.append({"index": gpu.index, "total_mib": total, "used_mib": used, "kept_mib": kept,
                              "free_mib": free})

    def kept_mib(self):
        return max((r["kept_mib"] for r in self.rows), default=0)


def candidate_share(share, rows, headroom_mib=DEFAULT_GPU_HEADROOM_MIB):
    """``(share, problem)``: the memory share (0..1) a candidate may take on GPUs ``rows`` (Accounting
    rows, with the parked engine's residual already in ``used_mib``): ``share`` when it fits, lowered to
    what the fullest GPU leaves free, or ``(None, why)`` when that leaves nothing worth loading."""
    if not rows:
        return None, "no GPU to account for"
    fits = min((r["free_mib"] - headroom_mib) / float(r["total_mib"]) for r in rows)
    fits = int(fits * 1000) / 1000.0  # floor to 0.001, the precision the engines' flags are read with
    lowered = min(share, fits)
    if lowered < 0.05:
        return None, ("after parking only %.1f%% of the fullest GPU is free (%d MiB kept for headroom): "
                      "no room for a candidate" % (max(fits, 0) * 100, headroom_mib))
    return lowered, None


def request(open_url, root, route, timeout, headers=None, validate_certs=True):
    """``(status or None, parsed JSON body or None, error or None)`` of one park route; never raises for I/O."""
    method, path = route[0], route[1]
    body = route[2] if len(route) > 2 else None
    data = None if body is None else json.dumps(body).encode()
    hdrs = dict(headers or {})
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    try:
        resp = open_url(root.rstrip("/") + path, method=method, data=data, headers=hdrs, timeout=timeout,
                        validate_certs=validate_certs, follow_redirects="none")
        try:
            status, raw = resp.getcode(), resp.read(65536)
        finally:
            resp.close()
    except Exception as exc:  # HTTPError carries a status; anything else is no answer
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            return code, None, "HTTP %s" % code
        return None, None, "%s: %s" % (type(exc).__name__, exc)
    try:
        parsed = json.loads(raw) if raw.strip() else None
    except ValueError:
        parsed = None
    return status, parsed, None


class ParkError(Exception):
    """A park or wake-up the engine refused or did not survive; ``wake_failed`` for the latter."""

    def __init__(self, msg, wake_failed=False):
        Exception.__init__(self, msg)
        self.wake_failed = wake_failed


def record_path(unit, state_dir=STATE_DIR):
    return os.path.join(state_dir, os.path.basename(unit) + ".json")


def drop_record(unit, state_dir=STATE_DIR):
    """Forget that ``unit``'s engine is parked (it was stopped); whether there was a record."""
    try:
        os.unlink(record_path(unit, state_dir))
    except OSError:
        return False
    return True


def parked(unit, main_pid, state_dir=STATE_DIR):
    """The host's record of ``unit``'s engine parked, or None; a record of another process (the engine
    restarted since) does not count."""
    try:
        with open(record_path(unit, state_dir), encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if rec.get("main_pid") == main_pid and main_pid else None


class Parking:
    """Park or wake the engine of ``unit``. ``nvml_gpus`` is ``(nvml, [Gpu])`` for the accounting;
    ``open_url`` ansible's (or a callable with its signature); ``run_command`` module.run_command."""

    def __init__(self, run_command, open_url, engine, unit, root, timeout, headers=None, validate_certs=True,
                 state_dir=STATE_DIR, proc="/proc", clock=time.monotonic):
        self.run_command = run_command
        self.open_url = open_url
        self.engine = engine
        self.proto = PROTOCOLS[engine]
        self.unit = unit
        self.root = root
        self.timeout = timeout
        self.headers = headers or {}
        self.validate_certs = validate_certs
        self.state_dir = state_dir
        self.proc = proc
        self.clock = clock
        props = _systemd.show(run_command, unit, ["ActiveState", "MainPID", "ControlGroup"])
        self.active = props.get("ActiveState") == "active"
        self.main_pid = int(props.get("MainPID") or 0)
        self.control_group = props.get("ControlGroup", "")

    def pids(self):
        return _systemd.cgroup_pids(self.control_group)

    def record(self):
        return parked(self.unit, self.main_pid, self.state_dir)

    def problem(self):
        """Why this unit's engine cannot be parked now (None: it can)."""
        if not self.active or not self.main_pid:
            return "%s is not active: there is no running engine to park" % self.unit
        return park_problem(self.engine, argv_of(self.main_pid, self.proc), environ_of(self.main_pid, self.proc))

    def _call(self, what):
        return request(self.open_url, self.root, self.proto[what], self.timeout, self.headers, self.validate_certs)

    def _steps(self, what, steps):
        """Call the routes ``steps`` (keys of the protocol) in order; ``(last body, None)`` or ``(None, why)``."""
        body = None
        for step in steps:
            route = self.proto.get(step)
            if route is None:
                continue
            status, body, error = self._call(step)
            if status != 200:
                answer = status if status is not None else "nothing"
                return None, "%s %s answered %s%s" % (route[0], route[1], answer, ": %s" % error if error else "")
        return body, None

    def park(self, accounting):
        """Park the engine; return ``(seconds, record)``. ``accounting`` is called after it, for the
        GPUs' rows. Raises ParkError when the engine refused."""
        t0 = self.clock()
        body, why = self._steps("park", ("pause", "park"))
        seconds = round(self.clock() - t0, 2)
        if why:
            raise ParkError(why)
        rows = accounting()
        rec = {"unit": self.unit, "engine": self.engine, "main_pid": self.main_pid, "url": self.root,
               "parked_at": round(time.time(), 3), "park_seconds": seconds, "gpus": rows, "answer": body}
        if not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o700)
        _files.write_atomic(record_path(self.unit, self.state_dir), json.dumps(rec, sort_keys=True) + "\n", 0o600)
        return seconds, rec

    def wake(self):
        """Wake the engine and drop the record; return the seconds it took. Raises ParkError(wake_failed),
        the record dropped as well."""
        t0 = self.clock()
        _body, why = self._steps("wake", ("wake", "resume"))
        seconds = round(self.clock() - t0, 2)
        # Failed: the engine did not survive it (CUDA OOM kills the rank, and the engine with it), or is
        # still parked or paused: either way the caller restarts it, so the record no longer stands.
        self.forget()
        if why:
            raise ParkError("%s: the engine did not wake up" % why, wake_failed=True)
        return seconds

    def forget(self):
        drop_record(self.unit, self.state_dir)

    def asleep(self):
        """True/False from the engine itself where it can say (vLLM), else from the host's record."""
        if self.proto["ask"]:
            status, body, _error = self._call("ask")
            if status == 200 and isinstance(body, dict) and "is_sleeping" in body:
                return bool(body["is_sleeping"])
        return self.record() is not None


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def run(parking, params, check_mode, accounting, meminfo="/proc/meminfo"):
    """engine_park's whole run: a result dict (with ``failed`` when the module must fail).

    ``accounting(pids)`` returns the GPUs' rows (Accounting) for the unit's processes.
    """
    base = {"changed": False, "parked": False, "refused": None, "seconds": None}
    if params["state"] == "awake":
        if not parking.asleep():
            return dict(base, msg="%s is awake" % parking.unit)
        if check_mode:
            return dict(base, changed=True, parked=True, msg="would wake %s" % parking.unit)
        try:
            seconds = parking.wake()
        except ParkError as e:
            return dict(base, failed=True, wake_failed=e.wake_failed, parked=True, msg=str(e))
        return dict(base, changed=True, seconds=seconds, msg="woke %s in %.2f s" % (parking.unit, seconds))

    weights = params["weights_bytes"] if params["weights_bytes"] is not None else weights_bytes(params["model_path"])
    available = mem_available_bytes(_read(meminfo))
    base.update(weights_bytes=weights, mem_available_bytes=available)
    if parking.active and parking.asleep():
        rows = accounting(parking.pids())
        return _with_share(dict(base, parked=True, gpus=rows, msg="%s is parked" % parking.unit), rows, params)
    why = parking.problem() or cpu_memory_problem(weights, available, int(params["cpu_headroom_gib"] * GIB))
    if why:
        return dict(base, refused=why, msg="not parked: %s" % why)
    if check_mode:
        return dict(base, changed=True, parked=True, msg="would park %s" % parking.unit)
    try:
        seconds, rec = parking.park(lambda: accounting(parking.pids()))
    except ParkError as e:
        return dict(base, failed=True, msg="parking %s failed: %s" % (parking.unit, e))
    out = _with_share(dict(base, changed=True, parked=True, seconds=seconds, gpus=rec["gpus"],
                           msg="parked %s in %.2f s" % (parking.unit, seconds)), rec["gpus"], params)
    if out.get("refused"):  # no room for the candidate after all: production back as it was
        try:
            parking.wake()
        except ParkError as e:
            return dict(out, failed=True, wake_failed=True, msg="%s; waking it again failed: %s" % (out["refused"], e))
        out.update(parked=False, msg="woken again: %s" % out["refused"])
    return out


def _with_share(out, rows, params):
    out["kept_mib"] = max((r["kept_mib"] for r in rows), default=0)
    if params.get("candidate_share") is not None:
        share, why = candidate_share(params["candidate_share"], rows, params["gpu_headroom_mib"])
        out["candidate_share"] = share
        if why:
            out["refused"] = why
    return out
