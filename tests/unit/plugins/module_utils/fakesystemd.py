# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Copied with a shebang naming the test's Python in place of this line (guard_host.py, bench/guard_reclaim_h200.py).
"""A fake systemd for tests and benches without one: run as ``systemctl`` or ``systemd-run`` (symlinks).

State in files under ``$FAKE_SYSTEMD_DIR`` (see guard_host.py); unit files read from ``$FAKE_UNIT_DIR`` at
``daemon-reload``; every unit's main process runs under a ``supervise`` process of this script that
records how it ended. Stdlib only, so bench/guard_reclaim_h200.py can use it on a GPU machine too.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.environ["FAKE_SYSTEMD_DIR"]
UNIT_DIR = os.environ["FAKE_UNIT_DIR"]
PASS_ENV = ("PATH", "LD_LIBRARY_PATH", "MOCKGPU_CONFIG", "MOCKGPU_REGISTRY", "MOCKGPU_DEV_DIR",
            "FAKE_SYSTEMD_DIR", "FAKE_UNIT_DIR", "LANG", "CUDA_VISIBLE_DEVICES", "BENCH_MOCK")


def path(kind, name):
    return os.path.join(ROOT, kind, name + (".json" if kind != "logs" else ".log"))


def load(kind, name):
    try:
        with open(path(kind, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save(kind, name, doc):
    tmp = path(kind, name) + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path(kind, name))


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def template_of(name):
    if "@" in name:
        return name.split("@")[0] + "@." + name.rsplit(".", 1)[1], name.split("@", 1)[1].rsplit(".", 1)[0]
    return None, None


def parse(text, instance):
    out = {"exec": None, "env": {}}
    for line in text.splitlines():
        line = line.strip()
        if instance is not None:
            line = line.replace("%i", instance)
        if line.startswith("ExecStart="):
            out["exec"] = shlex.split(line[len("ExecStart="):])
        elif line.startswith("Environment="):
            for item in shlex.split(line[len("Environment="):]):
                key, _sep, value = item.partition("=")
                out["env"][key] = value
    return out


def daemon_reload():
    for fname in os.listdir(os.path.join(ROOT, "loaded")):
        os.unlink(os.path.join(ROOT, "loaded", fname))
    for fname in os.listdir(UNIT_DIR):
        if fname.startswith(".") or not fname.endswith(".service"):
            continue
        with open(os.path.join(UNIT_DIR, fname)) as f:
            save("loaded", fname, dict(parse(f.read(), None), file=os.path.join(UNIT_DIR, fname)))


def definition(name):
    d = load("loaded", name)
    if d is None:
        tmpl, inst = template_of(name)
        if tmpl and os.path.exists(os.path.join(UNIT_DIR, tmpl)):
            with open(os.path.join(UNIT_DIR, tmpl)) as f:
                d = dict(parse(f.read(), inst), file=os.path.join(UNIT_DIR, tmpl))
    return d


def state(name):
    u = load("units", name)
    if u is None or not u.get("pid"):
        return (u or {}).get("state", "inactive"), 0
    if alive(u["pid"]):
        return ("deactivating" if u.get("stopping") else "active"), u["pid"]
    if u.get("exit") is None and alive(u.get("supervisor", 0)):
        return ("deactivating" if u.get("stopping") else "active"), 0
    return ("inactive" if u.get("stopping") or u.get("exit") == 0 else "failed"), 0


def spawn(name, argv, env, transient=False):
    u = load("units", name) or {}
    u.update(pid=None, exit=None, stopping=False, transient=transient, argv=argv, starts=u.get("starts", 0) + 1)
    save("units", name, u)
    full = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    full.update(env)
    log = open(path("logs", name), "ab")
    subprocess.Popen([sys.executable, __file__, "supervise", name, json.dumps(argv)], env=full,
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    end = time.monotonic() + 10
    while (load("units", name) or {}).get("pid") is None and (load("units", name) or {}).get("exit") is None:
        if time.monotonic() > end:
            return 1
        time.sleep(0.005)
    return 0


def supervise(name, argv):
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    except OSError as exc:
        u = load("units", name)
        u.update(exit=203, error=str(exc))
        save("units", name, u)
        return
    u = load("units", name)
    u.update(pid=child.pid, supervisor=os.getpid())
    save("units", name, u)
    rc = child.wait()
    u = load("units", name)
    u["exit"] = rc
    if u.get("transient") and rc == 0:
        os.unlink(path("units", name))
        return
    save("units", name, u)


def show(name, props):
    st, pid = state(name)
    loaded = definition(name) is not None or (load("units", name) or {}).get("transient")
    if (load("units", name) or {}).get("transient") and load("units", name).get("exit") == 0:
        loaded = False
    values = {"LoadState": "loaded" if loaded else "not-found", "ActiveState": st,
              "SubState": {"active": "running", "deactivating": "stop-sigterm"}.get(st, "dead" if st == "inactive" else st),
              "MainPID": str(pid), "ControlGroup": ("/system.slice/" + name) if pid else "",
              "Result": "exit-code" if st == "failed" else "success", "NRestarts": "0",
              "ExecMainStatus": str((load("units", name) or {}).get("exit") or 0), "ExecMainCode": "1",
              "ExecMainStartTimestampMonotonic": "0", "FragmentPath": (definition(name) or {}).get("file", "")}
    return "".join("%s=%s\n" % (p, values.get(p, "")) for p in props)


def stop(name, block):
    u = load("units", name)
    st, pid = state(name)
    if u is None or st in ("inactive", "failed"):
        return 0
    u["stopping"] = True
    save("units", name, u)
    if pid:
        os.kill(pid, signal.SIGTERM)
    if block:
        end = time.monotonic() + 10
        while state(name)[0] not in ("inactive", "failed") and time.monotonic() < end:
            time.sleep(0.01)
    return 0


def systemctl(args):
    flags = [a for a in args if a.startswith("-")]
    words = [a for a in args if not a.startswith("-")]
    verb, names = words[0], words[1:]
    if verb == "daemon-reload":
        daemon_reload()
        return 0
    if verb == "show":
        props = [f.split("=", 1)[1] for f in flags if f.startswith("--property=")][0].split(",")
        text = show(names[0], props)
        if "--value" in flags:  # systemctl show --value: the values alone, one a line
            text = "".join(line.partition("=")[2] + "\n" for line in text.splitlines())
        sys.stdout.write(text)
        return 0
    name = names[0]
    if verb == "restart":  # the rollback's (spec_unit): stop, waiting for it, then start
        stop(name, True)
        verb = "start"
    if verb == "start":
        d = definition(name)
        if d is None:
            sys.stderr.write("Failed to start %s: Unit %s not found.\n" % (name, name))
            return 5
        if state(name)[0] in ("active", "deactivating"):
            return 0
        return spawn(name, d["exec"], d["env"])
    if verb == "stop":
        return stop(name, "--no-block" not in flags)
    if verb == "kill":
        st, pid = state(name)
        if pid:
            os.kill(pid, signal.SIGKILL)
        return 0
    if verb == "reset-failed":
        u = load("units", name)
        if u is None:
            return 1
        if state(name)[0] == "failed":
            u.update(pid=None, exit=None, state="inactive")
            save("units", name, u)
        return 0
    if verb == "is-enabled":
        u = load("units", name) or {}
        print("enabled" if u.get("enabled") else "disabled")
        return 0 if u.get("enabled") else 1
    if verb in ("enable", "disable"):
        u = load("units", name) or {}
        u["enabled"] = verb == "enable"
        save("units", name, u)
        return 0
    sys.stderr.write("fake systemctl: unsupported %r\n" % args)
    return 1


def systemd_run(args):
    env, name, i = {}, None, 0
    while args[i].startswith("-"):
        a = args[i]
        if a.startswith("--unit="):
            name = a.split("=", 1)[1]
        elif a.startswith("--setenv="):
            key, _sep, value = a.split("=", 1)[1].partition("=")
            env[key] = value
        i += 1
    argv = args[i:]
    if state(name)[0] in ("active", "deactivating"):
        sys.stderr.write("Failed to start transient service unit: Unit %s already exists.\n" % name)
        return 1
    if not os.access(argv[0], os.X_OK):
        sys.stderr.write("Failed to start transient service unit: exec %s failed\n" % argv[0])
        return 1
    return spawn(name, argv, env, transient=True)


def main():
    me = os.path.basename(sys.argv[0])
    if len(sys.argv) > 1 and sys.argv[1] == "supervise":
        supervise(sys.argv[2], json.loads(sys.argv[3]))
        return 0
    with open(os.path.join(ROOT, "calls.log"), "a") as f:
        f.write(json.dumps({"cmd": me, "argv": sys.argv[1:]}) + "\n")
    return systemctl(sys.argv[1:]) if me == "systemctl" else systemd_run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
