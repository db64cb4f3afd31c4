# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_reclaim procedure: select GPUs, stop units, signal the service's holders, verify through NVML.

Order (each step only after the one before succeeded):
1. Options, NVML init, GPU resolution, snapshot of every GPU (used MiB, compute processes), the units'
   processes (cgroup + tree), user and environment; the GPU selection (``gpus``, else the units'
   ``CUDA_VISIBLE_DEVICES`` and the GPUs their processes hold).
2. Plan: which holders of the selected GPUs are the service's (``reach``) and which are spared, and
   why. A spared holder that would keep a selected GPU busy refuses the run here, before anything.
3. Stop the units (bounded, then SIGKILL of their cgroup).
4. Re-plan from a fresh snapshot; SIGTERM the holders in reach, SIGKILL what is left after the grace.
5. Poll NVML until no compute process remains on the selected GPUs and used memory is in tolerance;
   a holder that appears meanwhile is planned like the others (signalled if in reach, else the run
   fails at once).

NVML's compute process list decides who holds GPU memory. An open ``/dev/nvidia<N>`` only counts for
processes of the stopped units, or, in GPU scope, for CUDA processes when this process is proven to
run in a child pid namespace (NVML then names pids /proc cannot show). A process that merely
initialised NVML (monitor, exporter, this module) is therefore never a target.

Ownership (who may be signalled): a process of the units (recorded before the stop), a process in
the units' cgroups, in ``allow_units``' cgroups or under an ``allow_cgroups`` prefix, or one whose
uids are all in ``allow_uids``; in scope ``gpu`` also one whose uids are all the service's user (the
units' ``User=``; with no units, the user this runs as). Anything else is spared with its reason.

Kept units (``keep_units``, the parked baseline beside its candidate: docs/park.md): their processes are
taken out of every NVML snapshot, with their memory, before anything is planned. They are never a
target nor a blocker, and a GPU they share counts as free when all that is left on it is theirs.
"""
from __future__ import annotations

import os
import time
import traceback

from ansible_collections.llmops.specdec.plugins.module_utils import _park, _procs, _systemd
from ansible_collections.llmops.specdec.plugins.module_utils._nvml import (
    V1_RESERVED_ALLOWANCE_MIB, Nvml, NvmlError, visible_devices)

DEFAULT_PROTECT = ["nvidia-persistenced", "nv-hostengine", "dcgm-exporter", "dcgmi", "nvidia-smi",
                   "nvtop", "nvitop", "gpustat"]
SCOPES = ("unit", "gpu")
# Every option of reclaim() with its default (the module's argument_spec uses the same values).
DEFAULTS = {"units": [], "gpus": [], "scope": "unit", "protect": DEFAULT_PROTECT, "allow_uids": [],
            "allow_cgroups": [], "allow_units": [], "keep_units": [], "stop_timeout": 30.0, "term_timeout": 10.0,
            "verify_timeout": 30.0, "max_used_mib": 0}
VERIFY_INTERVAL = 0.01  # NVML answers a memory + process query in ~0.02 ms; poll often.
UNIT_PROPS = ["LoadState", "ActiveState", "MainPID", "ControlGroup", "User", "DynamicUser", "Environment"]
NOTHING_DONE = "nothing was stopped or signalled"
ALL = "all"
COMMAND_CHARS = 200  # a command line in a message is cut here


class ReclaimError(Exception):
    """The procedure stopped; ``result`` holds what was done up to then (``touched``, ``stopped``).

    ``exception`` is a formatted traceback for an unexpected error (a bug or an odd host), else None.
    """

    def __init__(self, msg, result, exception=None):
        super().__init__(msg)
        self.msg = msg
        self.result = result
        self.exception = exception


class _Clock:
    def __init__(self, clock):
        self.clock = clock
        self.start = self.last = clock()
        self.elapsed = {}

    def mark(self, phase):
        now = self.clock()
        self.elapsed[phase] = round(self.elapsed.get(phase, 0.0) + now - self.last, 4)
        self.last = now

    def total(self):
        self.elapsed["total"] = round(self.clock() - self.start, 4)
        return self.elapsed


def options(params):
    """The options of ``params`` over DEFAULTS, checked; raises ValueError naming a bad one.

    Adds ``all_gpus`` (``gpus: [all]``), ``protect_rules``, ``allow_uid_set``.
    """
    opts = dict(DEFAULTS)
    opts.update({k: v for k, v in params.items() if v is not None})
    for key in ("units", "gpus", "protect", "allow_uids", "allow_cgroups", "allow_units", "keep_units"):
        if isinstance(opts[key], (str, bytes)) or not isinstance(opts[key], (list, tuple)):
            raise ValueError("%s must be a list" % key)
        opts[key] = [str(v).strip() for v in opts[key]]
    both = sorted(set(opts["units"]) & set(opts["keep_units"]))
    if both:
        raise ValueError("%s cannot be both stopped (units) and kept (keep_units)" % ", ".join(both))
    if opts["scope"] not in SCOPES:
        raise ValueError("scope must be one of %s, got %r" % (", ".join(SCOPES), opts["scope"]))
    for key in ("stop_timeout", "term_timeout", "verify_timeout", "max_used_mib"):
        if isinstance(opts[key], bool) or not isinstance(opts[key], (int, float)) or not opts[key] >= 0:
            raise ValueError("%s must be a number >= 0, got %r" % (key, opts[key]))
    wants_all = [g for g in opts["gpus"] if g.lower() == ALL]
    if wants_all and len(opts["gpus"]) > 1:
        raise ValueError("gpus: 'all' stands alone; it cannot be combined with GPU indices or UUIDs")
    opts["all_gpus"] = bool(wants_all)
    for prefix in opts["allow_cgroups"]:
        if not prefix.startswith("/"):
            raise ValueError("allow_cgroups entry %r is not an absolute cgroup path" % prefix)
    opts["protect_rules"] = [_procs.ProtectRule(e) for e in opts["protect"] if e]
    opts["allow_uid_set"] = {_procs.lookup_uid(u) for u in opts["allow_uids"] if u}
    return opts


def _optional(procfs, name, *args):
    """A ProcFS capability a stand-in may lack (then: unknown)."""
    method = getattr(procfs, name, None)
    return method(*args) if method else None


def _snapshot(nvml, gpus, kept=frozenset()):
    """Per GPU index: used MiB, struct, ``{pid: mib}``, with the ``kept`` pids and their MiB taken out."""
    state = {}
    for gpu in gpus:
        used, struct = nvml.memory(gpu)
        state[gpu.index] = {"used": used, "struct": struct, "procs": nvml.compute_processes(gpu), "kept": 0}
    return _without(state, kept)


def _without(state, kept):
    """``state`` with the ``kept`` pids out of each GPU's processes and their MiB out of its used (``kept``)."""
    for gpu_state in state.values():
        mine = [pid for pid in gpu_state["procs"] if pid in kept]
        mib = sum(gpu_state["procs"].pop(pid) or 0 for pid in mine)
        gpu_state["used"] = max(0, gpu_state["used"] - mib)
        gpu_state["kept"] += mib
    return state


def _tolerance(struct, max_used_mib):
    return max_used_mib + (V1_RESERVED_ALLOWANCE_MIB if struct == "v1" else 0)


def _proc_row(pid, procs, mib):
    proc = procs.get(pid)
    return {"pid": pid, "name": proc.comm if proc else None, "mib": mib}


def _cut(text):
    return text if text is None or len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS] + "..."


class Ownership:
    """What counts as the service's own, and the text that says why (``reach``).

    ``unit_cgroups`` are ``(path, unit)`` pairs (the units' and ``allow_units``' ControlGroups);
    ``service_uids`` the service's user(s); ``allow_uids`` / ``allow_cgroups`` the explicit lists.
    """

    def __init__(self, unit_keys=(), unit_cgroups=(), allow_cgroups=(), service_uids=(), allow_uids=()):
        self.unit_keys = set(unit_keys)
        self.unit_cgroups = list(unit_cgroups)
        self.allow_cgroups = list(allow_cgroups)
        self.service_uids = set(service_uids)
        self.allow_uids = set(allow_uids)

    def reach(self, proc, uids, scope):
        """Why ``proc`` (with ``uids`` from /proc, or None) is the service's, or None."""
        if proc.key in self.unit_keys:
            return "unit process"
        for path, unit in self.unit_cgroups:
            if _procs.under(proc.cgroup, path):
                return "in the cgroup of %s" % unit
        for prefix in self.allow_cgroups:
            if _procs.under(proc.cgroup, prefix):
                return "allow_cgroups %s" % prefix
        if uids is None:
            return None
        ids = set(uids[:3])  # real, effective, saved: all must be ours
        if scope == "gpu" and self.service_uids and ids <= self.service_uids:
            return "service user %s" % _procs.user_name(uids[0])
        if self.allow_uids and ids <= self.allow_uids | (self.service_uids if scope == "gpu" else set()):
            return "allow_uids %s" % _procs.user_name(uids[0])
        return None

    def describe(self):
        users = ", ".join("%d (%s)" % (u, _procs.user_name(u)) for u in sorted(self.service_uids))
        return users or "none"


class Planner:
    """Decides, from one snapshot, which processes on the selected GPUs get signalled and why not.

    ``ownership`` (an Ownership) says what is the service's; without it only ``unit_keys`` are.
    ``foreign_pidns``: this process is proven to run in a child pid namespace, so NVML pids that /proc
    cannot show may be live processes (the device-node fallback of scope ``gpu`` applies only then).
    """

    def __init__(self, procfs, dev_dir, selected, all_gpus, scope, protect, unit_keys, self_pids,
                 ownership=None, foreign_pidns=False):
        self.procfs = procfs
        self.dev_dir = dev_dir
        self.selected = {g.index for g in selected}
        self.minor_to_index = {g.minor: g.index for g in all_gpus}
        self.scope = scope
        self.protect = [r if isinstance(r, _procs.ProtectRule) else _procs.ProtectRule(r) for r in protect]
        self.unit_keys = unit_keys
        self.self_pids = self_pids
        self.ownership = ownership or Ownership(unit_keys)
        self.foreign_pidns = foreign_pidns

    def _held_nodes(self, pid):
        minors = self.procfs.open_nodes(pid, self.dev_dir)
        return {self.minor_to_index[m] for m in minors if m in self.minor_to_index}

    def candidates(self, state, procs):
        """``[(proc, entry)]`` holders of selected GPUs, plus entries for pids /proc cannot show."""
        held = {}
        for index, gpu_state in state.items():
            for pid, mib in gpu_state["procs"].items():
                held.setdefault(pid, {})[index] = mib
        found, unmapped = {}, []
        for pid, gpus in held.items():
            sel = sorted(set(gpus) & self.selected)
            if not sel:
                continue  # only on unselected GPUs: never looked at again
            mibs = [gpus[i] for i in sel if gpus[i] is not None]
            entry = {"pid": pid, "gpus": sel, "mib": sum(mibs) if mibs else None,
                     "unselected": sorted(set(gpus) - self.selected), "source": "nvml"}
            proc = procs.get(pid)
            if proc is None:
                unmapped.append(entry)
            else:
                found[pid] = (proc, entry)
        # Secondary signal 1: processes of the stopped units that hold a selected GPU's node.
        for pid, starttime in self.unit_keys:
            proc = procs.get(pid)
            if pid in found or proc is None or proc.starttime != starttime:
                continue
            nodes = self._held_nodes(pid) & self.selected
            if nodes:
                found[pid] = (proc, {"pid": pid, "gpus": sorted(nodes), "mib": None, "unselected": [],
                                     "source": "device node (unit member)"})
        # Secondary signal 2, only in a proven child pid namespace: NVML pids invisible here; CUDA
        # users of the node. Anywhere else such a pid has exited and nobody unlisted is touched.
        if unmapped and self.scope == "gpu" and self.foreign_pidns:
            nvml_pids = set(held)
            wanted = set()
            for entry in unmapped:
                wanted.update(entry["gpus"])
            for pid, proc in procs.items():
                if pid in found or pid in nvml_pids:
                    continue
                nodes = self._held_nodes(pid)
                if not nodes & wanted or nodes - self.selected:
                    continue
                if self.procfs.maps_library(pid, "libcuda.so"):
                    found[pid] = (proc, {"pid": pid, "gpus": sorted(nodes & wanted), "mib": None,
                                         "unselected": [], "source": "device node (NVML pid not in /proc)"})
        return list(found.values()), unmapped

    def judge(self, proc, entry):
        """``(reason_to_spare, reach)``: exactly one of them is None."""
        uids = _optional(self.procfs, "uids", proc.pid)
        exe = _optional(self.procfs, "exe", proc.pid)
        entry.update(uid=uids[0] if uids else None, user=_procs.user_name(uids[0]) if uids else None,
                     exe=exe.path if exe else None, cgroup=proc.cgroup)
        if proc.pid in self.self_pids:
            return "the reclaiming process or one of its ancestors", None
        rule = next((r for r in self.protect if r.matches(exe, uids)), None)
        if rule is not None:
            return "protected program (%s)" % rule.entry, None
        if entry["unselected"]:
            return "also holds unselected GPU(s) %s" % ", ".join(str(i) for i in entry["unselected"]), None
        reach = self.ownership.reach(proc, uids, self.scope)
        if reach:
            return None, reach
        if self.scope == "unit":
            return "not a process of the stopped unit(s), their cgroups or the allow-lists (scope=unit)", None
        if uids is None:
            return "owner unknown (its /proc status is unreadable) and outside the units' cgroups", None
        return ("owned by uid %d (%s), not the service's user (%s) nor allow_uids, and outside the units' "
                "cgroups and allow_cgroups" % (uids[0], entry["user"], self.ownership.describe())), None

    def reason_to_spare(self, proc, entry):
        return self.judge(proc, dict(entry))[0]

    def plan(self, state, procs):
        """``(targets, spared)``: targets are ``(proc, entry)``; spared entries carry a reason."""
        targets, spared = [], []
        found, unmapped = self.candidates(state, procs)
        for proc, entry in sorted(found, key=lambda pe: pe[0].pid):
            entry = dict(entry, name=proc.comm, cmdline=_cut(proc.command()))
            reason, reach = self.judge(proc, entry)
            if reason:
                spared.append(dict(entry, reason=reason))
            else:
                targets.append((proc, dict(entry, reach=reach)))
        for entry in unmapped:
            spared.append(dict(entry, name=None, cmdline=None, uid=None, user=None, exe=None, cgroup=None,
                               reason="NVML pid not visible in /proc (exited, or another pid namespace)"))
        return targets, spared


def _gpu_view(state, index, procs):
    gpu_state = state[index]
    return {"used_mib": gpu_state["used"],
            "processes": ["%d %s %s MiB" % (pid, procs[pid].comm if pid in procs else "?", mib)
                          for pid, mib in sorted(gpu_state["procs"].items())]}


def _holder_text(entry):
    return "pid %d (%s, user %s, %s MiB on GPU %s, command %s)" % (
        entry["pid"], entry["name"], entry.get("user"), entry["mib"], ",".join(str(i) for i in entry["gpus"]),
        entry.get("cmdline"))


class _Procedure:
    """One run of reclaim(): the state shared by its steps, and failures that say what was touched."""

    def __init__(self, opts, run_command, check_mode, nvml, procfs, dev_dir, self_pid, clock, sleep, timer,
                 result, warn):
        self.opts = opts
        self.run_command = run_command
        self.check_mode = check_mode
        self.nvml = nvml
        self.procfs = procfs
        self.dev_dir = dev_dir
        self.self_pid = self_pid
        self.clock = clock
        self.sleep = sleep
        self.timer = timer
        self.result = result
        self.warn = warn
        self.last_state = None  # the last NVML snapshot of the selected GPUs (verify)
        self.kept = frozenset()  # pids of keep_units, out of every snapshot

    def snapshot(self, gpus):
        return _snapshot(self.nvml, gpus, self.kept)

    def unit_members(self, name, procs, props, what="unit"):
        """``(props, main_pid, members)`` of unit ``name``: its cgroup's pids, its main process and their tree."""
        props = _systemd.show(self.run_command, name, props)
        if props.get("LoadState") == "not-found":
            raise _systemd.SystemdError("%s %s not found" % (what, name))
        main_pid = int(props.get("MainPID") or 0)
        members = set(_systemd.cgroup_pids(props.get("ControlGroup", "")))
        if main_pid:
            members.add(main_pid)
        return props, main_pid, _procs.descendants(procs, members)

    def kept_units(self, procs):
        """keep_units as result rows, and their pids (cgroup members, main process and their tree)."""
        rows, pids = [], set()
        for name in self.opts["keep_units"]:
            props, main_pid, members = self.unit_members(name, procs, ["LoadState", "ActiveState", "MainPID", "ControlGroup"],
                                                         "keep_units: unit")
            pids |= members
            rows.append({"name": name, "active": props.get("ActiveState", ""), "main_pid": main_pid,
                         "pids": sorted(members)})
        return rows, frozenset(pids)

    # -- failures --------------------------------------------------------------------------------
    def explain(self, msg):
        """``msg`` plus what the caller must know: nothing done, or the service touched."""
        if self.result["touched"]:
            stopped = ", ".join(self.result["stopped"]) or "no unit completely"
            return ("%s; the service was touched (stopped: %s; signalled: %d process(es)): roll back"
                    % (msg, stopped, len(self.result["signalled"])))
        return "%s; %s" % (msg, NOTHING_DONE)

    def fail(self, msg, explain=True):
        raise ReclaimError(self.explain(msg) if explain else msg, self.result)

    # -- step 1 ----------------------------------------------------------------------------------
    def units_snapshot(self, procs):
        """Per unit: state, processes (cgroup members and their tree), user, environment."""
        info, keys, cgroups, uids, envs = [], set(), [], set(), []
        for name in self.opts["units"]:
            props, main_pid, members = self.unit_members(name, procs, UNIT_PROPS)
            keys.update(procs[p].key for p in members)
            if props.get("ControlGroup"):
                cgroups.append((props["ControlGroup"], name))
            user = props.get("User", "")
            uid = None
            if user:
                try:
                    uid = _procs.lookup_uid(user)
                except ValueError:
                    uid = None  # a DynamicUser= that exists only while the unit runs
            elif props.get("DynamicUser") != "yes":
                uid = 0  # no User=: systemd runs it as root
            if uid is not None:
                uids.add(uid)
            else:
                for pid in members:
                    ids = _optional(self.procfs, "uids", pid)
                    if ids:
                        uids.add(ids[0])
            env = _systemd.environment(props.get("Environment", ""))
            envs.append((name, env))
            info.append({"name": name, "active_before": props.get("ActiveState", ""), "main_pid": main_pid,
                         "control_group": props.get("ControlGroup", ""), "pids": sorted(members),
                         "user": _procs.user_name(uid) if uid is not None else (user or None),
                         "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
                         "action": "none", "killed": False})
        for name in self.opts["allow_units"]:
            props = _systemd.show(self.run_command, name, ["LoadState", "ControlGroup"])
            if props.get("LoadState") == "not-found":
                raise _systemd.SystemdError("allow_units: unit %s not found" % name)
            if props.get("ControlGroup"):
                cgroups.append((props["ControlGroup"], name))
        if not self.opts["units"]:
            uids.add(os.geteuid())  # no service named: the reference user is the one running this
        return info, keys, cgroups, uids, envs

    def select(self, all_gpus, explicit, before, units, envs):
        """``(selected, source, why)``: the GPUs to free, where the list came from, per GPU why."""
        if self.opts["all_gpus"]:
            return all_gpus, "all", {g.index: "gpus: all" for g in all_gpus}
        if explicit is not None:
            return explicit, "gpus", {g.index: "gpus" for g in explicit}
        why, sources = {}, []
        names = {g.name for g in all_gpus}
        for unit, env in envs:
            value = env.get("CUDA_VISIBLE_DEVICES")
            if value is None:
                continue
            try:
                gpus, by_index = visible_devices(all_gpus, value)
            except NvmlError as exc:
                raise NvmlError("unit %s: %s" % (unit, exc)) from exc
            if by_index and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len(names) > 1:
                raise NvmlError("unit %s sets CUDA_VISIBLE_DEVICES=%s by index without CUDA_DEVICE_ORDER=PCI_BUS_ID "
                                "on a host with different GPU models (%s): CUDA's fastest-first order may not be "
                                "NVML's; set CUDA_DEVICE_ORDER=PCI_BUS_ID in the unit or give gpus"
                                % (unit, value, ", ".join(sorted(names))))
            sources.append("CUDA_VISIBLE_DEVICES")
            for gpu in gpus:
                why.setdefault(gpu.index, "CUDA_VISIBLE_DEVICES of %s" % unit)
        owner_of = {}
        for unit in units:
            for pid in unit["pids"]:
                owner_of.setdefault(pid, unit["name"])
        for index, gpu_state in sorted(before.items()):
            for pid in sorted(gpu_state["procs"]):
                if pid in owner_of and index not in why:
                    why[index] = "held by pid %d of %s" % (pid, owner_of[pid])
                    sources.append("unit processes")
        selected = [g for g in all_gpus if g.index in why]
        source = "+".join(sorted(set(sources), key=sources.index)) or "none"
        return selected, source, why

    # -- the procedure ---------------------------------------------------------------------------
    def run(self):
        opts, nvml, result, timer = self.opts, self.nvml, self.result, self.timer
        if not opts["gpus"] and not opts["units"]:
            self.fail("no GPUs to free: name them in gpus (indices or UUIDs, or [all] for every GPU), or name "
                      "the service in units so that its GPUs are found")
        try:
            all_gpus = nvml.devices()
            explicit = nvml.resolve(opts["gpus"]) if opts["gpus"] and not opts["all_gpus"] else None
            before = _snapshot(nvml, all_gpus)
        except NvmlError as exc:
            self.fail(str(exc))
        timer.mark("init")

        procs = self.procfs.table()
        try:
            result["kept"], self.kept = self.kept_units(procs)
            units, unit_keys, cgroups, service_uids, envs = self.units_snapshot(procs)
        except (_systemd.SystemdError, ValueError) as exc:
            self.fail(str(exc))
        result["units"] = units
        before = _without(before, self.kept)
        try:
            selected, source, why = self.select(all_gpus, explicit, before, units, envs)
        except NvmlError as exc:
            self.fail(str(exc))
        result["gpus_source"] = source
        if not selected and self.warn:
            self.warn("No GPU selected: the units set no CUDA_VISIBLE_DEVICES and their processes hold no GPU, "
                      "so only the units are stopped and no GPU is verified. Give gpus to verify GPUs.")
        ownership = Ownership(unit_keys, cgroups, opts["allow_cgroups"], service_uids, opts["allow_uid_set"])
        planner = Planner(self.procfs, self.dev_dir, selected, all_gpus, opts["scope"], opts["protect_rules"],
                          unit_keys, _procs.ancestors(procs, self.self_pid), ownership=ownership,
                          foreign_pidns=bool(_optional(self.procfs, "pidns_nested")))
        targets, spared = planner.plan(before, procs)
        result["gpus"] = [dict(g.describe(), selected_by=why[g.index], memory_struct=before[g.index]["struct"],
                               used_mib_before=before[g.index]["used"], kept_mib_before=before[g.index]["kept"],
                               processes_before=[_proc_row(pid, procs, mib)
                                                 for pid, mib in sorted(before[g.index]["procs"].items())])
                          for g in selected]
        diff_before = {"gpu%d" % g.index: _gpu_view(before, g.index, procs) for g in selected}
        timer.mark("plan")

        # A holder that will be left alone (protected, not the service's, or also on an unselected GPU)
        # and that no named unit owns keeps its GPU busy: the run could only end in failure, so refuse
        # now, before any unit is stopped or process signalled.
        blockers = [e for e in spared if e["pid"] in procs and procs[e["pid"]].key not in unit_keys]
        if blockers:
            result["spared"] = spared
            self.fail("GPU(s) %s would stay busy after the reclaim, so %s: %s. Add the other GPUs to gpus, name "
                      "the owning unit in units or allow_units, or allow its user in allow_uids."
                      % (", ".join(str(i) for i in sorted({i for e in blockers for i in e["gpus"]})), NOTHING_DONE,
                         "; ".join("%s is left alone: %s" % (_holder_text(e), e["reason"]) for e in blockers)),
                      explain=False)

        to_stop = [u for u in units if u["active_before"] not in _systemd.STOPPED_STATES]
        if self.check_mode:
            return self.predict(to_stop, targets, spared, unit_keys, before, selected, procs, diff_before)

        for unit in to_stop:
            result["touched"] = True  # from the first stop on, a failure means: roll back
            try:
                outcome = _systemd.stop_unit(self.run_command, unit["name"], opts["stop_timeout"],
                                             clock=self.clock, sleep=self.sleep)
            except _systemd.SystemdError as exc:
                unit["action"] = "stop failed"
                result["changed"] = True
                self.fail("stopping %s: %s" % (unit["name"], exc))
            unit["action"] = "stopped" if outcome["was_active"] else "none"
            unit["killed"] = outcome["killed"]
            _park.drop_record(unit["name"])  # a stopped engine is not parked (a retired baseline)
            if outcome["was_active"]:
                result["stopped"].append(unit["name"])
                result["changed"] = True
        timer.mark("stop")

        # Fresh look after the stop: most unit processes are gone, escaped ones and strays remain.
        procs = self.procfs.table()
        targets, spared = planner.plan(self.snapshot(all_gpus), procs)
        result["spared"] = spared
        phase_start = self.clock()
        survivors = self.signal(targets, opts["term_timeout"], opts["verify_timeout"], phase="initial")
        deadline = phase_start + self.timer.elapsed["term"] + opts["verify_timeout"]
        self.verify(planner, all_gpus, selected, targets, spared, survivors, deadline)
        state = self.last_state
        timer.mark("verify")
        procs = self.procfs.table()
        self.fill_after(state, selected, procs)
        result["diff"] = {"before": diff_before,
                          "after": {"gpu%d" % g.index: _gpu_view(state, g.index, procs) for g in selected}}
        return result

    def predict(self, to_stop, targets, spared, unit_keys, before, selected, procs, diff_before):
        """Check mode: what would be stopped and signalled, and the GPUs afterwards."""
        result = self.result
        for unit in to_stop:
            unit["action"] = "would stop"
        result["would_signal"] = [dict(entry, via="unit stop" if proc.key in unit_keys and to_stop else "signal")
                                  for proc, entry in targets]
        result["spared"] = spared
        result["changed"] = bool(to_stop or targets)
        # Predicted: every planned holder gone, the spared ones still there with their memory.
        gone = {e["pid"] for _p, e in targets} | ({pid for pid, _st in unit_keys} if to_stop else set())
        predicted = {}
        for gpu in selected:
            left = {pid: mib for pid, mib in before[gpu.index]["procs"].items() if pid not in gone}
            used = before[gpu.index]["used"]
            if len(left) < len(before[gpu.index]["procs"]) or to_stop:
                used = sum(mib or 0 for mib in left.values())
            predicted[gpu.index] = {"used": used, "struct": before[gpu.index]["struct"], "procs": left,
                                    "kept": before[gpu.index]["kept"]}
        result["diff"] = {"before": diff_before,
                          "after": {"gpu%d" % g.index: _gpu_view(predicted, g.index, procs) for g in selected}}
        return result

    def signal(self, targets, term_timeout, kill_timeout, phase):
        """SIGTERM -> SIGKILL ``targets``; record them in ``signalled``; return the pids that survived."""
        if not targets:
            self.timer.elapsed.setdefault("term", 0.0)
            self.timer.elapsed.setdefault("kill", 0.0)
            return set()
        self.result["touched"] = True
        ended, alive, timings = _procs.escalate(self.procfs, [p for p, _e in targets], term_timeout, kill_timeout,
                                                clock=self.clock, sleep=self.sleep)
        self.timer.elapsed["term"] = round(self.timer.elapsed.get("term", 0.0) + timings["term"], 4)
        self.timer.elapsed["kill"] = round(self.timer.elapsed.get("kill", 0.0) + timings["kill"], 4)
        self.timer.last = self.clock()
        for proc, entry in targets:
            if proc.pid in alive or ended.get(proc.pid):
                row = dict(entry, signal=ended.get(proc.pid) or "SIGKILL (survived)")
                if phase != "initial":
                    row["late"] = True
                self.result["signalled"].append(row)
        self.result["changed"] = self.result["changed"] or bool(self.result["signalled"])
        return set(alive)

    def verify(self, planner, all_gpus, selected, targets, spared, survivors, deadline):
        """Poll NVML until the selected GPUs are free; plan late holders; fail with what is left."""
        opts = self.opts
        spared_by_pid = {e["pid"]: e for e in spared}
        handled = {p.pid for p, _e in targets} | set(spared_by_pid)
        while True:
            state = self.last_state = self.snapshot(selected)
            busy = [g for g in selected if state[g.index]["procs"]
                    or state[g.index]["used"] > _tolerance(state[g.index]["struct"], opts["max_used_mib"])]
            if not busy:
                return
            remaining = set()
            for gpu in busy:
                remaining.update(state[gpu.index]["procs"])
            new = remaining - handled
            if new:
                handled |= new  # looked at once; one /proc cannot show is waited for, like any other
                procs = self.procfs.table()
                late = {pid for pid in new if pid in procs}
                if late:  # a holder that appeared after the plan: judged by the same rules
                    late_targets, late_spared = planner.plan(self.snapshot(all_gpus), procs)
                    for entry in late_spared:
                        if entry["pid"] in late:
                            entry["late"] = True
                            self.result["spared"].append(entry)
                            spared_by_pid[entry["pid"]] = entry
                    late_targets = [(p, e) for p, e in late_targets if p.pid in late]
                    left = max(0.0, deadline - self.clock())
                    survivors |= self.signal(late_targets, min(opts["term_timeout"], left), left, phase="late")
            # A holder we must leave alone and can see will not go away by our doing: fail now.
            stuck = [spared_by_pid[pid] for pid in sorted(remaining)
                     if pid in spared_by_pid and spared_by_pid[pid]["cmdline"] is not None]
            if stuck or self.clock() >= deadline:
                self.timer.mark("verify")
                procs = self.procfs.table()
                self.fill_after(state, selected, procs)
                what = "late holder(s) that must be left alone" if any(e.get("late") for e in stuck) else "leftovers"
                self.fail("GPUs not free after %.2f s (%s): %s" % (
                    self.clock() - self.timer.start, what,
                    self.describe_leftovers(state, selected, procs, spared_by_pid, survivors)))
            self.sleep(VERIFY_INTERVAL)

    def describe_leftovers(self, state, selected, procs, spared_by_pid, survivors):
        parts = []
        for gpu in selected:
            gpu_state = state[gpu.index]
            limit = _tolerance(gpu_state["struct"], self.opts["max_used_mib"])
            if not gpu_state["procs"] and gpu_state["used"] <= limit:
                continue
            pids = []
            for pid, mib in sorted(gpu_state["procs"].items()):
                proc = procs.get(pid)
                notes = []
                if pid in survivors and proc is not None:
                    notes.append("still running after SIGKILL, state %s" % proc.state)
                entry = spared_by_pid.get(pid)
                if entry:
                    notes.append("left alone: " + entry["reason"])
                uids = _optional(self.procfs, "uids", pid) if proc else None
                pids.append("%d (%s, user %s, %s MiB%s)" % (
                    pid, proc.comm if proc else "?", _procs.user_name(uids[0]) if uids else "?", mib,
                    "".join(", " + n for n in notes)))
            parts.append("GPU %d (%s): %s MiB used (tolerance %d), processes: %s"
                         % (gpu.index, gpu.uuid, gpu_state["used"], limit, ", ".join(pids) or "none"))
        return "; ".join(parts)

    def fill_after(self, state, selected, procs):
        for row, gpu in zip(self.result["gpus"], selected):
            row["used_mib_after"] = state[gpu.index]["used"]
            row["kept_mib_after"] = state[gpu.index]["kept"]
            row["processes_after"] = [_proc_row(pid, procs, mib)
                                      for pid, mib in sorted(state[gpu.index]["procs"].items())]


def reclaim(params, run_command, check_mode=False, nvml_lib=None, procfs=None, dev_dir="/dev",
            self_pid=None, clock=time.monotonic, sleep=time.sleep, warn=None):
    """Free the GPUs of a service; return the result dict or raise ReclaimError.

    This is the stable entry point for callers without AnsibleModule (the host-side guard uses it with
    the module's rules):

    - ``params``: the module's options (see DEFAULTS); missing keys take their defaults. Checked here,
      so a caller without an argument_spec gets the same errors.
    - ``run_command(argv) -> (rc, stdout, stderr)`` runs ``systemctl`` (argv list, no shell); outside
      Ansible a ``subprocess.run(argv, capture_output=True, text=True)`` wrapper does.
    - ``check_mode``: plan only; ``warn(text)``: called for warnings (``module.warn``); the other
      arguments exist for tests.

    It never raises anything but ReclaimError. ``exc.result`` (and the returned dict) always has
    ``touched`` (a unit stop was issued or a process signalled: on a failure the caller must roll back),
    ``stopped`` (units that were stopped), ``changed``, ``gpus``, ``gpus_source``, ``units``,
    ``signalled``, ``spared``, ``elapsed``. ``exc.msg`` says either "nothing was stopped or signalled"
    or "the service was touched ... roll back"; ``exc.exception`` holds a traceback for an unexpected error.
    """
    timer = _Clock(clock)
    result = {"changed": False, "touched": False, "stopped": [], "gpus": [], "gpus_source": "none",
              "units": [], "kept": [], "signalled": [], "spared": [], "elapsed": timer.elapsed}
    try:
        opts = options(params)
    except ValueError as exc:
        raise ReclaimError("%s; %s" % (exc, NOTHING_DONE), result) from exc
    try:
        nvml = Nvml(nvml_lib)
    except NvmlError as exc:
        raise ReclaimError("%s; %s" % (exc, NOTHING_DONE), result) from exc
    procedure = _Procedure(opts, run_command, check_mode, nvml, procfs or _procs.ProcFS(), dev_dir,
                           self_pid or os.getpid(), clock, sleep, timer, result, warn)
    try:
        return procedure.run()
    except ReclaimError:
        raise
    except NvmlError as exc:  # the GPU or the driver failed mid-run (Xid 79, GPU lost, ...)
        raise ReclaimError(procedure.explain("NVML failed during the reclaim: %s" % exc), result) from exc
    except _systemd.SystemdError as exc:
        raise ReclaimError(procedure.explain("systemctl failed during the reclaim: %s" % exc), result) from exc
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # Whatever it is, the caller must learn whether the service was touched, not read a traceback.
        raise ReclaimError(procedure.explain("unexpected error during the reclaim: %s: %s"
                                             % (type(exc).__name__, exc)), result,
                           exception=traceback.format_exc()) from exc
    finally:
        nvml.close()
        timer.total()
