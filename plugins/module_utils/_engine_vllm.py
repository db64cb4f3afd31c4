# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about vLLM (0.33, ``vllm serve``): one adapter of the registry in ``_engine``.

Every name below is a fact ``_engine.FACTS`` asks each engine for; the facts were read from the pinned
engine and are judged by its own code in ``tests/contracts`` and ``tests/engines``. Standard library only.
"""
from __future__ import annotations

import json

from ansible_collections.llmops.specdec.plugins.module_utils import _specdef

ENGINE, REQUIRED, SpecError, _params = _specdef.ENGINE, _specdef.REQUIRED, _specdef.SpecError, _specdef.params

NAME = "vllm"
TITLE = "vLLM"
# The pinned release, as messages name it ("on Model Runner V1 vLLM 0.33 ...").
RELEASE = "vLLM 0.33"
DOCS_URL = "https://docs.vllm.ai/"
UNIT_DESCRIPTION = "vLLM inference server (llmops.specdec)"
# Where `pip install vllm` as root puts the entry point; a venv install is e.g. /opt/vllm/bin/vllm.
EXECUTABLE = "/usr/local/bin/vllm"
DEFAULT_PORT = 8000

# The API key: vLLM reads it from this variable (the environment file); no launcher needed.
API_KEY_VAR = "VLLM_API_KEY"
KEY_LAUNCHER = None


def serve_argv(executable, model, key_in_env):
    """The argv up to the model: ``vllm serve MODEL`` (the key comes from API_KEY_VAR by itself)."""
    return [executable, "serve", model]


# The base flags the collection renders (_server._base_argv).
TP_FLAG = "--tensor-parallel-size"
# A serving group across nodes (spec_server_nodes, issue 33; vLLM 0.33 engine/arg_utils.py "parallel" group): every
# node runs `vllm serve` with the group's size, its rank and the head's rendezvous; the workers without an API
# server (--headless). The world size (TP x PP) must split evenly over the nodes. The rendezvous port's default is
# vLLM's own (config/parallel.py ParallelConfig.master_port).
GROUP_DEFAULT_PORT = 29501


def group_args(rank, nnodes, address, port):
    """This node's flags in a group of ``nnodes``: the head (rank 0) serves the API, the others run headless."""
    return ["--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", address, "--master-port", str(port)] \
        + (["--headless"] if rank else [])


# How the weights are read (spec_server_load_format, docs/load.md): vLLM 0.33's loaders
# (model_loader._LOAD_FORMAT_TO_MODEL_LOADER; tests/contracts holds the list to it) but `dummy` (random
# weights: a server that answers nonsense), and those that read past the page cache (a prewarm cannot help them:
# measured on an H200, bench/README.md).
LOAD_FORMAT_FLAG = "--load-format"
LOAD_FORMATS = ("auto", "hf", "fastsafetensors", "instanttensor", "ipc_cache", "mistral", "modelexpress", "npcache", "pt",
                "runai_streamer", "runai_streamer_sharded", "safetensors", "sharded_state", "tensorizer")
DIRECT_IO_LOAD_FORMATS = ("fastsafetensors", "runai_streamer", "runai_streamer_sharded")
MEMORY_FLAG = "--gpu-memory-utilization"
MAX_LEN_FLAG = "--max-model-len"

# The flags that make a serving group across nodes (group_args below), with the parser's short forms.
GROUP_FLAGS = ("--nnodes", "-n", "--node-rank", "-r", "--master-addr", "--master-port", "--headless")
# Flags the collection sets itself; the same flag in extra_args would override or duplicate it.
OWNED_FLAGS = ("--speculative", "-sc", "--host", "--port", "--model", "--tensor-parallel-size", "-tp",
               "--served-model-name", "--gpu-memory-utilization", "--device-memory-utilization", "--max-model-len",
               "--api-key", "--load-format") + GROUP_FLAGS
# How the parser reads a flag's name: vLLM's FlexibleArgumentParser turns '_' into '-' in the name (between
# '--' and the first '.', before any '='), so --api_key=x is --api-key=x; it keeps argparse's allow_abbrev,
# so a unique prefix is the flag itself (--api-k=x is --api-key, -t 2 is -tp 2).
FLAG_SPELLING = {"underscores": True, "abbrev": True}
# Flags whose value is a credential, and what to use instead (never ExecStart=, argv is world-readable).
SECRET_FLAGS = {
    "--api-key": "spec_server_api_key (kept out of the unit and argv)",
    "--hf-token": "spec_server_secret_env: {HF_TOKEN: ...} (the environment file, root 0600)",
}
# Flags in extra_args with which vLLM turns a batch-size schedule off and runs a fixed k
# (VllmConfig._maybe_disable_dynamic_sd_for_data_parallel); a value of 1 leaves it on.
SCHEDULE_OFF = {"--data-parallel-size": "data parallelism (ranks could pick different k and deadlock)",
                "-dp": "data parallelism (ranks could pick different k and deadlock)"}
SCHEDULE_OFF_UNLESS_ONE = True
_FALSE = ("0", "false", "no", "off")


def schedule_env_conflict(method, environment):
    """Why the unit's environment makes vLLM drop (or refuse) a scheduled ``method``; None when it does not."""
    runner = str(environment.get("VLLM_USE_V2_MODEL_RUNNER", "")).strip().lower()
    if runner in _FALSE and method in ("ngram_gpu", "dspark"):
        return ("spec_server_env sets VLLM_USE_V2_MODEL_RUNNER=%s: on Model Runner V1 %s %s; unset it or drop the "
                "schedule" % (environment["VLLM_USE_V2_MODEL_RUNNER"], RELEASE,
                              "drops the schedule of ngram_gpu" if method == "ngram_gpu" else "cannot run dspark"))
    return None


# Readiness: GET HEALTH_PATH is 200 and, because vLLM's /health answers before the model is served,
# GET /v1/models lists the served model.
# Compilation caches in the one directory the unit may write (spec_server_cache_dir, docs/load.md): vLLM's own
# (torch.compile artifacts, AOT graphs) under VLLM_CACHE_ROOT (default ~/.cache/vllm); Inductor, Triton, CUDA's
# JIT and FlashInfer beside it, in the layout SGLang uses (Inductor's default is under /tmp, which the unit's
# PrivateTmp= empties at every start).
def cache_env(cache_dir):
    return {"VLLM_CACHE_ROOT": cache_dir + "/vllm", "TORCHINDUCTOR_CACHE_DIR": cache_dir + "/inductor",
            "TRITON_CACHE_DIR": cache_dir + "/triton", "CUDA_CACHE_PATH": cache_dir + "/nv",
            "FLASHINFER_WORKSPACE_BASE": cache_dir}


HEALTH_PATH = "/health"
READY_LISTS_MODEL = True

# Log lines worth reporting (_ready.engine_log_tail): an exception line may stand behind vLLM's process
# prefix ("(EngineCore_DP0 pid=42) ") and its logger's ("ERROR 12-04 01:50:28 [multiproc_executor.py:953] "):
# a real vLLM 0.32 logs a failed worker's traceback line by line through its logger (tests/real).
LOG_PREFIX = r'(?:\([^)]*\)\s+)?(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s+)?'

# The load, in the engine's own start-up lines (docs/load.md; vLLM 0.32/0.33: default_loader.py,
# gpu_model_runner.py, compilation/monitor.py and backends.py, v1/engine/core.py). Each names a figure in
# seconds (group s); TP ranks log theirs side by side (the largest is kept). The first pattern of a figure that
# matches wins. STAGES say what it is doing after a line, for the readiness wait's progress line.
LOAD_FIGURES = (
    ("weights", r"Model loading took [0-9.]+ GiB memory and (?P<s>[0-9.]+) seconds"),
    ("weights", r"Loading weights took (?P<s>[0-9.]+) seconds"),
    ("compile", r"torch\.compile took (?P<s>[0-9.]+) s in total"),
    ("compile_cached", r"Directly load the compiled graph\(s\) for .* from the cache, took (?P<s>[0-9.]+) s"),
    ("graph_capture", r"Graph capturing finished in (?P<s>[0-9.]+) secs"),
    ("engine_init", r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[0-9.]+) s"),
)
# Phases the engine logs no figure for, timed from the journal between a start line and the end line after it
# (used where the figure is missing): the CPU build compiles inside its warm-up (cpu_model_runner.py).
LOAD_SPANS = (
    ("compile", r"Warming up model for the compilation", r"Warming up done"),
)
# What the engine says of its compiled graphs found in the cache (compilation/decorators.py, backends.py):
# loaded, or found and not loadable (it compiles again; the reason is group `why`). Neither: none was found.
COMPILE_CACHE_LINES = (
    ("load_failed", r"Compiling model again due to a load failure from \S+, reason: (?P<why>.*)"),
    ("hit", r"Directly load AOT compilation from path|Directly load the compiled graph\(s\) for .* from the cache"),
)
# tqdm's bar while the shards are read (weight_utils.py "Loading safetensors checkpoint shards: 41% Completed").
LOAD_PROGRESS = r"Loading safetensors checkpoint shards:\s+(?P<pct>\d+)% Completed"
# The line that ends the start (the API serves): the load's total runs from the unit's start to it.
READY_LINE = r"Application startup complete"
LOAD_STAGES = (
    (r"Starting to load model", "loading weights"),
    (r"Loading weights took|Model loading took", "compiling, profiling memory and capturing graphs"),
    (r"init engine \(profile, create kv cache, warmup model\) took", "starting the API server"),
)


def load_phases(figures):
    """Seconds per phase from the figures: vLLM's 'init engine' holds compilation (or its cache load), the
    memory profile with the KV cache, and graph capture; the profile is what is left of it."""
    compile_s = figures.get("compile", figures.get("compile_cached"))
    init = figures.get("engine_init")
    kv = None if init is None else max(0.0, init - (compile_s or 0.0) - (figures.get("graph_capture") or 0.0))
    return {"weights": figures.get("weights"), "compile": compile_s, "graph_capture": figures.get("graph_capture"),
            "kv_profile": kv}


# Parking (docs/park.md; vllm/entrypoints/serve/dev/sleep/api_router.py): the flag without which it frees
# nothing (allocations through the cumem pool only with it), the environment the routes need, the routes.
PARK = {
    "flag": "--enable-sleep-mode",
    "env": {"VLLM_SERVER_DEV_MODE": "1"},  # without it the routes are not registered (404)
    # level 1: weights to CPU memory, KV cache dropped; mode=wait: the requests in flight finish before
    # the weights move (the router's default, abort, would end them).
    "park": ("POST", "/sleep?level=1&mode=wait", None),
    "wake": ("POST", "/wake_up", None),
    "ask": ("GET", "/is_sleeping"),
}

# Acceptance (_bench_accept): kind ``counters``, the spec_decode counters of /metrics differenced around a
# level (_prom.counter_acceptance); per-position rates too, which the nightly watch compares (_watch).
METRICS_MARKER = "vllm:"  # a /metrics text with this in it is vLLM's (_bench_accept.detect_metrics)
ACCEPTANCE_SOURCE = "vllm_counters"
ACCEPTANCE_METRICS = {
    "kind": "counters",
    "prefix": "vllm:spec_decode_",
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
}

# The batch the engine runs now (_levels, issue 32): the gauge of requests in the model's execution batches
# (vllm/v1/metrics/loggers.py, one series per engine index: summed); ``only``: the label values a series must have.
RUNNING_GAUGE = {"name": "vllm:num_requests_running", "only": {}}

# Prefix cache (_bench_accept.PrefixCacheProbe, the verdict's prefix-cache guardrail): counters of queried and
# cached prompt tokens (v1/metrics/loggers.py PrometheusStatLogger), differenced around a level; hit rate = hits / queries.
PREFIX_CACHE_METRICS = {
    "hits": "vllm:prefix_cache_hits_total",
    "queries": "vllm:prefix_cache_queries_total",
}

# Tune: band ends the engine honours as they are (None: every batch size; SGLang pads to graph sizes).
TUNE_BATCH_ENDS = None


# ---------------------------------------------------------------------------------------------
# speculative methods: vLLM's spelling, parameters and checks (SpeculativeConfig 0.33), rendering
# ---------------------------------------------------------------------------------------------

_DRAFT = {"draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}
_SCHEDULED = {"schedule": ENGINE}

# Per canonical method (``_spec.METHOD_DOCS``): vLLM's own method name and the parameters it takes, each
# REQUIRED, ENGINE (optional, engine decides) or a fixed default that normalize() fills in; `schedule` where
# vLLM honours a batch-size schedule for the method; `one_of`: groups of which at least one must be given.
METHODS = {
    "none": {"name": None, "params": {}},
    # vLLM requires k for ngram; 5 is ours (vLLM's documented example), so that
    # `-e method=ngram` alone is a complete request. The mock engines are calibrated on it.
    "ngram": {"name": "ngram", "params": {
        "num_speculative_tokens": 5, "prompt_lookup_min": ENGINE, "prompt_lookup_max": ENGINE, "schedule": ENGINE}},
    "ngram_gpu": {"name": "ngram_gpu", "params": {
        "num_speculative_tokens": 5, "prompt_lookup_min": ENGINE, "prompt_lookup_max": ENGINE, "schedule": ENGINE}},
    "eagle": {"name": "eagle", "params": _params(
        {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _DRAFT, _SCHEDULED)},
    "eagle3": {"name": "eagle3", "params": _params(
        {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _DRAFT, _SCHEDULED)},
    "mtp": {"name": "mtp", "params": _params(
        {"num_speculative_tokens": REQUIRED, "draft_model": ENGINE}, _DRAFT, _SCHEDULED)},
    "draft_model": {"name": "draft_model", "params": _params(
        {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _DRAFT, _SCHEDULED)},
    "suffix": {"name": "suffix", "params": {
        "num_speculative_tokens": ENGINE, "suffix_max_tree_depth": 24,
        "suffix_max_cached_requests": 10000, "suffix_max_spec_factor": 1.0,
        "suffix_min_token_prob": 0.1}},
    "dflash": {"name": "dflash", "params": _params(
        {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _DRAFT, _SCHEDULED)},
    # Without draft_model it drafts from stages bundled in the target (DeepSeek-V4), then k is needed;
    # with a draft, k defaults to the draft's block size.
    "dspark": {"name": "dspark", "params": _params(
        {"draft_model": ENGINE, "num_speculative_tokens": ENGINE}, _DRAFT, _SCHEDULED),
        "one_of": [("draft_model", "num_speculative_tokens")]},
}

# Deprecated method names -> canonical method: vLLM 0.33's MTPModelTypes, each rewritten to `mtp` with a
# deprecation warning; the collection does the same on every engine (the canonical `mtp` exists on each).
_MTP_ALIASES = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp",
)
METHOD_ALIASES = dict((name, "mtp") for name in _MTP_ALIASES)

# Why a method cannot take a schedule here (the engine would drop it and run a fixed k).
NO_SCHEDULE = {
    "suffix": "vLLM 0.33 runs suffix decoding on Model Runner V1 only, which drops "
              "num_speculative_tokens_per_batch_size for it and runs a fixed k",
    "none": "method none does not speculate; give a method (a band with k: 0 stops drafting there)",
}
# What num_speculative_tokens means beside a schedule (why it must be the schedule's largest k).
SCHEDULE_TOP_K = "vLLM caps every band at it and sizes its buffers by it"

# canonical parameter -> SpeculativeConfig key (inside the --speculative-config JSON).
SPEC_KEYS = {
    "num_speculative_tokens": "num_speculative_tokens",
    "prompt_lookup_min": "prompt_lookup_min",
    "prompt_lookup_max": "prompt_lookup_max",
    "draft_model": "model",
    "draft_tensor_parallel_size": "draft_tensor_parallel_size",
    "draft_quantization": "quantization",
    "suffix_max_tree_depth": "suffix_decoding_max_tree_depth",
    "suffix_max_cached_requests": "suffix_decoding_max_cached_requests",
    "suffix_max_spec_factor": "suffix_decoding_max_spec_factor",
    "suffix_min_token_prob": "suffix_decoding_min_token_prob",
    "schedule": "num_speculative_tokens_per_batch_size",  # [[start, end, k], ...], see render_spec
}
_OPEN_END = 1 << 20  # vLLM needs an end for the last range; it keeps the last K beyond any end anyway

# The quantization names vLLM takes for the draft (``draft_quantization``): its QuantizationMethods
# (vllm/model_executor/layers/quantization/__init__.py; read from 0.32, the pinned 0.33 is checked in
# tests/contracts). A name outside the list would make a candidate that never starts.
QUANTIZATIONS = ("awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
                 "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
                 "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8",
                 "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only",
                 "nvfp4_per_token", "mxfp8")


def _ngram(out, tp, given=()):
    # vLLM's own rule: one bound given -> the other takes its value; none -> both 5.
    lo, hi = out.get("prompt_lookup_min"), out.get("prompt_lookup_max")
    if lo is None and hi is None:
        lo = hi = 5
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    if lo > hi:
        raise SpecError("prompt_lookup_min (%d) must be <= prompt_lookup_max (%d)" % (lo, hi))
    out["prompt_lookup_min"], out["prompt_lookup_max"] = lo, hi


def _draft(out, tp, given=()):
    dtp = out.get("draft_tensor_parallel_size")
    if dtp is not None and dtp not in (1, tp):
        raise SpecError("draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (%d), got %d"
                        % (tp, dtp))


def _dspark(out, tp, given=()):
    if "draft_model" not in out and "num_speculative_tokens" not in out:
        # vLLM: without a draft it drafts from the target's own DSpark stages, and then needs k.
        raise SpecError("dspark on vllm requires draft_model (k then defaults to its block size) or "
                        "num_speculative_tokens (the DSpark stages bundled in the target checkpoint, e.g. DeepSeek-V4)")
    _draft(out, tp, given)


def _suffix(out, tp, given=()):
    if "num_speculative_tokens" not in out:  # vLLM treats the tree depth as the cap
        out["num_speculative_tokens"] = out["suffix_max_tree_depth"]


# Per method: the checks beyond the parameter table (vLLM's own rules), filling what vLLM derives.
CHECKS = {
    "ngram": _ngram,
    "ngram_gpu": _ngram,
    "eagle": _draft,
    "eagle3": _draft,
    "mtp": _draft,
    "draft_model": _draft,
    "dflash": _draft,
    "dspark": _dspark,
    "suffix": _suffix,
}

# Whether a schedule needs a file beside the unit (vLLM takes it inside the JSON).
SCHEDULE_FILES = False


def schedule_file(schedule, schedule_dir):
    """No file: vLLM reads the schedule from --speculative-config."""
    return None


def schedule_warnings(schedule):
    """vLLM reads every band as given."""
    return []


def render_spec(spec, schedule_dir=None):
    """The argv fragment for a normalized ``spec`` (not method none): one --speculative-config JSON."""
    cfg = {"method": METHODS[spec["method"]]["name"]}
    for name, value in spec.items():
        if name == "schedule":
            value = [[b["batch"][0], _OPEN_END if b["batch"][1] is None else b["batch"][1], b["k"]]
                     for b in value]
        if name != "method":
            cfg[SPEC_KEYS[name]] = value
    return ["--speculative-config", json.dumps(cfg, sort_keys=True, separators=(",", ":"))]
