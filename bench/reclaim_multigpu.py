# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reclaim on a multi-GPU host: only the selected GPUs are freed, the others are left alone.

Runs the real plugins/modules/gpu_reclaim.py the way Ansible runs it on a target (python3 MODULE
ARGS_FILE, ansible-core from --ansible-site, scope=gpu since the lent machines have no systemd) on a
host with N >= 2 GPUs. Every round starts, in parallel, real CUDA holders with torch:

  gpuK   one per GPU K, --gib on that GPU only (CUDA_VISIBLE_DEVICES=K)
  span   one process with contexts and --span-gib on GPU 0 and on GPU 1, like a tensor-parallel worker
  monitor  an NVML poller with no CUDA context (as in reclaim_h200.py); it must survive every round

and, while the module runs, a watcher process that polls NVML every ~2 ms and records each GPU's
(v2 used MiB, compute pids) transitions with CLOCK_MONOTONIC stamps, so each GPU's time to free is
measured independently of the module. Rounds:

  span_gpu0    gpus [0]: the span process must not be signalled and the module must fail naming it;
               what happens to gpu0's own holder is recorded; GPUs >= 1 must be untouched.
  free_gpu01   gpus [0, 1] (--repeat times): span, gpu0 and gpu1 are killed, both GPUs verified free,
               GPUs >= 2 and the monitor untouched; per-GPU time to free.
  free_gpu1    gpus [1] with single-GPU holders only (no span): gpu1 freed, gpu0 (and others) untouched.

No GPU library is imported by this orchestrating process. --mock runs the same logic against the mock
NVML shim with mock holders (tests/mockgpu) for checking the bench itself where there is no GPU.
Usage (on the GPU machine, from the repo root):
  python3 bench/reclaim_multigpu.py --ansible-site /tmp/site --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import reclaim_h200 as single  # shared roles and helpers of the single-GPU bench

REPO = single.REPO
MODULE = single.MODULE
MOCK_LIB = os.path.join(REPO, "tests", "mockgpu", "lib")
WATCH_INTERVAL = 0.002
SETTLE_S = 0.5  # the watcher keeps polling this long after the module exits: later changes are seen


# ---------------------------------------------------------------- roles run as child processes


def role_holder(args):
    """Allocate --gib on each visible device (cuda:0..), write the ready file, sleep until killed."""
    keep = []
    if args.mock:
        sys.path.insert(0, MOCK_LIB)
        import mockgpu_hold  # pylint: disable=import-outside-toplevel,import-error

        keep = [mockgpu_hold.hold(int(d), int(args.gib * 1024)) for d in args.devices.split(",")]
    else:
        import torch  # pylint: disable=import-outside-toplevel,import-error

        count = len(args.devices.split(","))  # CUDA_VISIBLE_DEVICES holds exactly these
        for dev in range(count):
            block = torch.empty(int(args.gib * 2**30), dtype=torch.uint8, device="cuda:%d" % dev)
            block.fill_(1)
            keep.append(block)
        for dev in range(count):
            torch.cuda.synchronize(dev)
    single._write(args.ready, str(os.getpid()))  # pylint: disable=protected-access
    while keep:
        signal.pause()


def role_watch(args):
    """Poll NVML until the stop file exists; print per-GPU transitions [t, used MiB, pids]."""
    import pynvml  # pylint: disable=import-outside-toplevel,import-error

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    timeline = [[] for _h in handles]
    last = [None] * len(handles)
    polls = 0
    single._write(args.ready, str(os.getpid()))  # pylint: disable=protected-access
    end = time.monotonic() + args.limit
    while not os.path.exists(args.stop) and time.monotonic() < end:
        now = time.monotonic()
        used, procs = single._nvml_state(pynvml, handles)  # pylint: disable=protected-access
        polls += 1
        for i, _h in enumerate(handles):
            cur = (used[i], sorted(procs[i]))
            if cur != last[i]:
                timeline[i].append([now, used[i], cur[1]])
                last[i] = cur
        time.sleep(WATCH_INTERVAL)
    print(json.dumps({"timeline": timeline, "polls": polls}))


# ---------------------------------------------------------------- orchestration


class Round(single.Round):
    """Holders on given GPUs plus the NVML monitor, started in parallel; specs: [(name, [gpus], gib)]."""

    def __init__(self, workdir, specs, mock):  # pylint: disable=super-init-not-called
        self.dir = tempfile.mkdtemp(dir=workdir)
        self.popens = []
        self.ready = {}
        self.devices = {}
        for name, gpus, gib in specs:
            self.devices[name] = gpus
            argv = ["holder", "--devices", ",".join(map(str, gpus)), "--gib", str(gib)]
            self._spawn(name, argv + (["--mock"] if mock else []), {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        self._spawn("monitor", ["monitor"], {})
        self.pids = self._wait_ready()

    def _spawn(self, name, argv, extra_env=None):  # pylint: disable=arguments-differ
        ready = os.path.join(self.dir, name)
        self.ready[name] = ready
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv + ["--ready", ready], env=dict(os.environ, **(extra_env or {})))
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped at once, as by a service's parent
        self.popens.append(proc)

    def placement(self, state):
        """Each holder on exactly its GPUs in NVML's compute lists (a stray context would spoil the test)."""
        seen = {}
        for index, pids in enumerate(state["pids"]):
            for pid in pids:
                seen.setdefault(pid, []).append(index)
        return {name: {"expected": gpus, "nvml": sorted(seen.get(self.pids[name], []))} for name, gpus in self.devices.items()}


class Watcher:
    """The NVML watcher subprocess of one module run."""

    def __init__(self, workdir):
        self.ready = os.path.join(workdir, "watch.ready")
        self.stop_file = os.path.join(workdir, "watch.stop")
        for path in (self.ready, self.stop_file):
            if os.path.exists(path):
                os.unlink(path)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "watch", "--ready", self.ready, "--stop", self.stop_file], stdout=subprocess.PIPE, text=True
        )
        end = time.monotonic() + 60
        while not os.path.exists(self.ready):
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError("NVML watcher did not start")
            time.sleep(0.01)

    def stop(self):
        with open(self.stop_file, "w"):
            pass
        out, _err = self.proc.communicate(timeout=60)
        return json.loads(out)


def free_at(timeline, t0):
    """Seconds from t0 until the GPU became free and stayed so (0.0 if free at t0); None if never."""
    if not timeline:
        return None
    t_last, used, pids = timeline[-1]
    if used or pids:
        return None
    return max(0.0, t_last - t0)


def module_env(ansible_site):
    coll = tempfile.mkdtemp()
    os.makedirs(os.path.join(coll, "ansible_collections", "llmops"))
    os.symlink(REPO, os.path.join(coll, "ansible_collections", "llmops", "specdec"))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ansible_site, coll) if p))


def run_module(rnd, gpus, env, workdir):
    """Run the module once on ``gpus``; the facts every check reads from."""
    args_file = os.path.join(workdir, "args.json")
    with open(args_file, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": {"scope": "gpu", "gpus": [str(g) for g in gpus]}}, handle)
    before = single.probe()
    watcher = Watcher(workdir)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, MODULE, args_file], capture_output=True, text=True, env=env, timeout=120, check=False
    )  # a failed module still prints its JSON
    t_exit = time.monotonic()
    time.sleep(SETTLE_S)
    watched = watcher.stop()
    after = single.probe()
    result = json.loads(out.stdout)
    per_gpu = []
    for index, timeline in enumerate(watched["timeline"]):
        per_gpu.append(
            {
                "gpu": index,
                "selected": index in gpus,
                "used_mib_before": before["used_mib"][index],
                "used_mib_after": after["used_mib"][index],
                "pids_before": sorted(before["pids"][index]),
                "pids_after": sorted(after["pids"][index]),
                "free_at_s": None if free_at(timeline, t0) is None else round(free_at(timeline, t0), 4),
                "transitions": [[round(t - t0, 4), used, pids] for t, used, pids in timeline],
            }
        )
    return {
        "gpus": gpus,
        "wall_s": round(t_exit - t0, 4),
        "rc": out.returncode,
        "failed": bool(result.get("failed")),
        "msg": result.get("msg"),
        "changed": result.get("changed"),
        "elapsed": result.get("elapsed"),
        "module_gpus": [{k: g.get(k) for k in MODULE_GPU_KEYS} for g in result.get("gpus", [])],
        "signalled": [{k: s.get(k) for k in ("pid", "name", "gpus", "unselected", "mib", "signal", "source")} for s in result.get("signalled", [])],
        "spared": [{k: s.get(k) for k in ("pid", "name", "gpus", "unselected", "mib", "reason")} for s in result.get("spared", [])],
        "pids": dict(rnd.pids),
        "alive_after": {name: single.alive(pid) for name, pid in rnd.pids.items()},
        "watch_polls": watched["polls"],
        "per_gpu": per_gpu,
        "stderr_tail": out.stderr[-2000:],
    }


def untouched(row, index):
    """An unselected GPU: same used MiB and the same compute pids before and after."""
    gpu = row["per_gpu"][index]
    return gpu["used_mib_before"] == gpu["used_mib_after"] and gpu["pids_before"] == gpu["pids_after"]


def verified_free(row, index):
    gpu = row["per_gpu"][index]
    module_row = next((g for g in row["module_gpus"] if g["index"] == index), {})
    return gpu["used_mib_after"] == 0 and not gpu["pids_after"] and module_row.get("used_mib_after") == 0 and module_row.get("processes_after") == []


def exit_after_free(row, index):
    """Seconds from NVML showing the GPU free to the module's exit (its last poll and teardown)."""
    free = row["per_gpu"][index]["free_at_s"]
    return None if free is None else round(row["wall_s"] - free, 4)


MODULE_GPU_KEYS = ("index", "used_mib_before", "used_mib_after", "processes_before", "processes_after")


def check_span_gpu0(row, n):
    span = row["pids"]["span"]
    msg = row["msg"] or ""
    spared = {s["pid"]: s for s in row["spared"]}
    signalled = {s["pid"] for s in row["signalled"]}
    checks = {
        "module_failed": row["failed"] and row["rc"] != 0,
        "msg_names_span_pid": str(span) in msg,
        "msg_names_gpu0": "GPU(s) 0 would stay busy" in msg,
        "msg_names_unselected_gpu1": "unselected GPU(s) 1" in msg,
        "span_not_signalled": span not in signalled,
        "span_spared_with_reason": spared.get(span, {}).get("reason") == "also holds unselected GPU(s) 1",
        "span_alive": row["alive_after"]["span"],
        "monitor_alive": row["alive_after"]["monitor"],
        "other_gpu_holders_alive": all(row["alive_after"]["gpu%d" % k] for k in range(1, n)),
        "unselected_gpus_untouched": all(untouched(row, k) for k in range(1, n)),
        "nothing_on_unselected_gpus_signalled": not any(s["gpus"] != [0] for s in row["signalled"]),
        # The module refuses before acting: GPU 0's own holder is not killed for a doomed reclaim.
        "nothing_signalled": row["signalled"] == [],
        "gpu0_holder_alive": row["alive_after"]["gpu0"],
    }
    outcome = {
        "gpu0_holder_alive": row["alive_after"]["gpu0"],
        "gpu0_holder_signalled": next((s["signal"] for s in row["signalled"] if s["pid"] == row["pids"]["gpu0"]), None),
        "gpu0_used_mib_after": row["per_gpu"][0]["used_mib_after"],
        "gpu0_pids_after": row["per_gpu"][0]["pids_after"],
    }
    return checks, outcome


def check_free_gpu01(row, n):
    expected = {row["pids"][name] for name in ("span", "gpu0", "gpu1")}
    checks = {
        "module_ok": row["rc"] == 0 and not row["failed"],
        "signalled_exactly_span_gpu0_gpu1": {s["pid"] for s in row["signalled"]} == expected,
        "span_gpu0_gpu1_gone": not any(row["alive_after"][k] for k in ("span", "gpu0", "gpu1")),
        "gpu0_gpu1_verified_free": verified_free(row, 0) and verified_free(row, 1),
        "monitor_alive": row["alive_after"]["monitor"],
        "other_gpu_holders_alive": all(row["alive_after"]["gpu%d" % k] for k in range(2, n)),
        "unselected_gpus_untouched": all(untouched(row, k) for k in range(2, n)),
    }
    outcome = {
        "free_at_s": {"gpu%d" % k: row["per_gpu"][k]["free_at_s"] for k in (0, 1)},
        "exit_after_free_s": {"gpu%d" % k: exit_after_free(row, k) for k in (0, 1)},
    }
    return checks, outcome


def check_free_gpu1(row, n):
    others = [k for k in range(n) if k != 1]
    checks = {
        "module_ok": row["rc"] == 0 and not row["failed"],
        "signalled_exactly_gpu1": {s["pid"] for s in row["signalled"]} == {row["pids"]["gpu1"]},
        "gpu1_holder_gone": not row["alive_after"]["gpu1"],
        "gpu1_verified_free": verified_free(row, 1),
        "other_gpu_holders_alive": all(row["alive_after"]["gpu%d" % k] for k in others),
        "other_gpus_untouched": all(untouched(row, k) for k in others),
        "monitor_alive": row["alive_after"]["monitor"],
    }
    outcome = {
        "free_at_s": {"gpu1": row["per_gpu"][1]["free_at_s"]},
        "exit_after_free_s": {"gpu1": exit_after_free(row, 1)},
        "gpu0_used_mib": [row["per_gpu"][0]["used_mib_before"], row["per_gpu"][0]["used_mib_after"]],
    }
    return checks, outcome


def orchestrate(opts):
    env = module_env(opts.ansible_site)
    workdir = tempfile.mkdtemp()
    machine = single.probe()
    n = len(machine["used_mib"])
    if n < 2:
        raise SystemExit("needs at least 2 GPUs, NVML shows %d" % n)
    singles = [("gpu%d" % k, [k], opts.gib) for k in range(n)]
    span = [("span", [0, 1], opts.span_gib)]
    plan = (
        [("span_gpu0", singles + span, [0], check_span_gpu0)]
        + [("free_gpu01", singles + span, [0, 1], check_free_gpu01)] * opts.repeat
        + [("free_gpu1", singles, [1], check_free_gpu1)]
    )
    report = {"machine": machine, "gpu_count": n, "python": sys.version.split()[0], "mock": opts.mock, "gib": opts.gib, "span_gib": opts.span_gib, "rounds": []}
    single.wait_free()
    for name, specs, gpus, check in plan:
        rnd = Round(workdir, specs, opts.mock)
        try:
            placement = rnd.placement(single.probe())
            row = run_module(rnd, gpus, env, workdir)
        finally:
            rnd.cleanup()
        row["round"] = name
        row["placement"] = placement
        row["placement_ok"] = all(p["expected"] == p["nvml"] for p in placement.values())
        row["checks"], row["outcome"] = check(row, n)
        row["ok"] = row["placement_ok"] and all(row["checks"].values())
        print(
            "%-10s gpus=%s wall %.3f s rc=%d ok=%s outcome=%s failed_checks=%s"
            % (name, gpus, row["wall_s"], row["rc"], row["ok"], json.dumps(row["outcome"]), [k for k, v in row["checks"].items() if not v]),
            flush=True,
        )
        report["rounds"].append(row)
    report["summary"] = summarise(report["rounds"])
    with open(opts.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(report["summary"], indent=1))
    return 0 if report["summary"]["all_ok"] else 1


def summarise(rounds):
    def of(name):
        return [r for r in rounds if r["round"] == name]

    span0 = of("span_gpu0")[0]
    free01 = of("free_gpu01")
    free1 = of("free_gpu1")[0]
    return {
        "all_ok": all(r["ok"] for r in rounds),
        "span_gpu0": {"wall_s": span0["wall_s"], "msg": span0["msg"], **span0["outcome"]},
        "free_gpu01_wall_s": [r["wall_s"] for r in free01],
        "free_gpu01_free_at_s": [r["outcome"]["free_at_s"] for r in free01],
        "free_gpu01_exit_after_free_s": [r["outcome"]["exit_after_free_s"] for r in free01],
        "free_gpu01_elapsed": [r["elapsed"] for r in free01],
        "free_gpu1_wall_s": free1["wall_s"],
        "free_gpu1_free_at_s": free1["outcome"]["free_at_s"]["gpu1"],
        "free_gpu1_exit_after_free_s": free1["outcome"]["exit_after_free_s"]["gpu1"],
        "free_gpu1_gpu0_used_mib_before_after": free1["outcome"]["gpu0_used_mib"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="role")
    holder = sub.add_parser("holder")
    holder.add_argument("--devices", required=True, help="physical GPU indices, also CUDA_VISIBLE_DEVICES")
    holder.add_argument("--gib", type=float, required=True)
    holder.add_argument("--mock", action="store_true")
    holder.add_argument("--ready", required=True)
    monitor = sub.add_parser("monitor")
    monitor.add_argument("--ready", required=True)
    watch = sub.add_parser("watch")
    watch.add_argument("--ready", required=True)
    watch.add_argument("--stop", required=True)
    watch.add_argument("--limit", type=float, default=150.0)
    sub.add_parser("probe")
    parser.add_argument("--out", default="reclaim_multigpu.json")
    parser.add_argument("--ansible-site", help="directory holding ansible-core (pip install --target)")
    parser.add_argument("--gib", type=float, default=4, help="GiB of each single-GPU holder")
    parser.add_argument("--span-gib", type=float, default=4, help="GiB of the span holder on each of GPU 0, 1")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of gpus [0, 1]")
    parser.add_argument("--mock", action="store_true", help="mock NVML shim and mock holders (no GPU)")
    opts = parser.parse_args()
    roles = {"holder": role_holder, "monitor": single.role_monitor, "watch": role_watch, "probe": single.role_probe}
    if opts.role:
        roles[opts.role](opts)
        return 0
    return orchestrate(opts)


if __name__ == "__main__":
    sys.exit(main())
