# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of every engine child process (exec'd by procs.spawn with a custom argv[0]).

Roles: `worker` (vLLM Worker_TP<r> / SGLang scheduler_TP<r>: holds GPU memory),
`enginecore` (vLLM EngineCore: owns the workers), `idle` (SGLang detokenizer).
"""
import json
import os
import signal
import sys
import time

if __name__ == "__main__" and __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mockengine import gpumem, group, procs, weights  # noqa: E402
from mockengine.log import SglangLog, VllmLog, traceback_text  # noqa: E402


def _log(p):
    if p["engine"] == "vllm":
        return VllmLog(p.get("log_proc", "EngineCore_DP0"))
    return SglangLog(p.get("log_tag", ""))


def _escape_cgroup():
    """Leave the systemd service's cgroup, as the orphaned workers of vLLM #55510 end up outside
    the unit's tree: move to the hierarchy's root, or to a leaf beside the slices when the root
    refuses (cgroup2's no-internal-process rule inside a container). Only cgroups whose path
    names a `.service` are touched, so this is a no-op outside a systemd unit; failures are ignored."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or ".service" not in parts[2]:
            continue
        if parts[0] == "0":
            roots = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        else:
            roots = ["/sys/fs/cgroup/%s" % n.replace("name=", "") for n in [parts[1]] + parts[1].split(",")]
        root = next((r for r in roots if os.path.exists(os.path.join(r, "cgroup.procs"))), None)
        if root is None:
            continue
        leaf = os.path.join(root, "mockgpu-escaped")
        for target in (root, leaf):
            try:
                if target == leaf and not os.path.isdir(leaf):
                    os.mkdir(leaf)
                fd = os.open(os.path.join(target, "cgroup.procs"), os.O_WRONLY)  # never create a file
                try:
                    os.write(fd, str(os.getpid()).encode())
                finally:
                    os.close(fd)
                break
            except OSError:
                continue


def _double_fork(p):
    """vLLM #55510: a worker that is no longer a child of the engine and survives it."""
    if os.fork():
        os.wait()
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    procs.set_name(p["title"])
    import signal
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _escape_cgroup()


def _oom_message(p, total, free, want):
    gib = 1024.0
    if p["engine"] == "vllm":
        return ("ValueError: Free memory on device cuda:%d (%.2f/%.2f GiB) on startup is less than desired "
                "GPU memory utilization (%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory "
                "used by other processes." % (p["rank"], free / gib, total / gib, p["fraction"], want / gib))
    return ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=%s, avail mem=%.2f GB" % (p["fraction"], free / gib))


_held = []  # the Holding of this worker, released on a graceful stop


def _stop_worker():
    for h in _held:
        try:
            h.release()
        except OSError:
            pass
    os._exit(0)


def _park_signals(p, log, gpu, want):
    """SIGUSR1 parks (keep only the context's residual on the GPU), SIGUSR2 wakes (take the rest back,
    or fail like CUDA when the GPU has no room any more). The API waits on the registry (park.py)."""
    residual = min(want, int(p.get("park_residual_mib", 0)))

    def park(*_args):
        if _held:
            _held[0].resize(residual)

    def wake(*_args):
        if not _held or _held[0].mib == want:
            return
        _total, free = gpumem.gpu_info(gpu)
        if free < want - _held[0].mib:
            log.error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total "
                      "capacity of %.2f GiB of which %.2f GiB is free." % (
                          (want - _held[0].mib) / 1024.0, gpu, _total / 1024.0, free / 1024.0))
            os._exit(1)
        _held[0].resize(want)

    signal.signal(signal.SIGUSR1, park)
    signal.signal(signal.SIGUSR2, wake)


def worker(p):
    log = _log(p)
    procs.install_signals(p.get("ignore_sigterm"), _stop_worker)
    if p.get("escape"):
        _double_fork(p)
    else:
        procs.die_with_parent(p["parent"])
    gpu = p["gpu"]
    info = gpumem.gpu_info(gpu) if gpu is not None else None
    if info is None:
        return _fail(p, log, "RuntimeError: CUDA error: invalid device ordinal (no GPU %s for rank %d)" % (gpu, p["rank"]))
    total, free = info
    want = int(p["fraction"] * total)
    if free < want:
        return _fail(p, log, _oom_message(p, total, free, want))
    try:
        hold = gpumem.import_hold()
        _held.append(hold.hold(gpu, want))
    except Exception as exc:  # an unusable device node or registry is a CUDA init failure
        return _fail(p, log, "RuntimeError: CUDA error: initialization error (%s)" % exc)
    _park_signals(p, log, gpu, want)
    if p.get("dist_init"):  # a rank of a serving group (vLLM parallel_state.py init_distributed_environment)
        log.info(p["dist_init"], src="parallel_state.py:1")
    # The weight files for real (the page cache decides how long), then the profile's load time; the lines the
    # real engines log around it (vLLM gpu_model_runner.py / default_loader.py, SGLang model_runner.py), which
    # the collection reads for the load's breakdown (_load.py).
    t0 = time.monotonic()
    if isinstance(log, VllmLog):
        log.info("Starting to load model %s..." % p.get("model", ""), src="gpu_model_runner.py:4100")
    else:
        log.info("Load weight begin. avail mem=%.2f GB" % (free / 1024.0), src="model_runner.py:1274")
    _size, read_s = weights.read(p.get("weights") or [])
    if isinstance(log, VllmLog):
        log.info("Loading weights took %.2f seconds" % (p["load_seconds"] + read_s), src="default_loader.py:501")
    if p.get("fail"):
        time.sleep(min(p["load_seconds"], 1.0))
        return _fail(p, log, p["fail"])
    time.sleep(p["load_seconds"])
    took = time.monotonic() - t0
    if isinstance(log, VllmLog):
        log.info("Model loading took %.4f GiB memory and %.6f seconds" % (want / 1024.0, took), src="gpu_model_runner.py:5150")
    else:
        log.info("Load weight end. elapsed=%.2f s, type=MockForCausalLM, avail mem=%.2f GB, mem usage=%.2f GB." % (
            took, (free - want) / 1024.0, want / 1024.0), src="model_runner.py:1373")
    procs.report(p["ready_fd"], ok=True, rank=p["rank"], gpu=gpu, mib=want, pid=os.getpid())
    os.close(p["ready_fd"])
    procs.sleep_forever()


def _fail(p, log, message):
    log.error("%s failed to start." % p["title"])
    if isinstance(log, VllmLog):
        # A real vLLM's failed worker logs its traceback line by line through its logger (vLLM 0.32, tests/real).
        for text in traceback_text(message).splitlines():
            log.error(text, src="multiproc_executor.py:953")
    else:
        sys.stderr.write(traceback_text(message) + "\n")
        sys.stderr.flush()
    procs.report(p["ready_fd"], ok=False, rank=p["rank"], error=message)
    os._exit(1)


def enginecore(p):
    """vLLM's EngineCore: starts one worker per TP rank, reports to the API when all are loaded."""
    log = _log(p)
    sup = procs.Supervisor(log, p["python"])
    head = None

    def stop():
        if head is not None:
            head.shutdown()
        sup.stop()
        os._exit(0)

    procs.install_signals(p.get("ignore_sigterm"), stop)
    procs.die_with_parent(p["parent"])
    g = p.get("group")
    if g:
        try:  # rank 0's TCPStore binds the rendezvous port on every interface
            head = group.Head("vllm", g["port"], g["nnodes"], g["world_size"], g["spec"], g["spec_text"])
        except OSError as exc:
            message = "torch.distributed.DistNetworkError: The server socket has failed to listen on any local " \
                      "network address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: %s" % (
                          g["port"], exc.strerror or exc)
            log.error(message, src="parallel_state.py:1")
            procs.report(p["ready_fd"], ok=False, rank=-1, error=message)
            os._exit(1)
        log.info("DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=%s, mq_connect_ip=%s (local), "
                 "world_size=%d, local_world_size=%d" % (g["master_addr"], g["master_addr"], g["world_size"],
                                                         len(p["workers"])), src="multiproc_executor.py:167")
    sup.start([(w["title"], w) for w in p["workers"]])
    error = _wait_workers_and_group(sup, p, head, log)
    t0 = time.monotonic()  # vLLM times its engine init after the model is loaded
    if error:
        log.error("EngineCore failed to start.", src="core.py:1")
        if error.startswith(("RuntimeError: Configuration mismatch", "torch.distributed.")):  # the group's
            sys.stderr.write(traceback_text(error) + "\n")
        else:
            sys.stderr.write(traceback_text("RuntimeError: Worker failed with error '%s', please check the stack "
                                            "trace above for the root cause" % error) + "\n")
        # (a failed head just goes: the worker nodes see its connection end and fail too)
        sup.stop()
        procs.report(p["ready_fd"], ok=False, rank=-1, error=error)
        os._exit(1)
    if not p.get("never_ready"):
        # vLLM's core.py:402 after the KV cache and warm-up (the mock has neither: the workers' load and little else)
        log.info("init engine (profile, create kv cache, warmup model) took %.2f s" % (time.monotonic() - t0),
                 src="core.py:402")
        procs.report(p["ready_fd"], ok=True, rank=-1, workers=list(sup.ready.values()))

    def worker_died():
        lost = head.failure() if head is not None else None
        if lost:
            # The group's next collective fails on the head (NCCL); the core dies, and the API server after it.
            log.error("%s (%s)" % (group.NCCL_REMOTE, lost), src="multiproc_executor.py:1")
            head.closing = True
            sup.stop()
            os._exit(1)
        dead = sup.crashed()
        if dead:
            log.error("Worker proc %s died unexpectedly, shutting down executor." % dead, src="multiproc_executor.py:1")
            sup.stop()
            os._exit(1)
        return False

    procs.sleep_forever(worker_died)
    sup.stop()


def _wait_workers_and_group(sup, p, head, log):
    """None once the local workers loaded and (on a group's head) every node joined; else the error. The core
    has no deadline of its own for the group: the API server gives up after VLLM_ENGINE_READY_TIMEOUT_S."""
    if head is None:
        return sup.wait_ready(len(p["workers"]), p.get("ready_timeout", 600))
    said = time.monotonic()
    while True:
        error = head.error or head.lost
        if error:
            return ("RuntimeError: Configuration mismatch detected in the serving group: %s. All nodes must be "
                    "started with the same command-line arguments." % error) if head.error else \
                "%s (%s)" % (group.NCCL_REMOTE, error)
        if len(sup.ready) < len(p["workers"]):
            error = sup.wait_ready(len(p["workers"]), 0.2)
            if error != "timeout" and error is not None:
                return error
        elif head.complete.wait(0.2):
            return None
        if time.monotonic() - said >= 10:  # the mock's wording (a real head is silent in init_process_group)
            said = time.monotonic()
            log.info("Waiting for the group on port %d: %d of %d node(s) not joined, %d loading" % (
                p["group"]["port"], head.waiting_for(), head.nnodes - 1, head.loading()), src="parallel_state.py:1")


def idle(p):
    """A process with a name and nothing to hold (SGLang's detokenizer)."""
    procs.install_signals(p.get("ignore_sigterm"), lambda: os._exit(0))
    procs.die_with_parent(p["parent"])
    procs.report(p["ready_fd"], ok=True, rank=p["rank"])
    procs.sleep_forever()


def main():
    p = json.loads(os.environ.pop("MOCKENGINE_CHILD"))
    procs.set_name(p["title"])
    {"worker": worker, "enginecore": enginecore, "idle": idle}[p["role"]](p)


if __name__ == "__main__":
    main()
