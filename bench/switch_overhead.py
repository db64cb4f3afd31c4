# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the wall time of one switch goes: benchmark, engine load/ready wait, GPU reclaim, and the
rest (orchestration: SSH round trips, module start-up, controller-side tasks, the report).

Runs playbooks/switch_spec.yml (or another playbook) as an operator would, with bench/callbacks/
task_timer.py recording each task's start and end, and prints a breakdown (and JSON with --out).

  .venv/bin/python bench/switch_overhead.py -i .build/inv-sw --host-cgroup sw-1 --runs 3 -- -e method=ngram -e num_speculative_tokens=5

--floor replays each run's task shape right after it, with trivial tasks (a builtin set_fact for each
controller task, a skipped debug for each skipped one, ansible.builtin.ping for each remote task outside
the benchmark, readiness wait and reclaim, which are left out as they are subtracted): Ansible's own cost
of that many tasks on this machine in the same minute, beside the switch's orchestration.

--keep-payloads enables the test tiers' tests/ansible_plugins/callback/ansiballz_cache.py, so AnsiballZ
payloads built by one run are used by the next (run once first to build them): what building them costs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Tasks that run on the controller only (no SSH round trip).
LOCAL = {
    "set_fact",
    "assert",
    "debug",
    "include_tasks",
    "import_tasks",
    "include_role",
    "import_role",
    "meta",
    "fail",
    "validate_argument_spec",
    "set_stats",
    "include_vars",
    "spec_report",  # an action plugin: it writes the report in the controller's worker
}
# Steps whose time is the engine's or the benchmark's, not orchestration.
BUCKETS = {"spec_bench": "benchmark", "spec_bench_wait": "benchmark", "engine_ready": "load_ready_wait", "gpu_reclaim": "reclaim_stop"}


def short(action):
    return action.rsplit(".", 1)[-1]


def run_once(args, passthrough):
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tmp:
        trace = tmp.name
    env = dict(
        os.environ, ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callbacks"), ANSIBLE_CALLBACKS_ENABLED="task_timer", TASK_TIMER_OUT=trace, ANSIBLE_NOCOLOR="1"
    )
    if args.keep_payloads:
        env["ANSIBLE_CALLBACK_PLUGINS"] += os.pathsep + os.path.join(ROOT, "tests", "ansible_plugins", "callback")
        env["ANSIBLE_CALLBACKS_ENABLED"] += ",ansiballz_cache"
    if args.host_cgroup:
        env["TASK_TIMER_CPU_STAT"] = "/sys/fs/cgroup/unified/llmops-specdec/%s/cpu.stat" % args.host_cgroup
    cmd = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", args.inventory, args.playbook] + passthrough
    if args.limit:
        cmd += ["--limit", args.limit]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.time() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(trace, encoding="utf-8") as fh:
        events = [json.loads(line) for line in fh]
    os.unlink(trace)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:])
        raise SystemExit("playbook failed (rc %d)" % proc.returncode)
    out = analyse(events, wall)
    out["controller_cpu_s"] = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if out["host_cpu_s"] is not None:
        # Without contention the orchestration would take about the CPU it used on both sides
        # (request/response: the two hardly overlap) plus network round trips (~0.1 ms here).
        out["orchestration_cpu_s"] = out["controller_cpu_s"] + out["host_cpu_orchestration_s"]
    return out


def walked(events):
    """The task files the run walked (a task of each started) and its trips from Jinja into the collection's
    Python: the tasks that ran (not skipped) whose arguments or conditions call one of its filters."""
    ran = {e["uuid"] for e in events if e["event"] == "result" and e["status"] != "skipped"}
    files, trips = set(), []
    for e in events:
        if e["event"] != "task_start" or not e.get("path"):
            continue
        files.add(os.path.relpath(e["path"].rsplit(":", 1)[0], ROOT))
        if e.get("filters") and e["uuid"] in ran:
            trips.append({"task": e["name"][:70], "filters": e["filters"]})
    return {"task_files": sorted(files), "task_files_n": len(files), "filter_trips": trips, "filter_trips_n": len(trips)}


def analyse(events, wall):
    first, last = events[0], events[-1]
    start, end = first["t"], last["t"]
    starts = {e["uuid"]: e for e in events if e["event"] == "task_start"}
    tasks = []
    for r in (e for e in events if e["event"] == "result"):
        st = starts.get(r["uuid"], r)
        local = short(r["action"]) in LOCAL or r.get("delegated")
        cpu = (r["host_cpu_us"] - st["host_cpu_us"]) / 1e6 if r.get("host_cpu_us") is not None else None
        tasks.append(
            {"action": short(r["action"]), "name": r["name"], "start": r["started"], "end": r["t"], "status": r["status"], "local": local, "host_cpu_s": cpu}
        )
    out = {"wall_s": wall, "playbook_s": end - start, "startup_s": wall - (end - start), "benchmark": 0.0, "load_ready_wait": 0.0, "reclaim_stop": 0.0}
    bucket_cpu = 0.0
    for t in tasks:
        bucket = BUCKETS.get(t["action"])
        if bucket:
            out[bucket] += t["end"] - t["start"]
            bucket_cpu += t["host_cpu_s"] or 0.0
    remote = [t for t in tasks if not t["local"] and t["status"] != "skipped"]
    plain_remote = [t["end"] - t["start"] for t in remote if t["action"] not in BUCKETS]
    out["orchestration_s"] = wall - out["benchmark"] - out["load_ready_wait"] - out["reclaim_stop"]
    out["task_results"] = len(tasks)
    out["remote_tasks"] = len(remote)
    out["remote_other_s"] = sum(plain_remote)
    out["remote_other_mean_s"] = statistics.mean(plain_remote) if plain_remote else 0.0
    out["controller_tasks_s"] = sum(t["end"] - t["start"] for t in tasks if t["local"])
    if first.get("host_cpu_us") is not None and last.get("host_cpu_us") is not None:
        out["host_cpu_s"] = (last["host_cpu_us"] - first["host_cpu_us"]) / 1e6
        out["host_cpu_orchestration_s"] = out["host_cpu_s"] - bucket_cpu
    else:
        out["host_cpu_s"] = out["host_cpu_orchestration_s"] = None
    out.update(walked(events))
    out["top"] = [(round(t["end"] - t["start"], 2), t["action"], t["name"][:70]) for t in sorted(tasks, key=lambda t: t["start"] - t["end"])[:12]]
    out["shape"] = [{"action": t["action"], "status": t["status"], "local": bool(t["local"])} for t in tasks]
    return out


def floor_tasks(shape):
    """The trivial tasks that stand for ``shape`` (see --floor): the bucketed steps are left out."""
    tasks = []
    for i, t in enumerate(shape):
        if t["action"] in BUCKETS:
            continue
        if t["status"] == "skipped":
            tasks.append({"name": "skipped %d" % i, "ansible.builtin.debug": {"msg": "x"}, "when": False})
        elif t["local"]:
            tasks.append({"name": "controller %d" % i, "ansible.builtin.set_fact": {"floor_%d" % i: "{{ %d }}" % i}})
        else:
            tasks.append({"name": "remote %d" % i, "ansible.builtin.ping": {}})
    return tasks


def run_floor(args, shape):
    """Wall time of the trivial replay of ``shape``, Ansible's start-up included."""
    plays = [{"name": "floor", "hosts": args.limit or "all", "gather_facts": False, "tasks": floor_tasks(shape)}]
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as tmp:
        json.dump(plays, tmp)  # JSON is YAML
    cmd = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", args.inventory, tmp.name]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.time() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.unlink(tmp.name)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:])
        raise SystemExit("floor playbook failed (rc %d)" % proc.returncode)
    return {"floor_s": wall, "floor_tasks": len(plays[0]["tasks"]), "floor_controller_cpu_s": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("-i", "--inventory", required=True)
    ap.add_argument("--playbook", default="playbooks/switch_spec.yml")
    ap.add_argument("--limit")
    ap.add_argument("--host-cgroup", metavar="NAME", help="mock host name: also count the host's CPU time")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", help="write every run's figures as JSON here")
    ap.add_argument("--floor", action="store_true", help="after each run, replay its task shape with trivial tasks")
    ap.add_argument("--keep-payloads", action="store_true", help="keep AnsiballZ payloads across runs (the test tiers' cache)")
    ap.add_argument("passthrough", nargs=argparse.REMAINDER, help="-- then ansible-playbook arguments (-e ...)")
    args = ap.parse_args()
    passthrough = [a for a in args.passthrough if a != "--"]
    runs = []
    for n in range(args.runs):
        with open("/proc/loadavg", encoding="ascii") as fh:
            load = float(fh.read().split()[0])
        r = run_once(args, passthrough)
        r["loadavg_1m_before"] = load
        if args.floor:
            r.update(run_floor(args, r["shape"]))
        runs.append(r)
        print(
            "run %d (load %.1f): wall %.1f s = benchmark %.1f + load/ready wait %.1f + reclaim/stop %.1f"
            " + orchestration %.1f (ansible start-up %.1f, %d remote tasks, other remote %.1f s at %.2f s each,"
            " controller tasks %.1f s); CPU: controller %.1f s, host %s"
            % (
                n + 1,
                load,
                r["wall_s"],
                r["benchmark"],
                r["load_ready_wait"],
                r["reclaim_stop"],
                r["orchestration_s"],
                r["startup_s"],
                r["remote_tasks"],
                r["remote_other_s"],
                r["remote_other_mean_s"],
                r["controller_tasks_s"],
                r["controller_cpu_s"],
                (
                    "n/a"
                    if r["host_cpu_s"] is None
                    else "%.1f s (%.1f outside bench/ready/reclaim) -> orchestration"
                    " CPU %.1f s" % (r["host_cpu_s"], r["host_cpu_orchestration_s"], r["orchestration_cpu_s"])
                ),
            )
        )
        print("  walked %d task files; %d tasks that ran called the collection's filters" % (r["task_files_n"], r["filter_trips_n"]))
        if args.floor:
            print(
                "  floor: the same shape as trivial tasks (%d) took %.1f s, Ansible start-up included (controller CPU %.1f s)"
                % (r["floor_tasks"], r["floor_s"], r["floor_controller_cpu_s"])
            )
    print("slowest tasks of the last run:")
    for dur, action, name in runs[-1]["top"]:
        print("  %6.2f s  %-22s %s" % (dur, action, name))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"argv": sys.argv[1:], "runs": runs}, fh, indent=1)


if __name__ == "__main__":
    main()
