# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lose the controller at one step of a serving group's confirm, for real, and read where the group ends.

Runs on the controller. Starts `ansible-playbook playbooks/switch_spec.yml --limit GROUP` (a candidate that is
kept), watches the playbook's own output for the banner of the STEP's task, and then freezes and SIGKILLs every
process of the run as a dead controller would lose them (molecule/guard/files/fault.py's kill_run: ansible-playbook,
its workers, their ssh, the run's ssh ControlMasters). It reads each node's guard state right after the kill (what
the step really reached), waits until every node's guard has ended and the head answers, and prints one JSON
document: each node's guard state at the kill, its unit's SHA-256, main PID and restarts at the end, and its last
history record.

  steps: follow (the workers' follow task has begun: some, all or none of them may follow), head (every worker
         follows, the head is not confirmed), workers (the head is confirmed, the workers not yet)

Usage: kill_confirm.py --inventory INV --limit GROUP --step STEP --unit UNIT --port PORT --key KEY
                       --node NAME=ADDRESS [--node ...] (the head first) [--extra JSON] [--log FILE] [--timeout S]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "guard", "files"))
import fault  # noqa: E402  molecule/guard's: processes, freeze, kill_run

# The banner each step waits for: the task that starts once every node finished the step before it.
BANNERS = {
    "follow": "Follow the head, until the head's lease, its restore and the grace have passed",
    "head": "Confirm the head's guard first",
    "workers": "Confirm every worker's guard once the head is confirmed",
}

PROBE = r"""
import hashlib, json, os, subprocess, sys, urllib.request
unit, port, statefile, history = sys.argv[1:5]
def read(p):
    try:
        return open(p, "rb").read()
    except OSError:
        return None
show = dict(l.partition("=")[::2] for l in subprocess.run(["systemctl", "show", unit, "-p", "ActiveState",
            "-p", "MainPID", "-p", "NRestarts"], capture_output=True, text=True).stdout.splitlines())
state = read(statefile)
unit_text = read("/etc/systemd/system/" + unit) or b""
lines = (read(history) or b"").decode().splitlines()
try:
    health = urllib.request.urlopen("http://127.0.0.1:%s/health" % port, timeout=2).status
except Exception:
    health = 0
print(json.dumps({"guard": json.loads(state) if state else None, "sha": hashlib.sha256(unit_text).hexdigest(),
                  "active": show.get("ActiveState"), "pid": int(show.get("MainPID") or 0),
                  "restarts": int(show.get("NRestarts") or 0), "health": health,
                  "last": json.loads(lines[-1]) if lines else None, "history": len(lines)}))
"""


def probe(args, address):
    stem = args.unit[:-len(".service")]
    argv = ["ssh", "-i", args.key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3", "root@" + address,
            " ".join(shlex.quote(w) for w in ["python3", "-c", PROBE, args.unit, str(args.port),
                                              "/var/lib/llmops-specdec/guard/%s.json" % stem,
                                              "/var/lib/llmops-specdec/history.jsonl"])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-500:]}


def parse_args(*required):
    """The options of a group fault: ``required`` and the common ones. (args, [[NAME, ADDRESS], ...] the head first)."""
    ap = argparse.ArgumentParser()
    for opt in ("--inventory", "--limit", "--unit", "--port", "--key") + required:
        ap.add_argument(opt, required=True)
    ap.add_argument("--node", action="append", required=True, help="NAME=ADDRESS, the head first")
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--log", default="/dev/null")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    return args, [n.split("=", 1) for n in args.node]


def main():
    args, nodes = parse_args("--step")
    root = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
    control_dir = tempfile.mkdtemp(prefix="kill-confirm-cp-")
    env = dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir, PYTHONUNBUFFERED="1")
    before = {name: probe(args, address) for name, address in nodes}
    with open(args.log, "w") as log:
        play = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             args.limit, "playbooks/switch_spec.yml", "-e", args.extra],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    out = {"step": args.step, "reached": False, "before": before}
    banner = "TASK [llmops.specdec.spec_switch : %s]" % BANNERS[args.step]
    start = time.time()
    while time.time() - start < args.timeout and play.poll() is None:
        with open(args.log, errors="replace") as handle:
            if banner in handle.read():
                out["reached"] = True
                break
        time.sleep(0.02)
    if not out["reached"]:
        play.kill()
        out["error"] = "the banner of step %s never came (playbook rc %s)" % (args.step, play.poll())
        print(json.dumps(out))
        return 1
    out["killed"] = fault.kill_run(play.pid, control_dir)
    out["killed_at"] = time.time()
    with open(args.log, errors="replace") as handle:
        seen = handle.read()
    # group.yml says the group's verdict on the head before anything is confirmed.
    out["verdict_keep"] = "serving group %s: keep - " % nodes[0][0] in seen
    play.wait()
    out["at_kill"] = {name: probe(args, address) for name, address in nodes}
    # Every node's guard ends (confirmed, kept with its group, or restored), then the head answers.
    end = {}
    while time.time() - out["killed_at"] < args.timeout:
        end = {name: probe(args, address) for name, address in nodes}
        if all("error" not in p and p["guard"] is None for p in end.values()) and end[nodes[0][0]]["health"] == 200:
            break
        time.sleep(2)
    out["end"] = end
    out["settled_s"] = round(time.time() - out["killed_at"], 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
