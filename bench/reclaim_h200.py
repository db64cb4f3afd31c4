# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reclaim on a real GPU: the module's time to verified-free against the floor and the manual pipeline.

Each round starts the same real CUDA holders with torch: one of --big-gib (default 100 GiB), three of
--small-gib, one that ignores SIGTERM (SIG_IGN), an orphaned grandchild (double fork + setsid), and an
NVML monitor that only polls NVML and must survive. Then one of:

  module  the real plugins/modules/gpu_reclaim.py run as Ansible runs it on a target (python3 MODULE
          ARGS_FILE, ansible-core from --ansible-site), scope=gpu, default timeouts; wall time from spawn
          to exit, which happens only once NVML showed the GPUs free.
  floor   a process with NVML already initialised SIGKILLs every holder and polls NVML until no compute
          process is left and v2 used memory is 0: the physical floor of "kill and verify".
  manual  the manual pipeline from the issue, with its fixed sleeps (5, 3, 2 s) and no systemd:
          sleep 5; ps | grep | xargs kill -9; sleep 3; kill the holders of /dev/nvidia*; sleep 2; nvidia-smi.
          `fuser -k /dev/nvidia*` would also kill the machine's own daemons that were there before the
          bench (e.g. nvidia-persistenced), so the pids `fuser` lists before any holder starts are left
          out of its kill list; every process the bench started is fair game, as with `fuser -k`.
  fuser   the short variant: kill the /dev/nvidia* holders (as above); sleep 2; nvidia-smi.

No GPU library is imported by this orchestrating process, so `fuser` never lists it.
Usage (on the GPU machine, from the repo root):
  python3 bench/reclaim_h200.py --ansible-site /tmp/site --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.path.join(REPO, "plugins", "modules", "gpu_reclaim.py")
HOLDER_TAG = "reclaim_h200.py holder"  # what the manual pipeline greps for
SETUP_TIMEOUT = 180.0


# ---------------------------------------------------------------- roles run as child processes


def role_holder(args):
    """Allocate GiB on GPU 0 with torch, write the ready file, sleep until killed."""
    if args.orphan:
        if os.fork():
            os._exit(0)  # launcher's child exits: the grandchild is reparented
        os.setsid()
        if os.fork():
            os._exit(0)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import torch

    block = torch.empty(int(args.gib * 2**30), dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
    _write(args.ready, str(os.getpid()))
    while True:
        signal.pause()


def role_monitor(args):
    """Poll NVML every 50 ms like an exporter; touch the heartbeat file each second."""
    import pynvml

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    _write(args.ready, str(os.getpid()))
    last = 0.0
    while True:
        for h in handles:
            pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        if time.monotonic() - last > 1.0:
            _write(args.ready + ".beat", str(time.time()))
            last = time.monotonic()
        time.sleep(0.05)


def _nvml_state(pynvml, handles):
    used = [pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used // 2**20 for h in handles]
    procs = [[p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)] for h in handles]
    return used, procs


def role_floor(args):
    """SIGKILL the pids given on stdin's first line, poll NVML until free; print seconds."""
    import pynvml

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    pids = [int(p) for p in sys.stdin.readline().split()]
    start = time.perf_counter()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    polls = 0
    while True:
        polls += 1
        used, procs = _nvml_state(pynvml, handles)
        if not any(procs) and not any(used):
            break
        if time.perf_counter() - start > 60:
            break
    print(json.dumps({"floor_s": time.perf_counter() - start, "polls": polls, "used_mib": used}))


def role_probe(args):
    """Print NVML's view once: v2 used MiB and compute pids per GPU, plus the driver version."""
    import pynvml

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    used, procs = _nvml_state(pynvml, handles)
    print(json.dumps({"used_mib": used, "pids": procs, "driver": pynvml.nvmlSystemGetDriverVersion(), "names": [pynvml.nvmlDeviceGetName(h) for h in handles]}))


def _write(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- orchestration


class Round:
    """One set of holders and the monitor, started in parallel."""

    def __init__(self, workdir, big_gib, small_gib):
        self.dir = tempfile.mkdtemp(dir=workdir)
        self.popens = []
        self.ready = {}
        specs = [
            ("big", big_gib, []),
            ("small1", small_gib, []),
            ("small2", small_gib, []),
            ("small3", small_gib, []),
            ("ignores_sigterm", small_gib, ["--ignore-sigterm"]),
            ("orphan", small_gib, ["--orphan"]),
        ]
        for name, gib, extra in specs:
            self._spawn(name, ["holder", "--gib", str(gib)] + extra)
        self._spawn("monitor", ["monitor"])
        self.pids = self._wait_ready()

    def _spawn(self, name, argv):
        ready = os.path.join(self.dir, name)
        self.ready[name] = ready
        # argv[0] of the holders carries HOLDER_TAG for the manual pipeline's grep
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv + ["--ready", ready])
        # Reap at once, as a service's parent (or init) would: no zombie outlives its signal here.
        threading.Thread(target=proc.wait, daemon=True).start()
        self.popens.append(proc)

    def _wait_ready(self):
        end = time.monotonic() + SETUP_TIMEOUT
        pids = {}
        while len(pids) < len(self.ready):
            for name, path in self.ready.items():
                if name not in pids and os.path.exists(path):
                    pids[name] = int(open(path).read())
            if time.monotonic() > end:
                raise RuntimeError("holders not ready after %ss: %s" % (SETUP_TIMEOUT, sorted(pids)))
            time.sleep(0.05)
        return pids

    def holder_pids(self):
        return [pid for name, pid in self.pids.items() if name != "monitor"]

    def monitor_alive(self):
        return alive(self.pids["monitor"])

    def cleanup(self):
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.popens:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        wait_free()


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def probe():
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "probe"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def wait_free(limit=60.0):
    end = time.monotonic() + limit
    while True:
        state = probe()
        if not any(state["pids"]) and not any(state["used_mib"]):
            return state
        if time.monotonic() > end:
            raise RuntimeError("GPU not free between rounds: %s" % state)
        time.sleep(0.2)


def nvidia_node_holders():
    out = subprocess.run("fuser /dev/nvidia* 2>/dev/null", shell=True, capture_output=True, text=True, check=False)
    return sorted({int(tok) for tok in out.stdout.split() if tok.strip().isdigit()})


def run_module(rnd, env, args_dir):
    args_file = os.path.join(args_dir, "args.json")
    with open(args_file, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": {"scope": "gpu", "gpus": ["all"]}}, handle)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, MODULE, args_file], capture_output=True, text=True, env=env, timeout=120, check=False
    )  # a failed module still prints its JSON
    wall = time.perf_counter() - start
    result = json.loads(out.stdout)
    after = probe()
    return {
        "kind": "module",
        "wall_s": wall,
        "rc": out.returncode,
        "failed": result.get("failed", False),
        "msg": result.get("msg"),
        "changed": result.get("changed"),
        "elapsed": result.get("elapsed"),
        "gpus": result.get("gpus"),
        "signalled": [{k: s[k] for k in ("pid", "name", "mib", "signal", "source")} for s in result.get("signalled", [])],
        "holders": rnd.pids,
        "monitor_alive": rnd.monitor_alive(),
        "nvml_after": after,
    }


def run_floor(rnd):
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "floor"],
        capture_output=True,
        text=True,
        input=" ".join(map(str, rnd.holder_pids())) + "\n",
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout)
    return {"kind": "floor", "wall_s": result["floor_s"], "polls": result["polls"], "monitor_alive": rnd.monitor_alive(), "nvml_after": probe()}


def run_manual(rnd, kind, system_holders):
    keep = "|".join(str(p) for p in system_holders) or "^$"
    kill_nodes = "fuser /dev/nvidia* 2>/dev/null | tr -s ' ' '\\n' | grep -E '^[0-9]+$' | grep -vxE '%s' | xargs -r kill -9" % keep
    if kind == "manual":
        script = "sleep 5; ps aux | grep '%s' | grep -v grep | awk '{print $2}' | xargs -r kill -9; sleep 3; %s; sleep 2; nvidia-smi >/dev/null" % (
            HOLDER_TAG,
            kill_nodes,
        )
    else:
        script = "%s; sleep 2; nvidia-smi >/dev/null" % kill_nodes
    start = time.perf_counter()
    subprocess.run(["bash", "-c", script], timeout=120, check=False)
    wall = time.perf_counter() - start
    return {"kind": kind, "wall_s": wall, "script": script, "monitor_alive": rnd.monitor_alive(), "nvml_after": probe()}


def orchestrate(opts):
    coll = tempfile.mkdtemp()
    os.makedirs(os.path.join(coll, "ansible_collections", "llmops"))
    os.symlink(REPO, os.path.join(coll, "ansible_collections", "llmops", "specdec"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (opts.ansible_site, coll) if p))
    workdir = tempfile.mkdtemp()
    system_holders = nvidia_node_holders()
    report = {
        "machine": probe(),
        "system_node_holders": system_holders,
        "python": sys.version.split()[0],
        "big_gib": opts.big_gib,
        "small_gib": opts.small_gib,
        "rounds": [],
    }
    wait_free()
    plan = ["module", "floor"] * opts.repeat + ["manual", "fuser"]
    for kind in plan:
        rnd = Round(workdir, opts.big_gib, opts.small_gib)
        try:
            if kind == "module":
                row = run_module(rnd, env, workdir)
            elif kind == "floor":
                row = run_floor(rnd)
            else:
                row = run_manual(rnd, kind, system_holders)
        finally:
            rnd.cleanup()
        print("%-6s %.3f s  monitor alive: %s" % (kind, row["wall_s"], row["monitor_alive"]), flush=True)
        report["rounds"].append(row)
    report["summary"] = summarise(report["rounds"])
    with open(opts.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(report["summary"], indent=1))


def summarise(rounds):
    def walls(kind):
        return [r["wall_s"] for r in rounds if r["kind"] == kind]

    module, floor = statistics.median(walls("module")), statistics.median(walls("floor"))
    manual, fuser = walls("manual")[0], walls("fuser")[0]
    return {
        "module_s": walls("module"),
        "floor_s": walls("floor"),
        "manual_s": manual,
        "fuser_s": fuser,
        "module_median_s": module,
        "floor_median_s": floor,
        "module_minus_floor_s": module - floor,
        "manual_over_module": manual / module,
        "fuser_over_module": fuser / module,
        "module_ok": all(r["rc"] == 0 and not r["failed"] for r in rounds if r["kind"] == "module"),
        "monitor_alive_after_module": all(r["monitor_alive"] for r in rounds if r["kind"] == "module"),
        "monitor_alive_after_manual": [r["monitor_alive"] for r in rounds if r["kind"] in ("manual", "fuser")],
        "goal_within_1s_of_floor": module - floor <= 1.0,
        "goal_8x_faster_than_manual": manual / module >= 8,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="role")
    holder = sub.add_parser("holder")
    holder.add_argument("--gib", type=float, required=True)
    holder.add_argument("--ignore-sigterm", action="store_true")
    holder.add_argument("--orphan", action="store_true")
    holder.add_argument("--ready", required=True)
    monitor = sub.add_parser("monitor")
    monitor.add_argument("--ready", required=True)
    sub.add_parser("floor")
    sub.add_parser("probe")
    parser.add_argument("--out", default="reclaim_h200.json")
    parser.add_argument("--ansible-site", help="directory holding ansible-core (pip install --target)")
    parser.add_argument("--big-gib", type=float, default=100)
    parser.add_argument("--small-gib", type=float, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    roles = {"holder": role_holder, "monitor": role_monitor, "floor": role_floor, "probe": role_probe}
    if opts.role:
        roles[opts.role](opts)
    else:
        orchestrate(opts)


if __name__ == "__main__":
    main()
