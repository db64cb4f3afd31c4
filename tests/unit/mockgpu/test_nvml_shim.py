# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock libnvidia-ml.so.1 as seen by the real, unmodified pynvml (loaded via LD_LIBRARY_PATH)."""
from __future__ import annotations

import json
import os
import signal
import subprocess

from mockgpu_testhost import GPUS, MIB, proc_state, wait_for

UUID0 = next(g["uuid"] for g in GPUS if g["index"] == 0)
UUID1 = next(g["uuid"] for g in GPUS if g["index"] == 1)


def read_starttime(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[22 - 3])


def write_entry(host, name, pid, gpu, mib, starttime):
    with open(os.path.join(host.registry, name), "w") as f:
        f.write(json.dumps({"pid": pid, "gpu": gpu, "mib": mib, "starttime": starttime}) + "\n")


def test_calls_before_init_and_after_shutdown_are_uninitialized(host):
    # pynvml itself raises Uninitialized before the library is loaded; load it without nvmlInit
    # so that the answers below come from the shim.
    got = host.probe("""
        n._LoadNvmlLibrary()
        before = [err(n.nvmlDeviceGetCount), err(n.nvmlDeviceGetHandleByIndex, 0),
                  err(n.nvmlSystemGetDriverVersion), err(n.nvmlShutdown)]
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        n.nvmlShutdown()
        after = [err(n.nvmlDeviceGetCount), err(n.nvmlDeviceGetMemoryInfo, h),
                 err(n.nvmlDeviceGetComputeRunningProcesses, h), err(n.nvmlShutdown)]
        emit({"before": before, "after": after})
    """)
    assert got["before"] == ["NVMLError_Uninitialized"] * 4
    assert got["after"] == ["NVMLError_Uninitialized"] * 4


def test_devices_come_from_config_ordered_by_index(host):
    got = host.probe("""
        n.nvmlInit()
        devs = []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            devs.append([n.nvmlDeviceGetIndex(h), n.nvmlDeviceGetName(h), n.nvmlDeviceGetUUID(h),
                         n.nvmlDeviceGetMinorNumber(h)])
        emit({"devs": devs, "driver": n.nvmlSystemGetDriverVersion(),
              "cuda": n.nvmlSystemGetCudaDriverVersion(), "nvml": n.nvmlSystemGetNVMLVersion()})
    """)
    assert got["devs"] == [[0, "NVIDIA H200", UUID0, 0], [1, "NVIDIA H200", UUID1, 1]]
    assert got["driver"] == "580.159.04"
    assert got["cuda"] == 13000
    assert got["nvml"] == "13.580.159.04"


def test_config_overrides_driver_version_and_names(host):
    gpus = [dict(GPUS[1], name="NVIDIA H100 80GB HBM3", memory_total_mib=81559)]
    host.write_config({"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": gpus})
    got = host.probe("""
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        emit([n.nvmlDeviceGetCount(), n.nvmlDeviceGetName(h), n.nvmlSystemGetDriverVersion(),
              n.nvmlDeviceGetMemoryInfo(h).total // 2**20])
    """)
    assert got == [1, "NVIDIA H100 80GB HBM3", "550.54.15", 81559]


def test_handle_by_uuid_and_unknown_uuid(host):
    got = host.probe("""
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByUUID(%r)
        emit({"index": n.nvmlDeviceGetIndex(h), "uuid": n.nvmlDeviceGetUUID(h),
              "unknown": err(n.nvmlDeviceGetHandleByUUID, "GPU-00000000-dead-beef-0000-000000000000"),
              "prefix": err(n.nvmlDeviceGetHandleByUUID, %r)})
    """ % (UUID1, UUID1[:-1]))
    assert got == {"index": 1, "uuid": UUID1, "unknown": "NVMLError_NotFound", "prefix": "NVMLError_NotFound"}


def test_bad_index_and_bad_handle_are_invalid_argument(host):
    got = host.probe("""
        n.nvmlInit()
        null = n.c_nvmlDevice_t()
        h = n.nvmlDeviceGetHandleByIndex(0)
        # a handle pointing one byte into a device slot is not a handle
        skewed = ctypes.cast(ctypes.cast(h, ctypes.c_void_p).value + 1, n.c_nvmlDevice_t)
        emit([err(n.nvmlDeviceGetHandleByIndex, 2), err(n.nvmlDeviceGetHandleByIndex, 4096),
              err(n.nvmlDeviceGetName, null), err(n.nvmlDeviceGetMemoryInfo, null),
              err(n.nvmlDeviceGetUUID, skewed), err(n.nvmlDeviceGetComputeRunningProcesses, skewed)])
    """)
    assert got == ["NVMLError_InvalidArgument"] * 6


def test_idle_memory_v1_counts_reserved_v2_separates_it(host):
    snap = host.snapshot()
    for gpu in (0, 1):
        s = snap[gpu]
        assert s["total"] == 143771
        assert (s["v1_used"], s["v1_free"]) == (615, 143771 - 615)
        assert (s["v2_used"], s["reserved"], s["v2_free"]) == (0, 615, 143771 - 615)
        assert s["procs"] == {}


def test_memory_v2_rejects_other_struct_versions_like_driver_580(host):
    # measured on a real H200 (driver 580.159.04): every version but nvmlMemory_v2 gives 13
    got = host.probe("""
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        fn = n._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
        out = {}
        for v in (0, 1, 0x01000028, 0x02000028, 0x03000028, 0x02000020, 0x02000030):
            m = n.c_nvmlMemory_v2_t()
            m.version = v
            out[hex(v)] = fn(h, ctypes.byref(m))
        emit([out, err(n.nvmlDeviceGetMemoryInfo, h, version=0x01000028)])
    """)
    assert got == [{"0x0": 13, "0x1": 13, "0x1000028": 13, "0x2000028": 0, "0x3000028": 13, "0x2000020": 13,
                    "0x2000030": 13}, "NVMLError_FunctionNotFound"]


def test_holder_shows_then_frees_when_killed(host):
    p = host.start_holder("--gpu", "1", "--mib", "4096")
    snap = host.snapshot()
    assert snap[1]["procs"] == {str(p.pid): 4096}
    assert (snap[1]["v2_used"], snap[1]["v1_used"]) == (4096, 4096 + 615)
    assert snap[1]["v2_free"] == 143771 - 615 - 4096
    assert snap[0]["procs"] == {} and snap[0]["v2_used"] == 0

    p.send_signal(signal.SIGKILL)
    # not reaped yet: a dead-but-unreaped holder must already be free
    wait_for(lambda: proc_state(p.pid) == "Z", "holder to become a zombie")
    assert os.path.exists(os.path.join(host.registry, "%d.1" % p.pid))
    snap = host.snapshot()
    assert snap[1]["procs"] == {} and snap[1]["v2_used"] == 0 and snap[1]["v1_used"] == 615
    p.wait()
    assert host.snapshot()[1]["procs"] == {}


def test_holder_spanning_two_gpus_shows_on_both(host):
    p = host.start_holder("--gpu", "0", "--mib", "1000", "--gpu", "1", "--mib", "250")
    q = host.start_holder("--gpu", "0", "--mib", "24")
    snap = host.snapshot()
    assert snap[0]["procs"] == {str(p.pid): 1000, str(q.pid): 24}
    assert snap[0]["v2_used"] == 1024
    assert snap[1]["procs"] == {str(p.pid): 250}
    assert snap[1]["v2_used"] == 250


def test_stale_and_foreign_entries_are_ignored(host):
    live = host.start_holder("--gpu", "0", "--mib", "300")
    # a pid that is gone
    dead = subprocess.Popen(["true"])
    dead.wait()
    write_entry(host, "%d.0" % dead.pid, dead.pid, 0, 1000, 1)
    # pid reuse: the entry names a live pid that has the node open, but another lifetime
    reused = host.start_holder("--gpu", "1", "--mib", "700")
    write_entry(host, "%d.1" % reused.pid, reused.pid, 1, 700, read_starttime(reused.pid) + 1)
    with open(os.path.join(host.registry, "%d.0" % live.pid)) as f:
        real_entry = f.read()
    # alive with the right starttime, but not holding the device node (this test process)
    me = os.getpid()
    write_entry(host, "%d.1" % me, me, 1, 500, read_starttime(me))
    snap = host.snapshot()
    assert snap[0]["procs"] == {str(live.pid): 300} and snap[0]["v2_used"] == 300
    assert snap[1]["procs"] == {} and snap[1]["v2_used"] == 0
    with open(os.path.join(host.registry, "%d.0" % live.pid)) as f:
        assert f.read() == real_entry


def test_zombie_holder_is_not_counted(host):
    # the holder exits on its own (SIGTERM, default action) and stays unreaped
    p = host.start_holder("--gpu", "0", "--mib", "512")
    assert host.snapshot()[0]["procs"] == {str(p.pid): 512}
    os.kill(p.pid, signal.SIGTERM)
    wait_for(lambda: proc_state(p.pid) == "Z", "holder to become a zombie")
    snap = host.snapshot()
    assert snap[0]["procs"] == {} and snap[0]["v2_used"] == 0
    assert p.wait() == -signal.SIGTERM


def test_malformed_registry_files_never_break_queries(host):
    live = host.start_holder("--gpu", "0", "--mib", "64")
    pid = live.pid
    start = read_starttime(pid)
    junk = {
        "%d.1" % pid: "not json",
        "%d.1x" % pid: json.dumps({"pid": pid, "gpu": 1, "mib": 1, "starttime": start}),
        ".%d.1.tmp" % pid: json.dumps({"pid": pid, "gpu": 1, "mib": 1, "starttime": start}),
        "1.1": '{"pid": 1, "gpu": 1, "mib": -5, "starttime": 1}',
        "2.1": '{"pid": 2, "gpu": 1, "mib": 1.5, "starttime": 1}',
        "3.1": '{"pid": 3, "gpu": 1',
        "4.1": "",
        "5.1": '{"pid": 5, "gpu": 1, "mib": 99999999999999999999999, "starttime": 1}',
        "6.1": '{"pid": 6, "gpu": 1, "mib": 1, "starttime": 1} trailing',
        "7.1": "[" * 10000,
        "8.1": '{"pid": 8, "gpu": 1, "mib": 1, "starttime": 1, "pad": "' + "x" * 100000 + '"}',
        # name and content disagree: an entry only speaks for the pid and GPU it is named after
        "%d.0" % os.getppid(): json.dumps({"pid": pid, "gpu": 0, "mib": 1000, "starttime": start}),
        "%d.1" % os.getppid(): json.dumps({"pid": pid, "gpu": 0, "mib": 1000, "starttime": start}),
    }
    for name, text in junk.items():
        with open(os.path.join(host.registry, name), "w") as f:
            f.write(text)
    os.mkdir(os.path.join(host.registry, "9.1"))
    os.symlink(os.path.join(host.registry, "%d.0" % pid), os.path.join(host.registry, "%d.1" % os.getpid()))
    snap = host.snapshot()
    assert snap[0]["procs"] == {str(pid): 64} and snap[0]["v2_used"] == 64
    assert snap[1]["procs"] == {} and snap[1]["v2_used"] == 0


def test_process_list_size_protocol(host):
    a = host.start_holder("--gpu", "0", "--mib", "10")
    b = host.start_holder("--gpu", "0", "--mib", "20")
    got = host.probe("""
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        out = {}
        for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            fn = n._nvmlGetFunctionPointer(name)
            count = ctypes.c_uint(1)
            arr = (n.c_nvmlProcessInfo_v3_t * 1)()
            rc_small = fn(h, ctypes.byref(count), arr)
            need = count.value
            arr = (n.c_nvmlProcessInfo_v3_t * need)()
            rc = fn(h, ctypes.byref(count), arr)
            out[name] = [rc_small, need, rc, count.value,
                         [[p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId] for p in arr]]
        # the oldest entry point has the v1 layout: pid + usedGpuMemory only
        class V1(ctypes.Structure):
            _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
        fn = n._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses")
        count = ctypes.c_uint(4)
        arr = (V1 * 4)()
        rc = fn(h, ctypes.byref(count), arr)
        out["v1"] = [rc, count.value, [[p.pid, p.usedGpuMemory] for p in arr[:count.value]]]
        idle = n.nvmlDeviceGetHandleByIndex(1)
        zero = ctypes.c_uint(0)
        out["idle"] = [fn(idle, ctypes.byref(zero), None), zero.value,
                       n._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")(h, None, None)]
        emit(out)
    """)
    pids = sorted([a.pid, b.pid])
    mib = {a.pid: 10, b.pid: 20}
    want = [[pid, mib[pid] * MIB, 0xFFFFFFFF, 0xFFFFFFFF] for pid in pids]
    for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
        assert got[name] == [7, 2, 0, 2, want]  # INSUFFICIENT_SIZE with the need, then SUCCESS
    assert got["v1"] == [0, 2, [[pid, mib[pid] * MIB] for pid in pids]]
    assert got["idle"] == [0, 0, 2]  # no processes: SUCCESS with count 0; NULL count: INVALID_ARGUMENT


def test_init_holds_device_nodes_until_last_shutdown(host):
    open(os.path.join(host.dev, "nvidia-uvm"), "w").close()  # opened too, when the host has it
    got = host.probe("""
        steps = {"before": node_fds()}
        n.nvmlInit()
        steps["init"] = node_fds()
        n.nvmlInit()
        n.nvmlShutdown()
        steps["one_shutdown_of_two"] = node_fds()
        n.nvmlShutdown()
        steps["last_shutdown"] = node_fds()
        n.nvmlInit()
        steps["init_again"] = node_fds()
        emit(steps)
    """)
    held = ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    assert got == {"before": [], "init": held, "one_shutdown_of_two": held, "last_shutdown": [],
                   "init_again": held}


def test_init_skips_missing_nodes_and_monitor_is_not_a_holder(host):
    os.unlink(os.path.join(host.dev, "nvidia1"))
    got = host.probe("""
        n.nvmlInit()
        me = os.getpid()
        h0 = n.nvmlDeviceGetHandleByIndex(0)
        emit({"fds": node_fds(), "procs": [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h0)]})
    """)
    # an NVML client holds the nodes but has no registry entry, so it is not a compute process
    assert got == {"fds": ["nvidia0", "nvidiactl"], "procs": []}


def test_missing_or_broken_config_fails_init_cleanly(host):
    os.unlink(host.config)
    missing = host.probe("emit(err(n.nvmlInit))")
    host.write_config('{"gpus": [{"index": 0, "uuid": "GPU-x"}]}')  # no memory_total_mib
    broken = host.probe("emit([err(n.nvmlInit), err(n.nvmlDeviceGetCount), node_fds()])")
    host.write_config({"gpus": [dict(GPUS[0], index=0), dict(GPUS[1], index=0)]})
    duplicate = host.probe("emit(err(n.nvmlInit))")
    host.write_config({"gpus": [dict(GPUS[0], index=0), dict(GPUS[1], index=2)]})
    gap = host.probe("emit(err(n.nvmlInit))")
    assert missing == "NVMLError_DriverNotLoaded"
    assert broken == ["NVMLError_Unknown", "NVMLError_Uninitialized", []]
    assert duplicate == gap == "NVMLError_Unknown"


def test_process_name_is_argv0_not_comm(host):
    # measured on driver 580: argv[0] ("my-argv0"), not comm, for GPU and non-GPU processes alike;
    # NotFound once the pid is gone
    holder = host.start_holder("--gpu", "0", "--mib", "1", "--name", "VLLM::Worker_TP0")
    sleeper = subprocess.Popen(["bash", "-c", "exec -a sleeper-argv0 sleep 60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        wait_for(lambda: open("/proc/%d/cmdline" % sleeper.pid, "rb").read().startswith(b"sleeper-argv0"),
                 "sleeper to exec")
        got = host.probe("""
            n.nvmlInit()
            emit([n.nvmlSystemGetProcessName(int(a)) for a in sys.argv[1:3]] +
                 [err(n.nvmlSystemGetProcessName, int(sys.argv[3]))])
        """, args=[str(holder.pid), str(sleeper.pid), str(gone.pid)])
    finally:
        sleeper.kill()
        sleeper.wait()
    with open("/proc/%d/cmdline" % holder.pid, "rb") as f:
        argv0 = f.read().split(b"\0")[0].decode()
    assert got == [argv0, "sleeper-argv0", "NVMLError_NotFound"]
    assert argv0 != "VLLM::Worker_TP"


def test_error_strings(host):
    got = host.probe("""
        fn = n._LoadNvmlLibrary() or n._nvmlGetFunctionPointer("nvmlErrorString")
        fn.restype = ctypes.c_char_p
        emit([fn(c).decode() for c in (0, 1, 2, 6, 7, 25, 12345)])
    """)
    assert got == ["Success", "Uninitialized", "Invalid Argument", "Not Found", "Insufficient Size",
                   "Argument version mismatch", "Unknown Error"]


def _mutations(text, rng, count):
    """Byte flips, deletions, duplications and truncations of a valid document."""
    out = []
    for _doc in range(count):
        b = bytearray(text.encode())
        for _edit in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            op = rng.randrange(4)
            if op == 0:
                b[i] = rng.choice(b'{}[]":,0123456789-.eE \\xtu\x00\xff')
            elif op == 1:
                del b[i]
            elif op == 2:
                b[i:i] = b[i:i + rng.randint(1, 8)]
            else:
                del b[i:]
                break
        out.append(bytes(b))
    return out


def test_mutated_registry_entries_and_configs_never_crash(host):
    import random
    rng = random.Random(1234)
    live = host.start_holder("--gpu", "0", "--mib", "64")
    valid = json.dumps({"pid": live.pid, "gpu": 1, "mib": 5, "starttime": read_starttime(live.pid)})
    for k, blob in enumerate(_mutations(valid, rng, 300)):
        # named for live pids and GPU 1, which nobody holds: none may count, none may crash
        name = "%d.1" % (live.pid if k % 2 else os.getpid())
        with open(os.path.join(host.registry, name), "wb") as f:
            f.write(blob)
        if k % 30 == 29:
            snap = host.snapshot()
            assert snap[0]["procs"] == {str(live.pid): 64} and snap[1]["procs"] == {}
    configs = [b.decode("latin-1") for b in _mutations(json.dumps({"gpus": GPUS}), rng, 300)]
    got = host.probe("""
        results = {}
        for text in json.loads(sys.argv[1]):
            with open(os.environ["MOCKGPU_CONFIG"], "w", encoding="latin-1") as f:
                f.write(text)
            e = err(n.nvmlInit)
            if e is None:
                count = n.nvmlDeviceGetCount()
                for i in range(count):
                    h = n.nvmlDeviceGetHandleByIndex(i)
                    n.nvmlDeviceGetName(h), n.nvmlDeviceGetUUID(h), n.nvmlDeviceGetMemoryInfo(h)
                n.nvmlShutdown()
                e = "ok:%d" % count
            results[e] = results.get(e, 0) + 1
        emit(results)
    """, args=[json.dumps(configs)])
    assert sum(got.values()) == len(configs)
    assert set(got) <= {"NVMLError_Unknown", "ok:0", "ok:1", "ok:2"}
    assert got.get("NVMLError_Unknown", 0) > 100  # most mutations are rejected, not half-read
