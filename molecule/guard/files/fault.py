# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lose the controller in the middle of a switch, for real, and time how long production is down.

Runs on the controller. Starts `ansible-playbook playbooks/switch_spec.yml` against one mock GPU host
in a session of its own, watches the host over SSH until the switch reaches STAGE, then delivers
FAULT, and watches until the host's guard has put production back and it answers again:

  stages: after_reclaim (production stopped, candidate not installed yet), load (candidate installed and
          loading), bench (candidate serving, the benchmark running), rollback (the candidate lost and
          production's unit is back, loading again), parked (spec_switch_park: the baseline parked and the
          candidate's own unit beside it installed)
  faults: kill (SIGKILL to ansible-playbook and its workers), int (SIGINT, as Ctrl-C), link (the host's
          network link taken down on the controller side: SSH cut), reboot (the host reboots)

Prints one JSON document: the times (fault, production answering again, seconds between), the
guard's history record, the playbook's exit code. molecule/guard asserts on it and on the host;
bench/guard_faults.py runs it per fault for the figures in bench/README.md.
Usage: fault.py --host NAME --address IP --key KEY --inventory INV --unit UNIT --port PORT
                --stage STAGE --fault FAULT [--veth VETH] [--extra JSON] [--timeout S]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time

PROBE = r"""
import hashlib, json, os, subprocess, sys, urllib.request
unit, port, guard = sys.argv[1], sys.argv[2], sys.argv[3]
def sha(p):
    try:
        return hashlib.sha256(open(p, "rb").read()).hexdigest()
    except OSError:
        return ""
def health():
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/health" % port, timeout=2) as r:
            return r.status
    except Exception:
        return 0
state = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState", "--value"], capture_output=True, text=True).stdout.strip()
beside = "/etc/systemd/system/" + unit[:-len(".service")] + "-candidate.service"
print(json.dumps({"sha": sha("/etc/systemd/system/" + unit), "active": state, "guard": os.path.exists(guard),
                  "health": health(), "now": __import__("time").time(),
                  "parked": os.path.exists("/run/llmops-specdec/parked/" + unit + ".json"),
                  "beside": os.path.exists(beside)}))
"""


def _ssh(args, cmd, timeout=15):
    argv = ["ssh", "-i", args.key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3",
            "root@" + args.address] + [shlex.quote(word) for word in cmd]  # ssh hands one line to the shell
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def probe(args):
    # The guard's state file (_guard.state_path): the unit's name without ".service".
    guard = "/var/lib/llmops-specdec/guard/%s.json" % args.unit[:-len(".service")]
    try:
        out = _ssh(args, ["python3", "-c", PROBE, args.unit, str(args.port), guard])
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def reached(stage, seen, p, prod):
    if p is None:
        return False
    if stage == "after_reclaim":
        return p["guard"] and p["sha"] == prod and p["active"] != "active"
    if stage == "load":
        return p["sha"] != prod and p["active"] in ("active", "activating") and p["health"] != 200
    if stage == "bench":
        return p["sha"] != prod and p["health"] == 200
    if stage == "rollback":
        return seen.get("candidate") and p["guard"] and p["sha"] == prod and p["health"] != 200
    if stage == "parked":
        return p["guard"] and p["sha"] == prod and p["parked"] and p["beside"]
    raise ValueError(stage)


def history_tail(args, n=3):
    out = _ssh(args, ["tail", "-n", str(n), "/var/lib/llmops-specdec/history.jsonl"])
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def host_veth(address):
    """The controller's end of the host's link: the interface holding ADDRESS's .1 (tests/mockgpu/host/lib.sh
    names it by checkout slot and index, sd120h in slot 0, sd1x120h in slot 1)."""
    mine = address.rsplit(".", 1)[0] + ".1"
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields and fields[fields.index("inet") + 1].split("/")[0] == mine:
            return fields[1].split("@")[0]
    raise SystemExit("no interface holds %s (the host's link)" % mine)


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--host", "--address", "--key", "--inventory", "--unit", "--port", "--stage", "--fault"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--veth", default="", help="the host's link (default: found by --address)")
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--log", default="/dev/null")
    args = ap.parse_args()
    root = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
    if args.fault == "link" and not args.veth:
        args.veth = host_veth(args.address)

    first = probe(args)
    if first is None:
        print(json.dumps({"stage": args.stage, "fault": args.fault, "host": args.host, "reached": False,
                          "error": "the host does not answer over SSH before the switch"}))
        return 1
    prod = first["sha"]
    if os.path.dirname(args.log):
        os.makedirs(os.path.dirname(args.log), exist_ok=True)
    with open(args.log, "w") as log:
        play = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             args.host, "playbooks/switch_spec.yml", "-e", "method=ngram", "-e", args.extra],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    out = {"stage": args.stage, "fault": args.fault, "host": args.host, "reached": False}
    seen = {}
    start = time.time()
    while time.time() - start < args.timeout and play.poll() is None:
        p = probe(args)
        if p and p["sha"] and p["sha"] != prod:
            seen["candidate"] = True
        if reached(args.stage, seen, p, prod):
            out["reached"] = True
            break
        time.sleep(0.2)
    if not out["reached"]:
        play.kill()
        out.update(error="stage %s not reached (playbook rc %s)" % (args.stage, play.poll()))
        print(json.dumps(out))
        return 1
    if args.stage == "bench":
        time.sleep(1.5)  # into the benchmark, not at its first request

    out["fault_at"] = time.time()
    if args.fault == "kill":
        os.killpg(play.pid, signal.SIGKILL)
    elif args.fault == "int":
        os.killpg(play.pid, signal.SIGINT)
    elif args.fault == "link":
        subprocess.run(["ip", "link", "set", args.veth, "down"], check=True)
    elif args.fault == "reboot":
        subprocess.run([os.path.join(root, "tests/mockgpu/host/reboot"), args.host], check=True,
                       capture_output=True, text=True, timeout=120)
    else:
        raise ValueError(args.fault)

    if args.fault == "link":
        # The host is cut off: it restores by itself; look again once its guard must have fired.
        time.sleep(float(json.loads(args.extra).get("specdec_fault_link_down_s", 60)))
        subprocess.run(["ip", "link", "set", args.veth, "up"], check=True)
    while time.time() - out["fault_at"] < args.timeout:
        p = probe(args)
        if p and not p["guard"] and p["sha"] == prod and p["active"] == "active" and p["health"] == 200 \
                and not p["parked"] and not p["beside"]:
            out["answering_seen_at"] = p["now"]
            break
        time.sleep(0.2)
    try:
        play.wait(timeout=10 if args.fault != "link" else 60)
    except subprocess.TimeoutExpired:
        os.killpg(play.pid, signal.SIGKILL)
        play.wait()
    out["playbook_rc"] = play.returncode
    out["history"] = history_tail(args)
    guard = next((r for r in reversed(out["history"]) if r.get("outcome") == "restored_by_guard"), None)
    out["guard_record"] = guard
    # Seen from outside: the first probe that found production's unit active and /health answering
    # (0.2 s polls plus one SSH round trip late at most). The host's clock is this machine's.
    ready = out.get("answering_seen_at")
    out["down_s"] = round(ready - out["fault_at"], 2) if ready else None
    print(json.dumps(out))
    return 0 if "answering_seen_at" in out else 1


if __name__ == "__main__":
    sys.exit(main())
