# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's CPU for one host-switch, and how it grows while the engines load (issue 33, docs/fleet.md).

A night window holds as many switches as the controller can drive. On a real fleet a switch lasts as long as two
engine loads (the candidate, then the baseline on a rollback) and the benchmark, and the controller polls the
whole time (readiness probes, the guard's renewals, the benchmark's wait). So the controller's CPU per switch is
a fixed part plus a rate per second of waiting; this script measures both on one mock host of the mock fleet:
it runs `switch_spec.yml -e method=ngram` with the mock engines loading in 1 s, then in LONG s (faults.json
`load_seconds`), and reads the controller's CPU (rusage of ansible-playbook and its children) and the wall time.
CPU = fixed + rate x (wall - wall at 1 s).  Stored baselines are removed before each run (same work each time).

    .venv/bin/python bench/controller_cpu.py               # --long 120; JSON in bench/results/controller_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet_scaling as fs  # noqa: E402  the mock fleet's helpers (boot, inventory, playbook runs)

HOST = "fleet-01"


def set_load(seconds, logdir):
    fs.run([str(fs.REPO / ".venv" / "bin" / "ansible")] + fs.INVENTORY
           + ["--limit", HOST, "inference", "-m", "ansible.builtin.copy",
              "-a", json.dumps({"dest": "/etc/mockgpu/faults.json", "content": json.dumps({"*": {"load_seconds": seconds}})})],
           env=fs.ansible_env(), log=logdir / ("faults-%s.log" % seconds))


def switch(load, logdir):
    set_load(load, logdir)
    fs.run([str(fs.REPO / ".venv" / "bin" / "ansible")] + fs.INVENTORY
           + ["--limit", HOST, "inference", "-m", "ansible.builtin.file", "-a", "path=/var/lib/llmops-specdec/baselines state=absent"],
           env=fs.ansible_env(), log=logdir / ("clean-%s.log" % load))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = fs.playbook(["playbooks/switch_spec.yml", "-e", "method=ngram", "-e", "specdec_report_dir=%s" % (logdir / "report")],
                     [HOST], log=logdir / ("switch-%s.log" % load), check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"load_seconds": load, "rc": rc, "wall_s": round(wall, 1), "controller_cpu_s": round(cpu, 2),
            "loadavg_1m_after": round(os.getloadavg()[0], 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--long", type=float, default=120.0, help="the long engine load, seconds")
    ap.add_argument("--keep", action="store_true", help="leave the host up afterwards")
    ap.add_argument("--out", default=str(fs.REPO / "bench" / "results" / "controller_cpu.json"))
    args = ap.parse_args()
    logdir = Path(tempfile.mkdtemp(prefix="controller-cpu-"))
    print("logs: %s" % logdir, file=sys.stderr)
    fs.run([str(fs.FLEET), "up", "1"], log=logdir / "up.log")
    fs.playbook(["playbooks/deploy.yml"], [HOST], log=logdir / "deploy.log")
    try:
        runs = [switch(1.0, logdir), switch(args.long, logdir)]
    finally:
        if not args.keep:
            fs.run([str(fs.FLEET), "down"], log=logdir / "down.log", check=False)
    short, long_ = runs
    waited = long_["wall_s"] - short["wall_s"]
    rate = (long_["controller_cpu_s"] - short["controller_cpu_s"]) / waited if waited > 0 else None
    doc = {"cpus": os.cpu_count(), "runs": runs, "fixed_cpu_s": short["controller_cpu_s"],
           "cpu_s_per_s_waiting": round(rate, 4) if rate is not None else None, "extra_wait_s": round(waited, 1)}
    for r in runs:
        print("load %6.1f s: rc %d, wall %6.1f s, controller CPU %6.2f s" % (r["load_seconds"], r["rc"], r["wall_s"], r["controller_cpu_s"]))
    print("fixed %.2f CPU-s per host-switch; %s CPU-s per second of waiting (over %.0f s more wall)"
          % (doc["fixed_cpu_s"], doc["cpu_s_per_s_waiting"], waited))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print("written: %s" % args.out)
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
