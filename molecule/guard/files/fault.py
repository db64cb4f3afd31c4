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
  faults: kill (SIGKILL to every process of the run: ansible-playbook, its workers, which call setsid() and
          so are outside its process group, their ssh, and the run's ssh ControlMasters; the JSON's `killed`
          says how many it reached and lists any survivor), int (SIGINT, as Ctrl-C), link (the host's
          network link taken down on the controller side: SSH cut), reboot (the host reboots), stop
          (SIGSTOP to ansible-playbook, its workers and their ssh: the controller is alive but frozen; once the guard
          has put production back and it answers, SIGCONT, and the playbook finishes, within --resume-timeout)

With --fault stop (or --in-module), the fault lands only while the stage's module runs on the host (its
AnsiballZ payload directory exists: engine_ready at load, spec_bench at bench) and a worker of
ansible-playbook exists outside its process group, never between two tasks, when the worker may not exist yet or not
yet have left the group (spec_bench runs async: it runs on the host before the worker that waits on it
starts). At --stage bench the benchmark ends on the host while the controller is frozen, so the controller's
next step on the host, once resumed, is whatever follows the benchmark (the rollback's gpu_reclaim when the
verdict is a rollback), with its lease already lost. The JSON then also has `frozen` (the processes frozen,
how many of them outside ansible-playbook's process group, how many were seen stopped, how many had already
exited, and any still running), `pid_restored` (production's MainPID when first seen restored), `resumed_at`
and `pid_end` (its MainPID once the playbook ended).

Prints one JSON document: the times (fault, production answering again, seconds between), the
guard's history record, the playbook's exit code. molecule/guard asserts on it and on the host;
bench/guard_faults.py runs it per fault for the figures in bench/README.md.
Usage: fault.py --host NAME --address IP --key KEY --inventory INV --unit UNIT --port PORT
                --stage STAGE --fault FAULT [--veth VETH] [--extra JSON] [--timeout S] [--log FILE]
                [--resume-timeout S] [--in-module]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

PROBE = r"""
import glob, hashlib, json, os, subprocess, sys, tempfile, urllib.request
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
show = dict(line.partition("=")[::2] for line in subprocess.run(
    ["systemctl", "show", unit, "-p", "ActiveState", "-p", "MainPID"], capture_output=True, text=True).stdout.splitlines())
beside = "/etc/systemd/system/" + unit[:-len(".service")] + "-candidate.service"
# A module runs on the host while AnsiballZ's payload directory exists (tempfile.mkdtemp, removed at its end).
running = sorted(os.path.basename(d)[len("ansible_"):].partition("_payload_")[0].rpartition(".")[2]
                 for d in glob.glob(os.path.join(tempfile.gettempdir(), "ansible_*_payload_*")))
print(json.dumps({"sha": sha("/etc/systemd/system/" + unit), "active": show.get("ActiveState", ""),
                  "pid": int(show.get("MainPID") or 0), "guard": os.path.exists(guard),
                  "health": health(), "now": __import__("time").time(), "modules": running,
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


def reached(stage, seen, p, prod, fault=None, in_module=False):
    if p is None:
        return False
    if stage == "after_reclaim":
        return p["guard"] and p["sha"] == prod and p["active"] != "active"
    # A frozen controller (or --in-module) must be caught while a module runs on the host: between two tasks
    # its worker may not exist yet, or not yet have left ansible-playbook's process group.
    in_module = in_module or fault == "stop"
    if stage == "load":
        return p["sha"] != prod and p["active"] in ("active", "activating") and p["health"] != 200 \
            and (not in_module or "engine_ready" in p["modules"])
    if stage == "bench":
        # A frozen controller must be frozen with spec_bench running, not before it was sent (its next step
        # would be the benchmark), nor after the benchmark (the next step would have started already).
        # --in-module asks the same of any fault (a fault during a long benchmark, not at its start).
        return p["sha"] != prod and p["health"] == 200 and (not in_module or "spec_bench" in p["modules"])
    if stage == "rollback":
        return seen.get("candidate") and p["guard"] and p["sha"] == prod and p["health"] != 200
    if stage == "parked":
        return p["guard"] and p["sha"] == prod and p["parked"] and p["beside"]
    raise ValueError(stage)


def history_tail(args, n=3):
    out = _ssh(args, ["tail", "-n", str(n), "/var/lib/llmops-specdec/history.jsonl"])
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def processes():
    """{pid: (state letter, ppid, pgrp)} of every process on this machine."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        found[int(name)] = (fields[0], int(fields[1]), int(fields[2]))
    return found


def tree(pid, procs):
    """PID, its process group, and all their descendants: ansible-playbook's workers call setsid() (their
    own session and group), and so does the ssh they start; ssh's ControlPersist master daemonizes, so it
    is not in the tree and keeps the connection up, as a suspended machine's kernel would."""
    found = {pid} | {p for p, (_s, _pp, pgrp) in procs.items() if pgrp == pid}
    while True:
        more = {p for p, (_s, ppid, _g) in procs.items() if ppid in found} - found
        if not more:
            return found
        found |= more


def has_worker(pid):
    """Whether ansible-playbook has a worker now (a member of its tree outside its process group). The
    benchmark runs async: between launching it and the first wait on it, its module runs on the host while
    no worker of the controller exists yet, and a fault meant to land on the waiting worker would miss it."""
    procs = processes()
    return any(procs[p][2] != pid for p in tree(pid, procs) if p in procs)


def freeze(pid, timeout=5.0):
    """SIGSTOP ansible-playbook and everything it started (its workers, their ssh), until none runs."""
    os.killpg(pid, signal.SIGSTOP)  # first: a stopped ansible-playbook starts no new worker
    stopped = set()
    start = time.time()
    while True:
        procs = processes()
        members = tree(pid, procs)
        for member in sorted(members - stopped):
            try:
                os.kill(member, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            stopped.add(member)
        procs = processes()
        running = sorted(p for p in members if p in procs and procs[p][0] not in ("T", "t", "Z", "X"))
        if not running or time.time() - start > timeout:
            # A worker whose task had just ended (or its ssh) may be a zombie: neither running nor stopped.
            return {"processes": len(members), "outside_group": sum(procs.get(p, ("", 0, pid))[2] != pid for p in members),
                    "stopped": sum(procs.get(p, ("",))[0] in ("T", "t") for p in members),
                    "exited": sum(procs.get(p, ("Z",))[0] in ("Z", "X") for p in members),
                    "running": running}, stopped
        time.sleep(0.05)


def control_masters(control_dir, procs):
    """The ssh ControlPersist masters of this run: they daemonize (not in the tree), and their title names
    their socket, which lies in the run's own ANSIBLE_SSH_CONTROL_PATH_DIR."""
    found = set()
    for pid in procs:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if control_dir in cmdline and cmdline.startswith("ssh"):
            found.add(pid)
    return found


def kill_run(pid, control_dir):
    """SIGKILL every process of the run, as a dead machine would lose them: ansible-playbook, its workers
    (setsid(): outside its group), their ssh, and the ssh ControlMasters of this run. Frozen first, so that
    nothing of the run starts anything while it is killed. Says how many it reached and what survived."""
    seen, stopped = freeze(pid)
    procs = processes()
    members = tree(pid, procs) | stopped
    masters = control_masters(control_dir, procs)
    for member in sorted(members | masters):
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    procs = processes()
    survivors = sorted(p for p in members | masters if p in procs and procs[p][0] not in ("Z", "X"))
    return {"processes": len(members), "outside_group": seen["outside_group"], "control_masters": len(masters),
            "survivors": survivors}


def thaw(pid, stopped):
    """SIGCONT what freeze() stopped, ansible-playbook last."""
    for member in sorted(stopped - {pid}) + [pid]:
        try:
            os.kill(member, signal.SIGCONT)
        except ProcessLookupError:
            pass
    os.killpg(pid, signal.SIGCONT)


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
    ap.add_argument("--in-module", action="store_true",
                    help="--stage bench: wait until spec_bench runs on the host, whatever the fault")
    ap.add_argument("--resume-timeout", type=float, default=240,
                    help="--fault stop: how long the playbook may take to finish once resumed")
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
    # The run's own ssh ControlMasters: a socket directory of its own, so that --fault kill finds them.
    control_dir = tempfile.mkdtemp(prefix="fault-cp-")
    env = dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir)
    with open(args.log, "w") as log:
        play = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             args.host, "playbooks/switch_spec.yml", "-e", "method=ngram", "-e", args.extra],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    out = {"stage": args.stage, "fault": args.fault, "host": args.host, "reached": False}
    seen = {}
    start = time.time()
    while time.time() - start < args.timeout and play.poll() is None:
        p = probe(args)
        if p and p["sha"] and p["sha"] != prod:
            seen["candidate"] = True
        if reached(args.stage, seen, p, prod, args.fault, args.in_module) \
                and (not (args.in_module or args.fault == "stop") or has_worker(play.pid)):
            out["reached"] = True
            break
        time.sleep(0.2)
    if not out["reached"]:
        play.kill()
        out.update(error="stage %s not reached (playbook rc %s)" % (args.stage, play.poll()))
        print(json.dumps(out))
        return 1
    if args.stage == "bench" and args.fault != "stop" and not args.in_module:
        time.sleep(1.5)  # into the benchmark, not at its first request

    out["fault_at"] = time.time()
    frozen = set()  # what --fault stop stopped, to continue it
    if args.fault == "kill":
        out["killed"] = kill_run(play.pid, control_dir)
    elif args.fault == "int":
        os.killpg(play.pid, signal.SIGINT)
    elif args.fault == "link":
        subprocess.run(["ip", "link", "set", args.veth, "down"], check=True)
    elif args.fault == "stop":
        out["frozen"], frozen = freeze(play.pid)
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
            if args.fault == "stop":
                out["pid_restored"] = p["pid"]
            break
        time.sleep(0.2)
    if args.fault == "stop":
        # The guard has restored production (or the wait ran out): the controller resumes where it froze.
        thaw(play.pid, frozen)
        out["resumed_at"] = time.time()
    try:
        play.wait(timeout={"link": 60, "stop": args.resume_timeout}.get(args.fault, 10))
    except subprocess.TimeoutExpired:
        out["playbook_killed"] = True
        os.killpg(play.pid, signal.SIGKILL)
        play.wait()
    out["playbook_rc"] = play.returncode
    if args.fault == "stop":
        end = probe(args)
        out["pid_end"] = end["pid"] if end else None
    out["history"] = history_tail(args)
    guard = next((r for r in reversed(out["history"]) if r.get("outcome") == "restored_by_guard"), None)
    out["guard_record"] = guard
    # The guard's own view (the host's clock is this machine's): from the fault until the restored production
    # answered its readiness probe. Unlike down_s, a fault that cuts the link does not hide it.
    if guard and guard.get("ready_at"):
        ready_at = datetime.datetime.strptime(guard["ready_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        out["guard_ready_s"] = round(ready_at.timestamp() - out["fault_at"], 2)
    # Seen from outside: the first probe that found production's unit active and /health answering
    # (0.2 s polls plus one SSH round trip late at most). The host's clock is this machine's.
    ready = out.get("answering_seen_at")
    out["down_s"] = round(ready - out["fault_at"], 2) if ready else None
    print(json.dumps(out))
    return 0 if "answering_seen_at" in out else 1


if __name__ == "__main__":
    sys.exit(main())
