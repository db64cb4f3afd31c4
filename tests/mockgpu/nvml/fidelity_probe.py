# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the same NVML behaviour checks against a real GPU or against the mock shim, to compare them.

  real GPU 0 (needs torch):  python3 fidelity_probe.py real > real.json
  mock (shim on LD_LIBRARY_PATH, MOCKGPU_* set):  python3 fidelity_probe.py mock > mock.json
  compare:                   python3 fidelity_probe.py diff real.json mock.json

Each check prints a JSON value; `diff` lists the keys whose values differ. Memory sizes are MiB.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# one holder of ~1 GiB on GPU 0 that writes READY when it holds, then sleeps; argv[0] and comm differ
TORCH_HOLDER = ("import sys, signal, ctypes; sys.path.insert(0, %r); import torch;"
                "ctypes.CDLL(None).prctl(15, b'VLLM::Worker_TP0', 0, 0, 0);"
                "x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize();"
                "open(sys.argv[1], 'w').close(); signal.pause()")
MOCK_HOLDER = ("import sys, signal; sys.path.insert(0, %r); import mockgpu_hold as m, ctypes;"
               "ctypes.CDLL(None).prctl(15, b'VLLM::Worker_TP0', 0, 0, 0); m.hold(0, 1024);"
               "open(sys.argv[1], 'w').close(); signal.pause()")


def start_holders(mode, nvml, count, tmp):
    """Holder processes with argv[0] 'my-argv0'; wait (bounded) until each holds memory."""
    if mode == "real":
        code = TORCH_HOLDER % os.path.dirname(nvml.__file__)
    else:
        code = MOCK_HOLDER % os.path.join(HERE, "..", "lib")
    procs = []
    for k in range(count):
        ready = os.path.join(tmp, "ready.%d" % k)
        procs.append((subprocess.Popen(["bash", "-c", 'exec -a my-argv0 "$1" -c "$0" "$2"', code,
                                        sys.executable, ready]), ready))
    end = time.monotonic() + 120
    while not all(os.path.exists(r) for _p, r in procs):
        if time.monotonic() > end or any(p.poll() is not None for p, _r in procs):
            raise SystemExit("holders did not start")
        time.sleep(0.01)
    return [p for p, _r in procs]


def probe(mode):
    import pynvml as n  # pylint: disable=import-outside-toplevel
    res = {}

    def err(fn, *a, **kw):
        try:
            fn(*a, **kw)
        except n.NVMLError as e:
            return type(e).__name__
        return None

    def node_fds():
        out = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if "nvidia" in os.path.basename(target):
                out.append(os.path.basename(target))
        return sorted(set(out))

    def child(expr):
        # calls that crash real NVML (a NULL handle for the process list does) run in a child
        code = ("import pynvml as n, ctypes; n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0);"
                "null = n.c_nvmlDevice_t(); s = ctypes.cast(ctypes.cast(h, ctypes.c_void_p).value + 1,"
                " n.c_nvmlDevice_t)\ntry:\n " + expr + "; print('ok')\n"
                "except n.NVMLError as e: print(type(e).__name__)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        return [r.returncode, r.stdout.strip()]

    n._LoadNvmlLibrary()  # pylint: disable=protected-access
    res["before_init"] = [err(n.nvmlDeviceGetCount), err(n.nvmlDeviceGetHandleByIndex, 0), err(n.nvmlShutdown)]
    n.nvmlInit()
    res["fds_init"] = node_fds()
    n.nvmlInit()
    n.nvmlShutdown()
    res["fds_one_shutdown_of_two"] = node_fds()
    h = n.nvmlDeviceGetHandleByIndex(0)
    res["device0"] = [n.nvmlDeviceGetIndex(h), n.nvmlDeviceGetName(h), n.nvmlDeviceGetMinorNumber(h)]
    uuid = n.nvmlDeviceGetUUID(h)
    res["uuid"] = [n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(uuid)),
                   err(n.nvmlDeviceGetHandleByUUID, "GPU-00000000-dead-beef-0000-000000000000"),
                   err(n.nvmlDeviceGetHandleByUUID, uuid[:-1]), err(n.nvmlDeviceGetHandleByUUID, "nonsense")]
    res["bad_index"] = [err(n.nvmlDeviceGetHandleByIndex, n.nvmlDeviceGetCount()),
                        err(n.nvmlDeviceGetHandleByIndex, 4096)]
    res["null_handle"] = [child("n.nvmlDeviceGetName(null)"), child("n.nvmlDeviceGetMemoryInfo(null)"),
                          child("n.nvmlDeviceGetComputeRunningProcesses(null)")]
    res["skewed_handle"] = [child("n.nvmlDeviceGetUUID(s)"), child("n.nvmlDeviceGetMemoryInfo(s)"),
                            child("n.nvmlDeviceGetComputeRunningProcesses(s)")]
    res["versions"] = [n.nvmlSystemGetDriverVersion(), n.nvmlSystemGetNVMLVersion(),
                       n.nvmlSystemGetCudaDriverVersion()]
    fn_mem2 = n._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")  # pylint: disable=protected-access
    mem_versions = {}
    for v in (0, 1, 0x01000028, 0x02000028, 0x03000028, 0x02000020):
        m = n.c_nvmlMemory_v2_t()
        m.version = v
        mem_versions[hex(v)] = fn_mem2(h, ctypes.byref(m))
    res["memory_v2_versions"] = mem_versions

    def mem():
        v1 = n.nvmlDeviceGetMemoryInfo(h)
        v2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
        return {"v1_used": v1.used >> 20, "v1_free": v1.free >> 20, "total": v1.total >> 20,
                "v2_used": v2.used >> 20, "v2_reserved": v2.reserved >> 20, "v2_free": v2.free >> 20}

    def procs():
        return sorted([p.pid, p.usedGpuMemory >> 20, p.gpuInstanceId, p.computeInstanceId]
                      for p in n.nvmlDeviceGetComputeRunningProcesses(h))

    res["idle_memory"] = mem()
    fn3 = n._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")  # pylint: disable=protected-access
    zero = ctypes.c_uint(0)
    res["idle_process_call"] = [fn3(h, ctypes.byref(zero), None), zero.value, fn3(h, None, None)]

    tmp = "/tmp/fidelity_probe.%d" % os.getpid()
    os.makedirs(tmp)
    holders = start_holders(mode, n, 2, tmp)
    pids = sorted(p.pid for p in holders)
    listed = procs()
    res["held_pids_match"] = [x[0] for x in listed] == pids
    res["held_processes_mib_gi_ci"] = [x[1:] for x in listed]
    res["held_memory"] = mem()
    one = ctypes.c_uint(1)
    arr = (n.c_nvmlProcessInfo_v3_t * 1)()
    rc = fn3(h, ctypes.byref(one), arr)
    res["size_protocol_short_array"] = [rc, one.value]
    es = n._nvmlGetFunctionPointer("nvmlErrorString")  # pylint: disable=protected-access
    es.restype = ctypes.c_char_p
    res["error_strings"] = {c: es(c).decode() for c in (0, 1, 2, 3, 5, 6, 7, 9, 13, 25, 999)}
    res["process_name"] = [n.nvmlSystemGetProcessName(pids[0]), err(n.nvmlSystemGetProcessName, 2 ** 22 + 7)]

    # SIGKILL one holder and do not reap it: is a zombie still listed?
    victim = holders[0]
    victim.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        with open("/proc/%d/stat" % victim.pid) as f:
            stat = f.read()
        threads = len(os.listdir("/proc/%d/task" % victim.pid))
        if stat[stat.rindex(")") + 2] == "Z" and threads == 1 and victim.pid not in [x[0] for x in procs()]:
            break
        time.sleep(0.0005)
    res["unreaped_zombie_listed"] = victim.pid in [x[0] for x in procs()]
    res["unreaped_zombie_freed_ms_bucket"] = "<100" if time.monotonic() - t0 < 0.1 else ">=100"
    victim.wait()
    holders[1].kill()
    holders[1].wait()
    res["after_kill_memory"] = mem()
    res["after_kill_processes"] = procs()
    n.nvmlShutdown()
    res["fds_last_shutdown"] = node_fds()
    res["after_shutdown"] = [err(n.nvmlDeviceGetCount), err(n.nvmlShutdown)]
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return res


def diff(a_path, b_path):
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    differ = 0
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            differ += 1
            print("%s\n  %s: %s\n  %s: %s" % (key, a_path, json.dumps(a.get(key)), b_path, json.dumps(b.get(key))))
    print("%d of %d checks differ" % (differ, len(set(a) | set(b))))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "diff":
        diff(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2 and sys.argv[1] in ("real", "mock"):
        print(json.dumps(probe(sys.argv[1]), indent=1, sort_keys=True))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
