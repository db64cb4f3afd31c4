# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve MODEL ...`: flags, speculative config, process tree, readiness, shutdown."""
import argparse
import json
import os
import select
import sys
import threading
import time

from . import VLLM_VERSION, gpumem, group, park, procs, runtime, weights
from .log import VllmLog, traceback_text
from .server import make_server
from .timing import SpecShape
from .vllm_spec import PYDANTIC_DOCS, ConfigError, schedule, validate

# Flags whose value is a JSON object and that also accept dotted keys (--speculative-config.method X).
DICT_ARGS = ("speculative-config", "compilation-config", "kv-transfer-config", "hf-overrides",
             "override-generation-config", "limit-mm-per-prompt", "kv-events-config",
             "structured-outputs-config")


SENSITIVE_ARGS = ("api_key", "hf_token", "watermark_config")


def api_keys(args):
    """vllm/entrypoints/serve/middleware/register.py: `--api-key` wins over VLLM_API_KEY; empty keys are none."""
    return [k for k in (args.api_key or [os.environ.get("VLLM_API_KEY")]) if k]


def _json_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def loads(text):  # named like vLLM's parser so argparse says "invalid loads value"
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def human_int(text):
    """--max-model-len accepts 32768, 32k, 1M like vLLM."""
    t = text.strip().lower()
    mult = {"k": 1000, "m": 1000 ** 2}.get(t[-1:], 1) if t[-1:] in "km" else 1
    return int(float(t[:-1] if mult > 1 else t) * mult)


def preprocess(argv):
    """vLLM's FlexibleArgumentParser: `_`/`-` in flag names, dotted keys folded into one dict."""
    out, dotted = [], {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and len(arg) > 2:
            key, eq, val = arg[2:].partition("=")
            head, dot, rest = key.partition(".")
            head = head.replace("_", "-")
            if dot and head in DICT_ARGS:
                if not eq:
                    if i + 1 >= len(argv):
                        out.append("--" + head)  # let argparse report the missing value
                        break
                    i += 1
                    val = argv[i]
                node = dotted.setdefault(head, {})
                keys = rest.split(".")
                for k in keys[:-1]:
                    node = node.setdefault(k, {})
                node[keys[-1]] = _json_value(val)
                i += 1
                continue
            arg = "--" + head + dot + rest + eq + val
        out.append(arg)
        i += 1
    return out, dotted


def build_parser():
    p = argparse.ArgumentParser(prog="vllm serve", usage="vllm serve [model_tag] [options]", allow_abbrev=False)
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--model")
    p.add_argument("--host")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    # ParallelConfig's multi-node fields (vllm/config/parallel.py) and cli_args.py's --headless (issue 33).
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29501)
    p.add_argument("--nnodes", "-n", type=int, default=1)
    p.add_argument("--node-rank", "-r", type=int, default=0)
    p.add_argument("--headless", action="store_true", default=False)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=human_int)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=human_int)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--enable-sleep-mode", action="store_true")
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--disable-custom-all-reduce", action="store_true")
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--enable-log-requests", action="store_true")
    p.add_argument("--disable-uvicorn-access-log", action="store_true")
    p.add_argument("--stream-interval", type=int, default=1)
    # FrontendArgs.api_key: list[str] (nargs="+"); without it VLLM_API_KEY is the one key.
    p.add_argument("--api-key", nargs="+")
    for flag in ("--dtype", "--quantization", "--kv-cache-dtype", "--tokenizer", "--tokenizer-mode",
                 "--revision", "--download-dir", "--load-format", "--uvicorn-log-level",
                 "--chat-template", "--tool-call-parser", "--reasoning-parser", "--generation-config",
                 "--distributed-executor-backend", "--root-path", "--config"):
        p.add_argument(flag)
    p.add_argument("-q", dest="quantization")
    p.add_argument("--seed", type=int)
    p.add_argument("--max-logprobs", type=int)
    p.add_argument("--swap-space", type=float)
    p.add_argument("--block-size", type=int)
    p.add_argument("--enable-auto-tool-choice", action="store_true")
    for flag in DICT_ARGS:
        p.add_argument("--" + flag, type=loads)
    p.add_argument("-O", dest="compilation_config", type=_json_value)
    return p


def parse(argv):
    argv, dotted = preprocess(argv)
    top = argparse.ArgumentParser(prog="vllm", allow_abbrev=False)
    top.add_argument("--version", action="version", version=VLLM_VERSION)
    top.add_argument("subcommand", choices=["serve"])
    if not argv or argv[0].startswith("-"):
        top.parse_args(argv)  # --version / usage error
    if argv[0] != "serve":
        top.error("argument subcommand: invalid choice: '%s' (choose from 'serve')" % argv[0])
    args = build_parser().parse_args(argv[1:])
    model = args.model or args.model_tag
    if not model:
        model = "Qwen/Qwen3-0.6B"  # vLLM's default model
    args.model = model
    spec = dict(args.speculative_config or {})
    spec = _merge(spec, dotted.get("speculative-config", {}))
    args.speculative_config = spec or None
    return args


def _merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    log = VllmLog()
    log.info("vLLM API server version %s" % VLLM_VERSION, "api_server.py:1")
    defaults = vars(build_parser().parse_args([]))
    # vllm/entrypoints/common/startup.py redact_sensitive_args: the key is logged as "***".
    log.info("non-default args: %s" % {k: ("***" if k in SENSITIVE_ARGS else v) for k, v in vars(args).items()
                                       if defaults.get(k) != v}, "utils.py:1")
    tp = args.tensor_parallel_size
    spec_cfg = None
    sched = None
    if args.speculative_config:
        try:
            spec_cfg = validate(args.speculative_config, args.model, tp,
                                lambda m: log.warning(m, "speculative.py:1"))
            v2 = os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "").strip().lower() not in ("0", "false", "no", "off")
            sched = schedule(spec_cfg, args.data_parallel_size, v2, lambda m: log.warning(m, "vllm.py:1"))
        except ConfigError as exc:
            runtime.print_error(traceback_text(str(exc), [
                (sys.argv[0], 8, "<module>", "sys.exit(main())"),
                ("vllm/engine/arg_utils.py", 1, "create_speculative_config",
                 "return SpeculativeConfig(**self.speculative_config)")]))
            runtime.exit_now(1)
    world = tp * args.pipeline_parallel_size
    error = check_group(args, world * args.data_parallel_size)
    if error:
        runtime.print_error(traceback_text(error, [
            (sys.argv[0], 8, "<module>", "sys.exit(main())"),
            ("vllm/engine/arg_utils.py", 1, "create_engine_config", "parallel_config = ParallelConfig(")]))
        runtime.exit_now(1)
    method = spec_cfg["method"] if spec_cfg else "none"
    faults, params, load, profile = runtime.resolve("vllm", spec_cfg["profile"] if spec_cfg else None, method)
    spec = SpecShape(method, spec_cfg["num_speculative_tokens"]) if spec_cfg else None
    if spec is not None:
        # [(start, end, k)] as the scheduler runs it (None: a fixed k); vllm_spec.k_for_batch reads it.
        spec.schedule = sched
    if spec_cfg:
        log.info("SpeculativeConfig(method=%r, model=%r, num_spec_tokens=%d)" % (
            spec_cfg["method"], spec_cfg["model"], spec_cfg["num_speculative_tokens"]), "core.py:1")
    stopper = runtime.Stopper(bool(faults.get("ignore_sigterm")))
    spec_key = {k: v for k, v in spec_cfg.items() if k != "profile"} if spec_cfg else None
    spec_text = ("method=%s, model=%s, num_speculative_tokens=%s" % (
        spec_cfg["method"], spec_cfg["model"], spec_cfg["num_speculative_tokens"])) if spec_cfg else None
    if args.headless and (args.nnodes <= 1 or args.node_rank == 0):
        _headless_dp(args, log, stopper)
    if args.nnodes > 1 and args.node_rank > 0:
        _worker_node(args, log, stopper, faults, load, profile, world, group.digest(spec_key), spec_text)

    served = args.served_model_name or [args.model]
    max_len = args.max_model_len or int(profile.get("max_model_len", 32768))
    state = runtime.make_state("vllm", args.model, served, max_len, params, spec, faults, profile,
                               args.max_num_seqs, stream_interval=args.stream_interval,
                               log=not args.disable_uvicorn_access_log, api_keys=api_keys(args))
    host = args.host if args.host is not None else "0.0.0.0"
    try:  # vLLM binds its socket before building the engine, but listens only when ready
        server = make_server(state, host, args.port)
    except OSError as exc:
        runtime.print_error(traceback_text("OSError: [Errno %d] %s" % (exc.errno or 98, exc.strerror or exc)))
        runtime.exit_now(1)

    visible = gpumem.visible_gpus()
    local = world // max(1, args.nnodes)
    if args.nnodes > 1 and len(visible) < local:
        runtime.print_error(traceback_text("RuntimeError: CUDA error: invalid device ordinal (%d ranks on this node, "
                                           "%d visible GPUs)" % (local, len(visible))))
        runtime.exit_now(1)
    if args.nnodes <= 1 and len(visible) < world:
        runtime.print_error(traceback_text(
            "ValueError: World size (%d) is larger than the number of available GPUs (%d) in this node." % (
                world, len(visible))))
        runtime.exit_now(1)
    workers = _workers(args, faults, load, profile, world, 0, visible)
    rfd, wfd = os.pipe()
    timeout = ready_timeout()
    rendezvous = None
    if args.nnodes > 1:  # the head: rank 0's TCPStore on --master-port (group.py)
        rendezvous = {"engine": "vllm", "master_addr": args.master_addr, "port": args.master_port,
                      "nnodes": args.nnodes, "world_size": world, "spec": group.digest(spec_key),
                      "spec_text": spec_text}
    core = procs.spawn("VLLM::EngineCore", {
        "role": "enginecore", "engine": "vllm", "title": "VLLM::EngineCore", "rank": -1, "workers": workers,
        "never_ready": bool(faults.get("never_ready")), "ignore_sigterm": bool(faults.get("ignore_sigterm")),
        "ready_timeout": timeout, "group": rendezvous}, wfd)
    os.close(wfd)
    ready = {}
    error = _wait_core(rfd, core, timeout, stopper, ready)
    if error == "stop":
        _shutdown(log, server, core, started=False)
    if error and error.startswith("TimeoutError"):  # raised by the client itself (core_client.py)
        runtime.print_error(traceback_text(error))
        core.kill()
        runtime.exit_now(1)
    if error:
        log.error("Engine core initialization failed.", "core_client.py:1")
        runtime.print_error(traceback_text(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_DP0': %s}" % (core.poll() if core.poll() is not None else 1)))
        if core.poll() is None:
            core.kill()
        runtime.exit_now(1)

    if os.environ.get("VLLM_SERVER_DEV_MODE", "0").strip() == "1":  # vLLM's envs: bool(int(...))
        log.warning("SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!",
                    "api_server.py:1")
        state.park = park.Parker(ready.get("workers") or [], profile, args.enable_sleep_mode, load, lambda freed, kept: log.info(
            # gpu_worker.py formats with format_gib: round(bytes / GiB, 2)
            "Sleep mode freed %s GiB memory, %s GiB memory is still in use." % (round(freed / 1024.0, 2), round(kept / 1024.0, 2)),
            "gpu_worker.py:1"), fault_key=method, log=log)
    if faults.get("dies_on_request"):
        # The worker's error, then the core's, then the core exits (the loop below then ends the API server).
        def core_death():
            log.error("Exception raised from the model's forward pass (dies_on_request fault)", "core.py:1")
            threading.Timer(2.0, core.kill).start()
        state.on_core_death = core_death
    state.ready = True  # before listen(): a first probe must never see a 503
    server.server_activate()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log.info("Starting vLLM API server 0 on http://%s:%d" % (host, args.port), "launcher.py:1")
    for line in ("Started server process [%d]" % os.getpid(), "Waiting for application startup.",
                 "Application startup complete."):
        print("INFO:     " + line, flush=True)
    stats_at = time.monotonic()
    while not stopper.wait(0.2):
        if core.poll() is not None:
            # vLLM #48966: a dead EngineCore makes the API server exit, with status 0.
            log.error("Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.", "core_client.py:1")
            state.shutting_down = True
            server.shutdown()
            runtime.exit_now(0)
        if not args.disable_log_stats and time.monotonic() - stats_at >= 10:
            stats_at = time.monotonic()
            _log_stats(log, state)
    _shutdown(log, server, core, started=True)


def _wait_core(rfd, core, timeout, stopper, ready):
    deadline = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < deadline:
        if stopper.event.is_set():
            return "stop"
        if select.select([rfd], [], [], 0.2)[0]:
            chunk = os.read(rfd, 65536)
            if not chunk and core.poll() is not None:
                return "EngineCore exited with code %s" % core.poll()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                ready.update(msg)
                return None if msg.get("ok") else msg.get("error", "failed")
        elif core.poll() is not None:
            return "EngineCore exited with code %s" % core.poll()
        if stopper.cap and time.monotonic() - stopper.start > stopper.cap:
            return "stop"
    return ("TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight "
            "loading for large models. Waited %ds (configured by VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, "
            "set the environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>" % timeout)


def ready_timeout():
    """vllm/envs.py VLLM_ENGINE_READY_TIMEOUT_S (int seconds, 600); the mock also takes a float."""
    return float(os.environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "600"))


def check_group(args, world_size):
    """What create_engine_config refuses of the multi-node flags (arg_utils.py, ParallelConfig's fields)."""
    if args.nnodes > 1:
        if world_size % args.nnodes != 0:
            return ("ValueError: Invalid data-parallel launch options: `--nnodes %d` must evenly divide the total "
                    "world size (%d). Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, "
                    "`--tensor-parallel-size`, or `--prefill-context-parallel-size`." % (args.nnodes, world_size))
        if not 0 <= args.node_rank < args.nnodes:
            return ("ValueError: Invalid data-parallel launch options: `--node-rank` must be between 0 and %d; got "
                    "`--node-rank %d`. Set it to this node's zero-based index." % (args.nnodes - 1, args.node_rank))
    for name, value, minimum in (("nnodes", args.nnodes, 1), ("node_rank", args.node_rank, 0),
                                 ("master_port", args.master_port, None)):
        if minimum is not None and value < minimum:
            return ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n%s\n  "
                    "Input should be greater than or equal to %d [type=greater_than_equal, input_value=%d, "
                    "input_type=int]\n    For further information visit %sgreater_than_equal"
                    % (name, minimum, value, PYDANTIC_DOCS))
    return None


def _workers(args, faults, load, profile, world, node_rank, visible, fail_local0=None):
    """The payloads of this node's Worker_TP<r> processes (global ranks node_rank*local ...)."""
    local = world // max(1, args.nnodes)
    escape = runtime.escape_rank(faults, local)
    fail = fail_local0 or (runtime.fail_message(faults, "RuntimeError: CUDA error: an illegal memory access was "
                                                "encountered") if node_rank == 0 else None)
    out = []
    for local_rank in range(local):
        rank = node_rank * local + local_rank
        out.append({"role": "worker", "engine": "vllm", "title": "VLLM::Worker_TP%d" % rank, "rank": rank,
                    "gpu": visible[local_rank], "fraction": args.gpu_memory_utilization, "load_seconds": load,
                    "weights": weights.share(args.model, rank, world), "model": args.model,
                    "escape": local_rank == escape, "fail": fail if local_rank == 0 else None,
                    "ignore_sigterm": bool(faults.get("ignore_sigterm")),
                    "park_residual_mib": park.settings(profile)["residual_mib"],
                    "log_proc": "Worker_TP%d" % rank})
        if args.nnodes > 1:
            out[-1]["dist_init"] = ("world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://%s:%d "
                                    "backend=nccl" % (world, rank, local_rank, args.master_addr, args.master_port))
    return out


def _headless_dp(args, log, stopper):
    """--headless on node rank 0 (or with one node): serve.py's run_headless starts data-parallel engine cores
    that wait for an API front end's handshake (core.py, HANDSHAKE_TIMEOUT_MINS = 5), which never comes; the
    mock holds nothing while it waits."""
    log.info("Launching %d data parallel engine(s) in headless mode, with head node address tcp://%s:%d." % (
        args.data_parallel_size, args.master_addr if args.nnodes > 1 else "127.0.0.1", 29550), "serve.py:1")
    deadline = time.monotonic() + 5 * 60
    while time.monotonic() < deadline:
        if stopper.wait(0.2):
            log.info("Shutting down.", "serve.py:1")
            runtime.exit_now(0)
    runtime.print_error(traceback_text("RuntimeError: Did not receive response from front-end process within 5 "
                                       "minutes"))
    runtime.exit_now(1)


def _worker_node(args, log, stopper, faults, load, profile, world, spec, spec_text):
    """A worker node (--headless, node rank > 0): serve.py's run_headless runs a MultiprocExecutor of this node's
    workers, no API server and no HTTP port; it joins the head's rendezvous and lives as long as the group."""
    log.info("Launching vLLM (v%s) headless multiproc executor, with head node address %s:%d for torch.distributed "
             "process group." % (VLLM_VERSION, args.master_addr, args.master_port), "serve.py:1")
    visible = gpumem.visible_gpus()
    local = world // args.nnodes
    if len(visible) < local:
        runtime.print_error(traceback_text("RuntimeError: CUDA error: invalid device ordinal (%d ranks on this node, "
                                           "%d visible GPUs)" % (local, len(visible))))
        runtime.exit_now(1)
    dies = faults.get("group_rank_dies")
    fail = None
    if dies is True or (dies is not None and dies is not False and int(dies) == args.node_rank):
        fail = runtime.fail_message({"fail_start": faults.get("fail_start") or True},
                                    "RuntimeError: CUDA error: an illegal memory access was encountered")
    workers = _workers(args, faults, load, profile, world, args.node_rank, visible, fail_local0=fail)
    sup = procs.Supervisor(log)
    sup.start([(w["title"], w) for w in workers])
    timeout = ready_timeout()
    started = time.monotonic()
    peer = group.Worker("vllm", args.master_addr, args.master_port, args.node_rank, args.nnodes, world, spec, spec_text)
    peer.start(lambda: stopper.event.is_set() or time.monotonic() - started > timeout)
    error = peer.wait_group(sup, len(workers), stopper, started, timeout)
    if error == "stop":
        _worker_node_exit(log, sup, peer, 0)
    if error:
        log.error("Worker failed to join the group: %s" % error, "multiproc_executor.py:1")
        runtime.print_error(traceback_text(error if error.split(":", 1)[0].endswith(("Error", "Exception")) else
                                           "RuntimeError: %s" % error))
        _worker_node_exit(log, sup, peer, 1)
    # executor.start_worker_monitor(inline=True): lives until a worker or the group goes
    while not stopper.wait(0.2):
        dead = sup.crashed()
        if dead:
            log.error("Worker proc %s died unexpectedly, shutting down executor." % dead, "multiproc_executor.py:1")
            _worker_node_exit(log, sup, peer, 1)
        if peer.done.is_set():
            if peer.shutdown:
                _worker_node_exit(log, sup, peer, 0)
            log.error("%s (%s)" % (group.NCCL_REMOTE, peer.failure()), "multiproc_executor.py:1")
            _worker_node_exit(log, sup, peer, 1)
    _worker_node_exit(log, sup, peer, 0)


def _worker_node_exit(log, sup, peer, code):
    log.info("Shutting down.", "serve.py:1")
    peer.close()
    sup.stop()
    runtime.exit_now(code)


def _log_stats(log, state):
    s = state.stats
    with s.lock:
        if not s.running and not s.waiting:
            return
        log.info("Engine 000: Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs" % (
            s.last_gen_throughput, s.running, s.waiting), "loggers.py:1")
        if state.spec is not None and s.drafts:
            log.info("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted: %d tokens, Drafted: %d tokens, "
                     "Avg Draft acceptance rate: %.1f%%" % (1 + s.accepted / s.drafts, s.accepted, s.draft_tokens,
                                                            100.0 * s.accepted / max(1, s.draft_tokens)), "metrics.py:1")


def _shutdown(log, server, core, started):
    log.info("Shutting down FastAPI HTTP server.", "launcher.py:1")
    server.RequestHandlerClass.state.shutting_down = True
    if started:
        server.shutdown()
    server.server_close()
    if core.poll() is None:
        core.terminate()
        try:
            core.wait(5)
        except Exception:  # noqa: BLE001 - escalate on any wait failure
            core.kill()
    runtime.exit_now(0)
