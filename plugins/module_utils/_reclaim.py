# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_reclaim procedure: resolve GPUs, stop units, signal holders, verify through NVML.

Order (each step only after the one before succeeded):
1. NVML init and GPU resolution: a missing driver or GPU fails here, before anything is stopped.
2. Snapshot: used MiB and compute processes of every GPU, the units' processes (cgroup + tree).
3. Stop the units (bounded, then SIGKILL of their cgroup).
4. Re-plan from a fresh snapshot; SIGTERM the in-scope holders, SIGKILL what is left after the grace.
5. Poll NVML until no compute process remains on the selected GPUs and used memory is in tolerance.

NVML's compute process list decides who holds GPU memory. An open ``/dev/nvidia<N>`` only counts
for processes of the stopped units, or, in GPU scope, for processes that map libcuda when NVML
reports pids that /proc cannot show (the module runs in another pid namespace). A process that
merely initialised NVML (monitor, exporter, this module) is therefore never a target.
"""
from __future__ import annotations

import os
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _procs, _systemd
from ansible_collections.llmops.specdec.plugins.module_utils._nvml import (
    V1_RESERVED_ALLOWANCE_MIB, Nvml, NvmlError)

DEFAULT_PROTECT = ["nvidia-persistenced", "nv-hostengine", "dcgm-exporter", "dcgmi", "nvidia-smi",
                   "nvtop", "nvitop", "gpustat"]
VERIFY_INTERVAL = 0.01  # NVML answers a memory + process query in ~0.02 ms; poll often.
UNIT_PROPS = ["LoadState", "ActiveState", "MainPID", "ControlGroup"]


class ReclaimError(Exception):
    """The procedure stopped; ``result`` holds what was done up to then."""

    def __init__(self, msg, result):
        super().__init__(msg)
        self.msg = msg
        self.result = result


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


def _snapshot(nvml, gpus):
    state = {}
    for gpu in gpus:
        used, struct = nvml.memory(gpu)
        state[gpu.index] = {"used": used, "struct": struct, "procs": nvml.compute_processes(gpu)}
    return state


def _tolerance(struct, max_used_mib):
    return max_used_mib + (V1_RESERVED_ALLOWANCE_MIB if struct == "v1" else 0)


def _proc_row(pid, procs, mib):
    proc = procs.get(pid)
    return {"pid": pid, "name": proc.comm if proc else None, "mib": mib}


class Planner:
    """Decides, from one snapshot, which processes on the selected GPUs get signalled and why not."""

    def __init__(self, procfs, dev_dir, selected, all_gpus, scope, protect, unit_keys, self_pids):
        self.procfs = procfs
        self.dev_dir = dev_dir
        self.selected = {g.index for g in selected}
        self.minor_to_index = {g.minor: g.index for g in all_gpus}
        self.scope = scope
        self.protect = protect
        self.unit_keys = unit_keys
        self.self_pids = self_pids

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
        # Secondary signal 2: NVML pids invisible here (pid namespace); CUDA users of the node.
        if unmapped and self.scope == "gpu":
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

    def reason_to_spare(self, proc, entry):
        if proc.pid in self.self_pids:
            return "the reclaiming process or one of its ancestors"
        if proc.matches(self.protect):
            return "protected name"
        if entry["unselected"]:
            return "also holds unselected GPU(s) %s" % ", ".join(str(i) for i in entry["unselected"])
        if self.scope == "unit" and proc.key not in self.unit_keys:
            return "not a process of the stopped unit(s) (scope=unit)"
        return None

    def plan(self, state, procs):
        """``(targets, spared)``: targets are ``(proc, entry)``; spared entries carry a reason."""
        targets, spared = [], []
        found, unmapped = self.candidates(state, procs)
        for proc, entry in sorted(found, key=lambda pe: pe[0].pid):
            entry = dict(entry, name=proc.comm, cmdline=proc.command())
            reason = self.reason_to_spare(proc, entry)
            if reason:
                spared.append(dict(entry, reason=reason))
            else:
                targets.append((proc, entry))
        for entry in unmapped:
            spared.append(dict(entry, name=None, cmdline=None,
                               reason="NVML pid not visible in /proc (another pid namespace?)"))
        return targets, spared


def _gpu_view(state, index, procs):
    gpu_state = state[index]
    return {"used_mib": gpu_state["used"],
            "processes": ["%d %s %s MiB" % (pid, procs[pid].comm if pid in procs else "?", mib)
                          for pid, mib in sorted(gpu_state["procs"].items())]}


def _units_snapshot(run_command, units, procs):
    """Per unit: its state and the identities of its processes (cgroup members and their tree)."""
    info, keys = [], set()
    for name in units:
        props = _systemd.show(run_command, name, UNIT_PROPS)
        if props.get("LoadState") == "not-found":
            raise _systemd.SystemdError("unit %s not found" % name)
        main_pid = int(props.get("MainPID") or 0)
        members = set(_systemd.cgroup_pids(props.get("ControlGroup", "")))
        if main_pid:
            members.add(main_pid)
        members = _procs.descendants(procs, members)
        keys.update(procs[p].key for p in members)
        info.append({"name": name, "active_before": props.get("ActiveState", ""), "main_pid": main_pid,
                     "control_group": props.get("ControlGroup", ""), "pids": sorted(members),
                     "action": "none", "killed": False})
    return info, keys


def _describe_leftovers(state, selected, procs, spared_by_pid, tolerance):
    parts = []
    for gpu in selected:
        gpu_state = state[gpu.index]
        limit = tolerance(gpu_state["struct"])
        if not gpu_state["procs"] and gpu_state["used"] <= limit:
            continue
        pids = []
        for pid, mib in sorted(gpu_state["procs"].items()):
            why = spared_by_pid.get(pid)
            name = procs[pid].comm if pid in procs else "?"
            pids.append("%d (%s, %s MiB%s)" % (pid, name, mib, ", left alone: " + why if why else ""))
        parts.append("GPU %d (%s): %s MiB used (tolerance %d), processes: %s"
                     % (gpu.index, gpu.uuid, gpu_state["used"], limit, ", ".join(pids) or "none"))
    return "; ".join(parts)


def reclaim(params, run_command, check_mode=False, nvml_lib=None, procfs=None, dev_dir="/dev",
            self_pid=None, clock=time.monotonic, sleep=time.sleep):
    """Run the procedure; return the result dict or raise ReclaimError (with the partial result)."""
    timer = _Clock(clock)
    procfs = procfs or _procs.ProcFS()
    result = {"changed": False, "gpus": [], "units": [], "signalled": [], "spared": [],
              "elapsed": timer.elapsed}
    try:
        nvml = Nvml(nvml_lib)
    except NvmlError as exc:
        raise ReclaimError("%s; nothing was stopped or signalled" % exc, result)
    try:
        return _reclaim(params, run_command, check_mode, nvml, procfs, dev_dir,
                        self_pid or os.getpid(), clock, sleep, timer, result)
    finally:
        nvml.close()
        timer.total()


def _reclaim(params, run_command, check_mode, nvml, procfs, dev_dir, self_pid, clock, sleep, timer,
             result):
    def fail(msg):
        raise ReclaimError(msg, result)

    try:
        all_gpus = nvml.devices()
        selected = nvml.resolve(params.get("gpus") or [])
        before = _snapshot(nvml, all_gpus)
    except NvmlError as exc:
        fail("%s; nothing was stopped or signalled" % exc)
    timer.mark("init")

    def tolerance(struct):
        return _tolerance(struct, params.get("max_used_mib", 0))

    procs = procfs.table()
    try:
        units, unit_keys = _units_snapshot(run_command, params.get("units") or [], procs)
    except _systemd.SystemdError as exc:
        fail("%s; nothing was stopped or signalled" % exc)
    result["units"] = units
    planner = Planner(procfs, dev_dir, selected, all_gpus, params.get("scope", "unit"),
                      list(params.get("protect") or []), unit_keys, _procs.ancestors(procs, self_pid))
    targets, spared = planner.plan(before, procs)
    result["gpus"] = [dict(g.describe(), memory_struct=before[g.index]["struct"],
                           used_mib_before=before[g.index]["used"],
                           processes_before=[_proc_row(pid, procs, mib)
                                             for pid, mib in sorted(before[g.index]["procs"].items())])
                      for g in selected]
    diff_before = {"gpu%d" % g.index: _gpu_view(before, g.index, procs) for g in selected}
    timer.mark("plan")

    # A holder that will be left alone (protected, out of scope, or also on an unselected GPU) and
    # that no named unit owns keeps its GPU busy: the run could only end in failure, so refuse now,
    # before any unit is stopped or process signalled.
    blockers = [e for e in spared if e["pid"] in procs and procs[e["pid"]].key not in unit_keys]
    if blockers:
        result["spared"] = spared
        fail("GPU(s) %s would stay busy after the reclaim, so nothing was stopped or signalled: %s. "
             "Add the other GPUs to gpus, use scope=gpu, or name the owning unit in units."
             % (", ".join(str(i) for i in sorted({i for e in blockers for i in e["gpus"]})),
                "; ".join("pid %d (%s, %s MiB on GPU %s) is left alone: %s"
                          % (e["pid"], e["name"], e["mib"], ",".join(str(i) for i in e["gpus"]), e["reason"])
                          for e in blockers)))

    to_stop = [u for u in units if u["active_before"] not in _systemd.STOPPED_STATES]
    if check_mode:
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
            predicted[gpu.index] = {"used": used, "struct": before[gpu.index]["struct"], "procs": left}
        result["diff"] = {"before": diff_before,
                          "after": {"gpu%d" % g.index: _gpu_view(predicted, g.index, procs) for g in selected}}
        return result

    for unit in to_stop:
        try:
            outcome = _systemd.stop_unit(run_command, unit["name"], params.get("stop_timeout", 30),
                                         clock=clock, sleep=sleep)
        except _systemd.SystemdError as exc:
            fail("stopping %s: %s" % (unit["name"], exc))
        unit["action"] = "stopped" if outcome["was_active"] else "none"
        unit["killed"] = outcome["killed"]
        result["changed"] = result["changed"] or outcome["was_active"]
    timer.mark("stop")

    # Fresh look after the stop: most unit processes are gone, escaped ones and strays remain.
    procs = procfs.table()
    targets, spared = planner.plan(_snapshot(nvml, all_gpus), procs)
    result["spared"] = spared
    phase_start = clock()
    ended, alive, timings = _procs.escalate(procfs, [p for p, _e in targets],
                                            params.get("term_timeout", 10), params.get("verify_timeout", 30),
                                            clock=clock, sleep=sleep)
    timer.elapsed["term"] = round(timings["term"], 4)
    timer.elapsed["kill"] = round(timings["kill"], 4)
    timer.last = clock()
    for proc, entry in targets:
        if proc.pid in alive or ended.get(proc.pid):
            result["signalled"].append(dict(entry, signal=ended.get(proc.pid) or "SIGKILL (survived)"))
    result["changed"] = result["changed"] or bool(result["signalled"])

    deadline = phase_start + timings["term"] + params.get("verify_timeout", 30)
    spared_by_pid = {e["pid"]: e["reason"] for e in spared}
    while True:
        state = _snapshot(nvml, selected)
        busy = [g for g in selected
                if state[g.index]["procs"] or state[g.index]["used"] > tolerance(state[g.index]["struct"])]
        if not busy:
            break
        remaining = set()
        for gpu in busy:
            remaining.update(state[gpu.index]["procs"])
        only_spared = remaining and remaining <= set(spared_by_pid) and not alive
        if only_spared or clock() >= deadline:
            timer.mark("verify")
            procs = procfs.table()
            _fill_after(result, state, selected, procs)
            fail("GPUs not free after %.2f s: %s" % (clock() - timer.start,
                 _describe_leftovers(state, selected, procs, spared_by_pid, tolerance)))
        sleep(VERIFY_INTERVAL)
    timer.mark("verify")
    _fill_after(result, state, selected, procs)
    result["diff"] = {"before": diff_before,
                      "after": {"gpu%d" % g.index: _gpu_view(state, g.index, procs) for g in selected}}
    return result


def _fill_after(result, state, selected, procs):
    for row, gpu in zip(result["gpus"], selected):
        row["used_mib_after"] = state[gpu.index]["used"]
        row["processes_after"] = [_proc_row(pid, procs, mib)
                                  for pid, mib in sorted(state[gpu.index]["procs"].items())]
