# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Crash whole mock GPU hosts at many points of a switch, boot them, and check what the boot left.

Runs on the controller (molecule/crash). For each case it starts `ansible-playbook playbooks/switch_spec.yml`
against one host, watches the host from the inside (a monitor on the host samples every 20 ms and streams
what changed over SSH: the unit file's checksum, the guard's state file and its inode, the unit's processes,
/health, spec_bench's payload, the history's size, the lock), and once the case's EVENT has been seen (its
Nth occurrence) and DELAY seconds have passed, crashes the host with tests/mockgpu/host/crash: SIGKILL to
nspawn and the whole guest at once, no shutdown path, then the same root boots again. Then it checks:

- the guard's state file is absent or readable JSON (never half-written), and none is left after the boot;
- the unit file is production's (or, only when the controller had already confirmed a kept candidate, that
  one), the unit active, /health 200, and a completion answers;
- the lock left nothing that blocks the next switch: the next case (or the final clean switch) must run to
  its end with rc 0;
- the history's last line is JSON, and a crash between arm and confirm left a `restored_by_guard` record
  with `why: boot`.

Events, in the order of a switch that rolls back (the default suite on the mock): lock (the switch took the
lock, the guard not armed yet), arm (the guard's state
file appears), state_write (it is rewritten: a renewal, a new inode), reclaim (production's processes gone,
its unit file untouched), unit_write (the unit file changes: the candidate's, then production's again on the
rollback), candidate_start (the candidate's processes appear), candidate_ready (/health 200 from it), bench
(spec_bench runs against it), bench_end, rollback_start (production's processes again after the candidate),
confirm (the state file removed), record (the history grows), unlock (the lock directory removed).

A case "landed" when the host's last sample before the kill still showed the stage the event opens (what
`stage` names, classified from the sample); the JSON says per case which stage the host was at when it died.
Prints one JSON document: {"cases": [...], "summary": {...}}.
Usage: crash_points.py --hosts JSON --inventory INV [--cases JSON] [--log-dir DIR] [--timeout S]
  --hosts: [{"name", "address", "key", "unit", "port", "engine"}, ...]; cases are dealt out round-robin
  and the hosts run in parallel, one case at a time each.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

# Default kill points: (event, occurrence, delay in seconds). 25 cases over the whole switch.
CASES = [
    ("lock", 1, 0.0), ("arm", 1, 0.0), ("arm", 1, 0.1), ("state_write", 1, 0.0), ("state_write", 2, 0.0), ("state_write", 3, 0.0),
    ("reclaim", 1, 0.0), ("reclaim", 1, 0.15),
    ("unit_write", 1, 0.0), ("unit_write", 1, 0.05),
    ("candidate_start", 1, 0.0), ("candidate_start", 1, 0.25), ("candidate_ready", 1, 0.0),
    ("bench", 1, 0.0), ("bench", 1, 0.5), ("bench", 1, 1.0), ("state_write_bench", 1, 0.0), ("bench_end", 1, 0.0),
    ("unit_write", 2, 0.0), ("rollback_start", 1, 0.0), ("rollback_start", 1, 0.3),
    ("confirm", 1, 0.0), ("record", 1, 0.0), ("unlock", 1, 0.0), ("unlock", 1, 0.5),
]

MONITOR = r"""
import glob, hashlib, json, os, sys, tempfile, time, urllib.request
unit, port = sys.argv[1], int(sys.argv[2])
stem = unit[:-len(".service")]
upath = "/etc/systemd/system/" + unit
guard = "/var/lib/llmops-specdec/guard/%s.json" % stem
history = "/var/lib/llmops-specdec/history.jsonl"
lock = "/run/llmops-specdec.lock"
procs_files = ["/sys/fs/cgroup/unified/system.slice/%s/cgroup.procs" % unit, "/sys/fs/cgroup/system.slice/%s/cgroup.procs" % unit]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
cache = {}
def sha(path):
    try:
        st = os.stat(path)
    except OSError:
        return ""
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    if cache.get(path, (None,))[0] != key:
        try:
            cache[path] = (key, hashlib.sha256(open(path, "rb").read()).hexdigest()[:16])
        except OSError:
            return ""
    return cache[path][1]
def procs():
    for f in procs_files:
        try:
            return bool(open(f).read().strip())
        except OSError:
            pass
    return False
def health():
    try:
        with opener.open("http://127.0.0.1:%d/health" % port, timeout=0.3) as r:
            return r.status
    except Exception:
        return 0
last = None
while True:
    try:
        gino = os.stat(guard).st_ino
    except OSError:
        gino = 0
    try:
        hsize = os.stat(history).st_size
    except OSError:
        hsize = 0
    up = procs()
    s = {"sha": sha(upath), "guard": gino, "procs": up, "health": health() if up else 0,
         "bench": bool(glob.glob(os.path.join(tempfile.gettempdir(), "ansible_*spec_bench_payload_*"))),
         "history": hsize, "lock": os.path.isdir(lock)}
    if s != last:
        s["t"] = time.time()
        print(json.dumps(s), flush=True)
        last = {k: v for k, v in s.items() if k != "t"}
    time.sleep(0.02)
"""

CHECK = r"""
import hashlib, json, os, subprocess, sys, time, urllib.request
unit, port = sys.argv[1], int(sys.argv[2])
stem = unit[:-len(".service")]
guard = "/var/lib/llmops-specdec/guard/%s.json" % stem
out = {}
try:
    raw = open(guard, "rb").read()
    try:
        out["guard_state"] = {"present": True, "json": True, "phase": json.loads(raw).get("phase")}
    except ValueError:
        out["guard_state"] = {"present": True, "json": False, "size": len(raw)}
except FileNotFoundError:
    out["guard_state"] = {"present": False}
try:
    out["sha"] = hashlib.sha256(open("/etc/systemd/system/" + unit, "rb").read()).hexdigest()[:16]
except OSError:
    out["sha"] = ""
show = dict(l.partition("=")[::2] for l in subprocess.run(["systemctl", "show", unit, "-p", "ActiveState"],
            capture_output=True, text=True).stdout.splitlines())
out["active"] = show.get("ActiveState", "")
boot = "llmops-specdec-guard-boot@%s.service" % stem
show = dict(l.partition("=")[::2] for l in subprocess.run(["systemctl", "show", boot, "-p", "Result",
            "-p", "ExecMainStatus", "-p", "ConditionResult"], capture_output=True, text=True).stdout.splitlines())
out["boot_unit"] = show
out["lock"] = os.path.isdir("/run/llmops-specdec.lock")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def get(path, data=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 headers={"Content-Type": "application/json"})
    with opener.open(req, timeout=10) as r:
        return r.status, r.read()
try:
    out["health"] = get("/health")[0]
except Exception as exc:
    out["health"] = 0
try:
    model = json.loads(get("/v1/models")[1])["data"][0]["id"]
    status, body = get("/v1/completions", json.dumps({"model": model, "prompt": "The guard", "max_tokens": 4}).encode())
    doc = json.loads(body)
    out["completion"] = {"status": status, "ok": status == 200 and bool(doc.get("choices")), "model": model}
except Exception as exc:
    out["completion"] = {"ok": False, "error": repr(exc)[:300]}
lines = []
try:
    lines = open("/var/lib/llmops-specdec/history.jsonl", "rb").read().decode("utf-8", "replace").splitlines()
except OSError:
    pass
try:
    out["history_last"] = json.loads(lines[-1]) if lines else None
    out["history_json"] = True
except ValueError:
    out["history_json"] = False
out["history_lines"] = len(lines)
print(json.dumps(out))
"""


def ssh_argv(host, cmd):
    return ["ssh", "-i", host["key"], "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3",
            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=2",
            "root@" + host["address"]] + [shlex.quote(w) for w in cmd]


def ssh(host, cmd, timeout=30):
    try:
        return subprocess.run(ssh_argv(host, cmd), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None


def check(host):
    out = ssh(host, ["python3", "-c", CHECK, host["unit"], str(host["port"])])
    if out is None or out.returncode != 0:
        return None
    return json.loads(out.stdout)


def stage_of(s, prod, seen):
    """The stage a sample shows, in the words of the events."""
    if s is None:
        return "unknown"
    cand = s["sha"] != prod
    if not s["guard"]:
        if seen.get("confirm"):
            return "confirmed" if s["lock"] else "unlocked"
        return "unarmed"
    if cand:
        if s["bench"]:
            return "bench"
        if not s["procs"]:
            return "unit_written" if not seen.get("candidate_start") else "candidate_stopped"
        if s["health"] != 200:
            return "candidate_start"
        return "candidate_ready" if not seen.get("bench") else "bench_end"
    if seen.get("candidate_start"):
        return "rollback_start" if s["procs"] else "rollback_unit_written"
    return "reclaim" if not s["procs"] else "armed"


# What the host must still show for a kill after EVENT to have landed where the case meant it.
LANDS = {"lock": {"unarmed"}, "arm": {"armed"}, "state_write": {"armed", "reclaim", "unit_written", "candidate_start", "candidate_ready"},
         "reclaim": {"reclaim"}, "unit_write": {"unit_written", "rollback_unit_written"},
         "candidate_start": {"candidate_start"}, "candidate_ready": {"candidate_ready"}, "bench": {"bench"},
         "state_write_bench": {"bench"}, "bench_end": {"bench_end", "candidate_stopped", "rollback_unit_written"},
         "rollback_start": {"rollback_start"}, "confirm": {"confirmed", "unlocked"}, "record": {"confirmed", "unlocked"},
         "unlock": {"unlocked"}}


def events(prev, s, prod, seen):
    """The events between two samples (prev None: the first)."""
    out = []
    if prev is None:
        return out
    if s["lock"] and not prev["lock"] and not seen.get("lock"):
        out.append("lock")
    if s["guard"] and not prev["guard"]:
        out.append("arm")
    elif s["guard"] and prev["guard"] and s["guard"] != prev["guard"]:
        out.append("state_write_bench" if s["bench"] else "state_write")
    if prev["guard"] and not s["guard"] and seen.get("candidate_start"):
        out.append("confirm")
    if s["sha"] != prev["sha"] and s["guard"]:
        out.append("unit_write")
    if s["guard"] and s["sha"] == prod and prev["procs"] and not s["procs"] and not seen.get("candidate_start"):
        out.append("reclaim")
    if s["procs"] and not prev["procs"] and s["sha"] != prod:
        out.append("candidate_start")
    if s["procs"] and not prev["procs"] and s["sha"] == prod and seen.get("candidate_start"):
        out.append("rollback_start")
    if s["health"] == 200 and prev["health"] != 200 and s["sha"] != prod:
        out.append("candidate_ready")
    if s["bench"] and not prev["bench"] and seen.get("candidate_start"):
        out.append("bench")
    if prev["bench"] and not s["bench"] and seen.get("candidate_start"):
        out.append("bench_end")
    if s["history"] > prev["history"] and seen.get("candidate_start"):
        out.append("record")
    if prev["lock"] and not s["lock"] and seen.get("candidate_start"):
        out.append("unlock")
    return out


def quiet(state):
    """Serving, with no switch lock held and no guard armed: where a case must start."""
    return bool(state and state["completion"]["ok"] and not state["lock"] and not state["guard_state"]["present"])


def settled(host, timeout=60):
    """The host's state once it is quiet (or after ``timeout``), and the seconds that took. A case's kill leaves
    the host booted and serving; only a playbook that ended on its own can leave a lock or a guard behind, which
    the guard releases at its deadline."""
    t0 = time.time()
    state = check(host)
    while not quiet(state) and time.time() - t0 < timeout:
        time.sleep(1)
        state = check(host)
    return state, round(time.time() - t0, 1)


def crash(root, host):
    t = time.time()
    out = subprocess.run([os.path.join(root, "tests/mockgpu/host/crash"), host["name"]], capture_output=True,
                         text=True, timeout=180, check=False)
    doc = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else None
    return t, doc, out.stderr[-2000:]


def run_case(root, args, host, case, log_path):
    monitors = []
    try:
        return _run_case(root, args, host, case, log_path, monitors)
    finally:
        for monitor in monitors:  # its SSH session ends with the host's crash, or here
            monitor.kill()
            monitor.wait()


def _run_case(root, args, host, case, log_path, monitors):
    event, nth, delay = case
    out = {"host": host["name"], "engine": host["engine"], "event": event, "nth": nth, "delay": delay,
           "reached": False}
    first, out["seconds_to_settle"] = settled(host)
    if not quiet(first):
        # What an earlier case left (it fails there too): say so here rather than run a switch into it.
        out["error"] = "the host is not serving and idle before the switch (no lock, no guard armed): %s" % first
        return out
    prod = first["sha"]
    out["prod_sha"] = prod
    monitor = subprocess.Popen(ssh_argv(host, ["python3", "-c", MONITOR, host["unit"], str(host["port"])]),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    monitors.append(monitor)
    samples = []
    reader_done = threading.Event()

    def read():
        for line in monitor.stdout:
            try:
                samples.append(json.loads(line))
            except ValueError:
                pass
        reader_done.set()

    threading.Thread(target=read, daemon=True).start()
    time.sleep(0.3)  # the monitor's first sample
    with open(log_path, "w") as log:
        play = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             host["name"], "playbooks/switch_spec.yml", "-e", "method=ngram", "-e", args.extra],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    seen, count, done, prev = {}, 0, 0, None
    start = time.time()
    trigger_at = None
    while time.time() - start < args.timeout:
        while done < len(samples):
            s = samples[done]
            done += 1
            for ev in events(prev, s, prod, seen):
                seen[ev] = seen.get(ev, 0) + 1
                if ev == event:
                    count += 1
                    if count == nth and trigger_at is None:
                        trigger_at = time.time() + delay
                        out["event_at"] = s["t"]
            prev = s
        if trigger_at is not None and time.time() >= trigger_at:
            break
        if play.poll() is not None and done >= len(samples):
            time.sleep(0.3)  # the monitor's last samples after the play ended
            if done >= len(samples):
                break
        time.sleep(0.005)
    if trigger_at is None:
        end(play)
        out["error"] = "event %s #%d not seen (playbook rc %s; events seen %s)" % (event, nth, play.returncode, seen)
        out["play_tail"] = play_tail(log_path)
        return out
    out["reached"] = True
    last = samples[-1] if samples else None
    out["stage_before_kill"] = stage_of(last, prod, seen)
    out["landed"] = out["stage_before_kill"] in LANDS[event]
    out["kill_at"], out["crash"], err = crash(root, host)
    # From the sample that showed the event (host clock: this machine's) to the first SIGKILL.
    kill_sent = (out["crash"] or {}).get("kill_at", out["kill_at"])
    out["seconds_event_to_kill"] = round(kill_sent - out.get("event_at", kill_sent), 3)
    # Samples that arrived while crash was starting are still from before the kill (the guest died with it).
    reader_done.wait(10)
    last = samples[-1] if samples else None
    out["stage_at_kill"] = stage_of(last, prod, seen)
    out["landed"] = out["stage_at_kill"] in LANDS[event]
    out["last_sample"] = last
    out["seen"] = seen
    # The controller lost its host: the playbook fails or hangs on it; end it.
    try:
        play.wait(timeout=5)
    except subprocess.TimeoutExpired:
        end(play)
    if out["crash"] is None:
        out["error"] = "crash failed: " + err
        return out
    # The host booted (crash waits for running/degraded); production must answer within the bound.
    t0 = time.time()
    after = None
    while time.time() - t0 < 60:
        after = check(host)
        # Serving as judge() means it: /health 200 too. One probe asks /health, then a completion: an engine that
        # became ready between the two answered 503, then 200, and is asked again.
        if after and after["active"] == "active" and after["health"] == 200 and after["completion"]["ok"]:
            break
        time.sleep(0.3)
    out["seconds_boot_to_serving"] = round(time.time() - t0, 2)
    out["after"] = after
    out["ok"], out["why"] = judge(out, after, prod, seen, last, first["history_lines"])
    if not out["ok"]:
        out["play_tail"] = play_tail(log_path)
        out["journal"] = journal(host)
    return out


def end(play):
    """Kill what is left of a case's playbook (its own session); it may have ended already."""
    try:
        os.killpg(play.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    play.wait()


def journal(host, lines=25):
    """This boot's journal of the unit and of the guard's boot unit: what a failed case needs to be read."""
    stem = host["unit"][:-len(".service")]
    done = ssh(host, ["journalctl", "-b", "--no-pager", "-o", "short-monotonic", "-n", str(lines),
                      "-u", host["unit"], "-u", "llmops-specdec-guard-boot@%s.service" % stem])
    return done.stdout.splitlines()[-lines:] if done is not None else ["(journalctl did not answer)"]


def play_tail(log_path, lines=12):
    """The playbook's last lines that say why it ended: what a case that did not reach its event needs."""
    try:
        with open(log_path, errors="replace") as log:
            text = log.read().splitlines()
    except OSError:
        return []
    said = [line for line in text if line.startswith(("fatal:", "failed:", "ERROR", "TASK [", "PLAY RECAP")) or "msg" in line]
    return [line[:600] for line in said[-lines:]]


def judge(case, after, prod, seen, last, lines_before):
    """(ok, reasons it is not)."""
    why = []
    if after is None:
        return False, ["the host does not answer over SSH after the boot"]
    gs = after["guard_state"]
    if gs["present"] and not gs["json"]:
        why.append("the guard's state file is half-written: %s" % gs)
    if gs["present"]:
        why.append("a guard state file is left after the boot (phase %s)" % gs.get("phase"))
    kept = (after.get("history_last") or {}).get("outcome") == "kept"
    expected = {prod} | ({after["sha"]} if kept and last is not None and not last["guard"] else set())
    if after["sha"] not in expected:
        why.append("the unit file is %s, not production's %s" % (after["sha"], prod))
    if after["active"] != "active":
        why.append("the unit is %s" % after["active"])
    if not after["completion"]["ok"]:
        why.append("no completion: %s" % after["completion"])
    if after["health"] != 200:
        why.append("/health %s" % after["health"])
    if not after["history_json"]:
        why.append("the history's last line is not JSON")
    if after["lock"]:
        why.append("a lock is there after the boot")
    armed = last is not None and bool(last["guard"])
    rec = after.get("history_last") or {}
    # Only a record this case added counts (the last line may be an earlier case's).
    case["guard_restored_at_boot"] = after["history_lines"] > lines_before and \
        rec.get("outcome") == "restored_by_guard" and rec.get("why") == "boot"
    if armed and not case["guard_restored_at_boot"]:
        why.append("killed with the guard armed, but the last record is %s/%s, not restored_by_guard/boot"
                   % (rec.get("outcome"), rec.get("why")))
    return not why, why


def final_switch(root, args, host, log_path):
    """A clean switch after the last crash: no lock or state left blocks it."""
    with open(log_path, "w") as log:
        rc = subprocess.call(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             host["name"], "playbooks/switch_spec.yml", "-e", "method=ngram", "-e", args.extra],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=300)
    after = check(host)
    return {"host": host["name"], "rc": rc, "serving": bool(after and after["completion"]["ok"]),
            "guard_state": after and after["guard_state"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--inventory", required=True)
    ap.add_argument("--cases", default="")
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--log-dir", default="/tmp")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    root = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
    hosts = json.loads(args.hosts)
    cases = [tuple(c) for c in json.loads(args.cases)] if args.cases else CASES
    os.makedirs(args.log_dir, exist_ok=True)
    t0 = time.time()
    results = [None] * len(cases)
    finals = [None] * len(hosts)

    def worker(h, host):
        for i in range(h, len(cases), len(hosts)):
            log = os.path.join(args.log_dir, "crash-%02d-%s-%s.log" % (i, host["name"], cases[i][0]))
            try:
                results[i] = run_case(root, args, host, cases[i], log)
            except Exception as exc:  # one broken case must not hide the others
                results[i] = {"host": host["name"], "event": cases[i][0], "error": repr(exc)}
            results[i]["case"] = i
        finals[h] = final_switch(root, args, host, os.path.join(args.log_dir, "crash-final-%s.log" % host["name"]))

    threads = [threading.Thread(target=worker, args=(h, host)) for h, host in enumerate(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = {
        "cases": len(cases),
        "reached": sum(bool(r.get("reached")) for r in results),
        "landed": sum(bool(r.get("landed")) for r in results),
        "ok": sum(bool(r.get("ok")) for r in results),
        "guard_restored_at_boot": sum(bool(r.get("guard_restored_at_boot")) for r in results),
        "stages_at_kill": sorted({r.get("stage_at_kill") for r in results if r.get("stage_at_kill")}),
        "final_switches_ok": sum(bool(f and f["rc"] == 0 and f["serving"]) for f in finals),
        "seconds": round(time.time() - t0, 1),
    }
    keys = ("case", "host", "event", "nth", "delay", "error", "why", "stage_at_kill", "seconds_to_settle", "seconds_boot_to_serving",
            "play_tail", "journal")
    failed = [{k: r[k] for k in keys if k in r} for r in results if not r.get("ok")]
    print(json.dumps({"summary": summary, "failed": failed, "cases": results, "finals": finals}))
    return 0 if summary["ok"] == len(cases) and summary["final_switches_ok"] == len(hosts) else 1


if __name__ == "__main__":
    sys.exit(main())
