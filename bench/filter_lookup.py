# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one `set_fact` with one of the collection's filters costs on the controller, against one with a
builtin filter, for one or more checkouts of the collection (bench/README.md, "Filters on first use").

Each task is a forked worker that finds the filter anew; Ansible's collection loader imports the filter
files in name order until one has it and compiles every source it imports (no bytecode cache). The
playbook runs on localhost only: tasks alternate between our filters (`verdict_plan`, `tune_settings`,
`spec_normalize`, `fleet_outcome`; four files, so the lookup walks most of the directory) and builtin
`combine`. Checkouts are run in turn, `--rounds` times; wall time from bench/callbacks/task_timer.py and
the controller's CPU time (rusage of the children) per task.

    .venv/bin/python bench/filter_lookup.py --checkout new=. --checkout old=/tmp/old --rounds 3 --out F.json
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
OURS = [
    "{{ {} | llmops.specdec.verdict_plan }}",
    "{{ {} | llmops.specdec.tune_settings }}",
    "{{ {'method': 'ngram', 'num_speculative_tokens': 4} | llmops.specdec.spec_normalize('vllm') }}",
    "{{ {} | llmops.specdec.fleet_outcome([]) }}",
]
BUILTIN = "{{ {} | combine({'a': 1}) }}"


def playbook(path, tasks):
    plays = [{"name": "filters", "hosts": "localhost", "gather_facts": False, "tasks": []}]
    for i in range(tasks):
        ours = i % 2 == 0
        plays[0]["tasks"].append({"name": "%s %d" % ("ours" if ours else "builtin", i),
                                  "ansible.builtin.set_fact": {"x%d" % i: OURS[(i // 2) % len(OURS)] if ours else BUILTIN}})
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(plays, fh)  # JSON is YAML


def collections_root(checkout, tmp):
    """A collections path with llmops.specdec pointing at ``checkout``."""
    root = tempfile.mkdtemp(dir=tmp)
    os.makedirs(os.path.join(root, "ansible_collections", "llmops"))
    os.symlink(os.path.abspath(checkout), os.path.join(root, "ansible_collections", "llmops", "specdec"))
    return root


def run(pb, collections, trace):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callbacks"),
               ANSIBLE_CALLBACKS_ENABLED="task_timer", TASK_TIMER_OUT=trace, ANSIBLE_LOCALHOST_WARNING="false")
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", "localhost,", "-c", "local", pb],
                          env=env, capture_output=True, text=True, check=False)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    starts, spans = {}, {"ours": [], "builtin": []}
    with open(trace, encoding="utf-8") as fh:
        for line in fh:
            ev = json.loads(line)
            if ev["event"] == "task_start":
                starts[ev["uuid"]] = ev
            elif ev.get("uuid") in starts:
                kind = starts[ev["uuid"]]["name"].split()[0]
                spans[kind].append(ev["t"] - starts[ev["uuid"]]["t"])
    os.unlink(trace)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"ours_s": statistics.mean(spans["ours"]), "builtin_s": statistics.mean(spans["builtin"]), "playbook_cpu_s": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH", help="a checkout of the collection")
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    checkouts = [c.split("=", 1) for c in args.checkout] or [["this", ROOT]]
    results = {checkout[0]: [] for checkout in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        pb = os.path.join(tmp, "filters.yml")
        playbook(pb, args.tasks)
        roots = {name: collections_root(path, tmp) for name, path in checkouts}
        for _round in range(args.rounds):
            for name in roots:
                results[name].append(run(pb, roots[name], os.path.join(tmp, "trace.jsonl")))
    summary = {}
    for name, runs in results.items():
        ours = statistics.median(r["ours_s"] for r in runs)
        builtin = statistics.median(r["builtin_s"] for r in runs)
        summary[name] = {"ours_s": ours, "builtin_s": builtin, "filter_overhead_s": ours - builtin,
                         "playbook_cpu_s": statistics.median(r["playbook_cpu_s"] for r in runs)}
        print("%-8s set_fact with our filter %.3f s, with a builtin %.3f s: our lookup costs %.3f s; playbook CPU %.1f s"
              % (name, ours, builtin, ours - builtin, summary[name]["playbook_cpu_s"]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"argv": sys.argv[1:], "tasks": args.tasks, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "loadavg_1m": os.getloadavg()[0], "summary": summary, "runs": results}, fh, indent=1)


if __name__ == "__main__":
    main()
