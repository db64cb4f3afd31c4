# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Production's downtime when the controller is lost mid-switch: from the fault until it answers again.

Runs the Molecule scenario molecule/guard (both engines; ansible-playbook really SIGKILLed or SIGINTed
just after the reclaim, during the candidate's load, during the benchmark and during a rollback, its
SSH cut, the host rebooted), whose files/fault.py delivers each fault and records, seen from outside,
the first moment production's unit was active and /health answered again. Prints one row per fault
and writes the rows as JSON (--out).

  .venv/bin/python bench/guard_faults.py [--out bench/results/guard_faults.json] [--keep]

The guard fires one lease after the controller's last renewal (molecule/guard sets a 20 s margin and
3 s readiness cycles; the defaults are 120 s and 30 s), so the figures are that lease, plus the reclaim,
plus production's own load (0.5 s in the scenario, up to 30 minutes on a real model).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(paths):
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            out.extend(json.loads(line) for line in handle if line.strip())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "guard_faults.json"))
    ap.add_argument("--keep", action="store_true", help="leave the mock hosts up (molecule converge only)")
    args = ap.parse_args()
    timings = tempfile.NamedTemporaryFile(prefix="guard-timings-", suffix=".jsonl", delete=False).name
    env = dict(os.environ, PATH="%s:%s" % (os.path.join(ROOT, ".venv", "bin"), os.environ.get("PATH", "")),
               GUARD_TIMINGS=timings)
    steps = ["converge"] if args.keep else ["test"]
    proc = subprocess.run(["molecule"] + steps + ["-s", "guard"], cwd=ROOT, env=env, check=False)
    found = rows([timings])
    os.unlink(timings)
    if not found:
        print("no timings recorded (molecule rc %d)" % proc.returncode, file=sys.stderr)
        return 1
    print("%-8s %-14s %-7s %12s %s" % ("engine", "stage", "fault", "down (s)", "guard record"))
    for row in found:
        rec = row.get("guard_record") or {}
        down = "-" if row.get("down_s") is None else "%.1f" % row["down_s"]
        print("%-8s %-14s %-7s %12s %s" % (row.get("engine"), row["stage"], row["fault"], down, rec.get("why", "-")))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(found, handle, indent=1)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
