# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch guard's restore on a real GPU: deadline passed -> candidate's GPU freed -> production answers.

No systemd on the GPU machine, so systemctl/systemd-run are the fake of the guard's unit tests
(tests/unit/plugins/module_utils/fakesystemd.py: units are real processes under a supervisor, unit files
are read at daemon-reload). Everything else is real and is the collection's code:

- production: a unit whose ExecStart allocates --prod-gib with torch, then serves /health on loopback;
- the guard is armed with ``_guard_lease.arm`` (its code installed by ``install_library`` into a temp lib dir,
  the watcher started through systemd-run, so it runs from that copy with only PYTHONPATH=lib);
- the candidate: a unit whose main process allocates --big-gib and starts workers (--small-gib each), one
  that ignores SIGTERM; plus an orphaned holder (double fork + setsid) that left the unit;
- an NVML monitor (polls like an exporter) that must survive, and a sampler that records NVML every 5 ms;
- then the controller's last heartbeat (renew ttl=--ttl) and nothing more: the watcher restores.

Figures per round (JSON): deadline -> candidate's memory gone (sampler), deadline -> production ready
(the guard's record), the reclaim's own phases, monitor alive, GPU holders after.

  python3 bench/guard_reclaim_h200.py --out guard_reclaim_h200.json [--repeat 3]
  python3 bench/guard_reclaim_h200.py --mock ...   # on the NVML shim (MOCKGPU_* env, LD_LIBRARY_PATH), no GPU

The orchestrating process initialises no GPU library (it imports pynvml only through _guard_lease and the _guard it ships, unused).
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_SYSTEMD = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "fakesystemd.py")
HOLD_LIB = os.path.join(REPO, "tests", "mockgpu", "lib")
UNIT = "vllm-server.service"
RUN = "bench-guard"
SETUP_TIMEOUT = 300.0
MIB = 2 ** 20


# ---------------------------------------------------------------- roles run as child processes

def _alloc(gib):
    """Hold ``gib`` GiB on GPU 0: torch on a real GPU, the mock holder on the shim (--mock)."""
    if os.environ.get("BENCH_MOCK") == "1":
        sys.path.insert(0, HOLD_LIB)
        import mockgpu_hold  # pylint: disable=import-outside-toplevel,import-error
        return mockgpu_hold.hold(0, int(gib * 1024))
    import torch  # pylint: disable=import-outside-toplevel,import-error
    block = torch.empty(int(gib * 2 ** 30), dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
    return block


def _write(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def role_holder(args):
    if args.orphan:
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    keep = _alloc(args.gib)
    if args.ready:
        _write(args.ready, str(os.getpid()))
    workers = []
    for i in range(args.workers):
        argv = [sys.executable, os.path.abspath(__file__), "holder", "--gib", str(args.small_gib)]
        if i == 0:
            argv.append("--ignore-sigterm")
        workers.append(subprocess.Popen(argv))
    while keep is not None:
        signal.pause()


def role_engine(args):
    keep = _alloc(args.gib)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            code = 200 if self.path == "/health" and keep is not None else 404
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_a):
            pass

    http.server.HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


def role_monitor(args):
    import pynvml  # pylint: disable=import-outside-toplevel,import-error
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    _write(args.ready, str(os.getpid()))
    while True:
        for h in handles:
            pynvml.nvmlDeviceGetMemoryInfo(h)
            pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        time.sleep(0.05)


def role_sampler(args):
    """Every 5 ms: wall time, GPU 0 used MiB and compute pids, as JSON lines, until SIGTERM."""
    import pynvml  # pylint: disable=import-outside-toplevel,import-error
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    with open(args.out, "w") as out:
        _write(args.ready, str(os.getpid()))
        while not stop:
            used = pynvml.nvmlDeviceGetMemoryInfo(handle).used // MIB
            pids = sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
            out.write(json.dumps([time.time(), used, pids]) + "\n")
            time.sleep(0.005)


def role_probe(_args):
    import pynvml  # pylint: disable=import-outside-toplevel,import-error
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    print(json.dumps({"used_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).used // MIB,
                      "pids": sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)),
                      "name": str(pynvml.nvmlDeviceGetName(handle))}))


# ---------------------------------------------------------------- orchestration

def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def wait(cond, what, limit=SETUP_TIMEOUT):
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.02)


def probe(env):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "probe"], capture_output=True, text=True,
                         env=env, timeout=60, check=True)
    return json.loads(out.stdout)


def health(port):
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                "http://127.0.0.1:%d/health" % port, timeout=2) as resp:
            return resp.status
    except OSError:
        return None


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Host:
    """A temp "host": unit dir, state dir, lock, lib dir, fake systemd on PATH."""

    def __init__(self, root, guard):
        self.root = root
        self.guard = guard
        self.unit_dir = os.path.join(root, "etc", "systemd", "system")
        self.state_dir = os.path.join(root, "var", "lib", "llmops-specdec")
        self.lib = os.path.join(root, "lib")
        self.lock = os.path.join(root, "run", "llmops-specdec.lock")
        self.fake = os.path.join(root, "systemd")
        self.bin = os.path.join(root, "bin")
        for d in (self.unit_dir, os.path.join(self.state_dir, "snapshot"), os.path.dirname(self.lock), self.bin,
                  os.path.join(self.fake, "loaded"), os.path.join(self.fake, "units"), os.path.join(self.fake, "logs")):
            os.makedirs(d, exist_ok=True)
        script = os.path.join(self.fake, "fakesystemd.py")
        with open(FAKE_SYSTEMD) as src, open(script, "w") as dst:
            dst.write("#!%s\n" % sys.executable + src.read().split("\n", 1)[1])
        os.chmod(script, 0o755)
        for name in ("systemctl", "systemd-run"):
            os.symlink(script, os.path.join(self.bin, name))
        os.environ.update(PATH=self.bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                          FAKE_SYSTEMD_DIR=self.fake, FAKE_UNIT_DIR=self.unit_dir)
        self.env = dict(os.environ)

    def run_command(self, argv):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=self.env)
        return out.returncode, out.stdout, out.stderr

    def systemctl(self, *args):
        return self.run_command(["systemctl"] + list(args))

    def prop(self, prop):
        return self.systemctl("show", UNIT, "--property=" + prop)[1].strip().partition("=")[2]

    def write_unit(self, argv):
        path = os.path.join(self.unit_dir, UNIT)
        with open(path, "w") as handle:
            handle.write("[Service]\nType=exec\nExecStart=%s\n" % " ".join(argv))
        return path

    def start(self, argv):
        self.write_unit(argv)
        self.systemctl("daemon-reload")
        rc, _out, err = self.systemctl("start", UNIT)
        if rc:
            raise RuntimeError("start failed: %s" % err)

    def stop(self):
        self.systemctl("stop", UNIT)
        wait(lambda: self.prop("ActiveState") in ("inactive", "failed"), "unit stopped")

    def records(self):
        try:
            with open(os.path.join(self.state_dir, "history.jsonl")) as handle:
                return [json.loads(line) for line in handle]
        except FileNotFoundError:
            return []

    def kill_all(self):
        for fname in os.listdir(os.path.join(self.fake, "units")):
            try:
                with open(os.path.join(self.fake, "units", fname)) as handle:
                    unit = json.load(handle)
            except (OSError, ValueError):
                continue
            for pid in (unit.get("pid"), unit.get("supervisor")):
                if pid and alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _me(*args):
    return [sys.executable, os.path.abspath(__file__)] + [str(a) for a in args]


def one_round(opts, workdir, index):
    sys.path.insert(0, os.path.join(workdir, "coll"))
    from ansible_collections.llmops.specdec.plugins.module_utils import _guard_lease, _guard_state, _lock  # pylint: disable=import-outside-toplevel
    host = Host(os.path.join(workdir, "round%d" % index), _guard_lease)
    env = host.env
    port = free_port()
    helpers = []
    try:
        t0 = time.time()
        host.start(_me("engine", "--gib", opts.prod_gib, "--port", port))
        wait(lambda: health(port) == 200, "production ready")
        prod_load_s = time.time() - t0
        snapshot = os.path.join(host.state_dir, "snapshot", UNIT)
        shutil.copyfile(os.path.join(host.unit_dir, UNIT), snapshot)
        with open(snapshot, "rb") as handle:
            prod_bytes = handle.read()
        _lock.acquire(host.lock, RUN, {"label": "bench"}, ttl=600)
        ready_file = os.path.join(host.root, "monitor.ready")
        helpers.append(subprocess.Popen(_me("monitor", "--ready", ready_file), env=env))
        wait(lambda: os.path.exists(ready_file), "monitor ready")
        monitor = int(open(ready_file).read())
        params = {"unit": UNIT, "unit_path": os.path.join(host.unit_dir, UNIT), "state_dir": host.state_dir,
                  "snapshot": snapshot, "baseline_files": [], "ready_url": "http://127.0.0.1:%d" % port,
                  "engine": "vllm", "ready_timeout": SETUP_TIMEOUT, "lock_path": host.lock, "ttl": 600, "run_id": RUN,
                  "owner": {"label": "bench"}, "lib_dir": host.lib, "python": sys.executable, "poll_interval": 0.2,
                  "unit_dir": host.unit_dir,
                  "reclaim": {"scope": "gpu", "gpus": ["0"], "stop_timeout": 5, "term_timeout": 3, "verify_timeout": 60}}
        t_arm = time.perf_counter()
        armed = _guard_lease.arm(params, host.run_command)
        arm_s = time.perf_counter() - t_arm
        statefile = armed["statefile"]

        host.stop()  # the role's reclaim stopped production; the candidate goes in
        ready_file = os.path.join(host.root, "candidate.ready")
        host.start(_me("holder", "--gib", opts.big_gib, "--workers", opts.workers, "--small-gib", opts.small_gib,
                       "--ready", ready_file))
        helpers.append(subprocess.Popen(_me("holder", "--gib", opts.small_gib, "--orphan"), env=env))
        wait(lambda: len(probe(env)["pids"]) >= 2 + opts.workers, "candidate, workers and orphan hold GPU 0")
        before = probe(env)
        candidate_pids = set(before["pids"])
        samples = os.path.join(host.root, "samples.jsonl")
        ready_file = os.path.join(host.root, "sampler.ready")
        sampler = subprocess.Popen(_me("sampler", "--out", samples, "--ready", ready_file), env=env)
        helpers.append(sampler)
        wait(lambda: os.path.exists(ready_file), "sampler ready")

        t_renew = time.perf_counter()
        state = _guard_state.renew(statefile, RUN, opts.ttl)  # the controller's last heartbeat
        renew_s = time.perf_counter() - t_renew
        deadline = state["deadline"]
        wait(lambda: host.records() and not os.path.exists(statefile), "the guard's record", SETUP_TIMEOUT + 120)
        rec = host.records()[-1]
        sampler.send_signal(signal.SIGTERM)
        sampler.wait(timeout=30)
        freed_at = None
        with open(samples) as handle:
            for line in handle:
                t, _used, pids = json.loads(line)
                if t >= deadline and not candidate_pids & set(pids):
                    freed_at = t
                    break
        after = probe(env)
        prod_pid = int(host.prop("MainPID") or 0)
        with open(os.path.join(host.unit_dir, UNIT), "rb") as handle:
            unit_restored = handle.read() == prod_bytes
        row = {"round": index, "outcome": rec.get("outcome"), "reason": rec.get("reason"),
               "production_load_s": round(prod_load_s, 3), "arm_s": round(arm_s, 4), "renew_s": round(renew_s, 5),
               "deadline_to_gpu_free_s": round(freed_at - deadline, 3) if freed_at else None,
               "deadline_to_ready_s": rec.get("seconds_deadline_to_ready"),
               "reclaim": rec.get("reclaim"), "monitor_alive": alive(monitor),
               "candidate_pids": sorted(candidate_pids), "candidate_pids_alive": [p for p in candidate_pids if alive(p)],
               "gpu_before": before, "gpu_after": after, "production_pid": prod_pid,
               "only_production_holds_gpu": after["pids"] == [prod_pid], "unit_restored_byte_identical": unit_restored,
               "lock_released": not os.path.exists(host.lock), "production_answers": health(port) == 200}
        return row
    finally:
        host.kill_all()
        for proc in helpers:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        sys.path.pop(0)


def orchestrate(opts):
    workdir = tempfile.mkdtemp(prefix="guard-bench-")
    os.makedirs(os.path.join(workdir, "coll", "ansible_collections", "llmops"))
    os.symlink(REPO, os.path.join(workdir, "coll", "ansible_collections", "llmops", "specdec"))
    if opts.mock:
        os.environ["BENCH_MOCK"] = "1"
    report = {"machine": probe(dict(os.environ)), "python": sys.version.split()[0], "mock": opts.mock,
              "prod_gib": opts.prod_gib, "big_gib": opts.big_gib, "small_gib": opts.small_gib,
              "workers": opts.workers, "ttl": opts.ttl, "rounds": []}
    for i in range(opts.repeat):
        row = one_round(opts, workdir, i)
        print("round %d: %s, deadline->GPU free %s s, deadline->ready %s s, monitor alive %s"
              % (i, row["outcome"], row["deadline_to_gpu_free_s"], row["deadline_to_ready_s"], row["monitor_alive"]),
              flush=True)
        report["rounds"].append(row)
    rounds = report["rounds"]
    frees = [r["deadline_to_gpu_free_s"] for r in rounds if r["deadline_to_gpu_free_s"] is not None]
    readies = [r["deadline_to_ready_s"] for r in rounds if r["deadline_to_ready_s"] is not None]
    report["summary"] = {
        "all_restored": all(r["outcome"] == "restored_by_guard" for r in rounds),
        "deadline_to_gpu_free_median_s": statistics.median(frees) if frees else None,
        "deadline_to_ready_median_s": statistics.median(readies) if readies else None,
        "production_load_median_s": statistics.median(r["production_load_s"] for r in rounds),
        "monitor_alive_every_round": all(r["monitor_alive"] for r in rounds),
        "candidate_gone_every_round": all(not r["candidate_pids_alive"] for r in rounds),
        "only_production_after_every_round": all(r["only_production_holds_gpu"] for r in rounds),
        "unit_restored_every_round": all(r["unit_restored_byte_identical"] for r in rounds),
        "lock_released_every_round": all(r["lock_released"] for r in rounds),
        "arm_median_s": statistics.median(r["arm_s"] for r in rounds),
        "renew_median_s": statistics.median(r["renew_s"] for r in rounds),
    }
    with open(opts.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(report["summary"], indent=1))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if report["summary"]["all_restored"] else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="role")
    holder = sub.add_parser("holder")
    holder.add_argument("--gib", type=float, required=True)
    holder.add_argument("--ignore-sigterm", action="store_true")
    holder.add_argument("--orphan", action="store_true")
    holder.add_argument("--workers", type=int, default=0)
    holder.add_argument("--small-gib", type=float, default=4)
    holder.add_argument("--ready")
    engine = sub.add_parser("engine")
    engine.add_argument("--gib", type=float, required=True)
    engine.add_argument("--port", type=int, required=True)
    for name in ("monitor", "sampler"):
        role = sub.add_parser(name)
        role.add_argument("--ready", required=True)
        if name == "sampler":
            role.add_argument("--out", required=True)
    sub.add_parser("probe")
    parser.add_argument("--out", default="guard_reclaim_h200.json")
    parser.add_argument("--prod-gib", type=float, default=40)
    parser.add_argument("--big-gib", type=float, default=80)
    parser.add_argument("--small-gib", type=float, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ttl", type=float, default=1.0, help="the last heartbeat's ttl (s)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mock", action="store_true", help="NVML shim and mock holders instead of a GPU")
    opts = parser.parse_args()
    roles = {"holder": role_holder, "engine": role_engine, "monitor": role_monitor, "sampler": role_sampler,
             "probe": role_probe}
    if opts.role:
        return roles[opts.role](opts) or 0
    return orchestrate(opts)


if __name__ == "__main__":
    sys.exit(main())
