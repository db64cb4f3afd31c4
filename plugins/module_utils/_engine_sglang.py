# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about SGLang (0.5.23, ``python -m sglang.launch_server``): one adapter of ``_engine``.

Every name below is a fact ``_engine.FACTS`` asks each engine for; the facts were read from the pinned
engine and are judged by its own code in ``tests/contracts`` and ``tests/engines``. Standard library only.
"""
from __future__ import annotations

import hashlib
import json

from ansible_collections.llmops.specdec.plugins.module_utils import _specdef

ENGINE, REQUIRED, SpecError, _params = _specdef.ENGINE, _specdef.REQUIRED, _specdef.SpecError, _specdef.params

NAME = "sglang"
TITLE = "SGLang"
RELEASE = "SGLang 0.5.23"
DOCS_URL = "https://docs.sglang.io/"
UNIT_DESCRIPTION = "SGLang inference server (llmops.specdec)"
# The interpreter that has SGLang (`pip install sglang` as root); a venv install is e.g. /opt/sglang/bin/python.
EXECUTABLE = "/usr/bin/python3"
DEFAULT_PORT = 30000

# The API key: SGLang 0.5.23 takes it only as --api-key (ServerArgs.api_key, no environment variable), so it
# is started through a one-line launcher that appends the flag from this variable inside the interpreter,
# where it is not part of the process's command line (/proc/PID/cmdline is readable by every local user).
API_KEY_VAR = "SPECDEC_API_KEY"
KEY_LAUNCHER = ("import os,runpy,sys;sys.argv+=['--api-key',os.environ.pop('%s')];"
                "runpy.run_module('sglang.launch_server',run_name='__main__',alter_sys=True)" % API_KEY_VAR)


def serve_argv(executable, model, key_in_env):
    """The argv up to the model: the launcher when the key is in the environment file, else the module."""
    if key_in_env:
        return [executable, "-c", KEY_LAUNCHER, "--model-path", model]
    return [executable, "-m", "sglang.launch_server", "--model-path", model]


TP_FLAG = "--tp-size"

# A serving group across nodes (spec_server_nodes, issue 33; SGLang 0.5.23 server_args.py): every node runs the
# same command with the group's size, its rank and the head's rendezvous (--dist-init-addr HOST:PORT; its
# alias --nccl-init-addr is owned too); only the head (rank 0) serves HTTP. The TP size must split evenly.
# SGLang has no default rendezvous port (a group without --dist-init-addr is refused): the collection's is the one
# SGLang's multi-node docs use.
GROUP_DEFAULT_PORT = 20000
GROUP_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr")


def group_args(rank, nnodes, address, port):
    """This node's flags in a group of ``nnodes``."""
    return ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", "%s:%d" % (address, port)]


# How the weights are read (spec_server_load_format, docs/load.md): SGLang 0.5.23's --load-format choices
# (server_args.LOAD_FORMAT_CHOICES; tests/contracts holds the list to it) but `dummy` (random weights), and those
# that read past the page cache (a prewarm cannot help them).
LOAD_FORMAT_FLAG = "--load-format"
LOAD_FORMATS = ("auto", "pt", "safetensors", "instanttensor", "npcache", "sharded_state", "presharded", "gguf",
                "expert_pack", "bitsandbytes", "mistral", "layered", "flash_rl", "remote", "remote_instance",
                "fastsafetensors", "private", "runai_streamer")
DIRECT_IO_LOAD_FORMATS = ("fastsafetensors", "runai_streamer")
MEMORY_FLAG = "--mem-fraction-static"
MAX_LEN_FLAG = "--context-length"

OWNED_FLAGS = ("--speculative", "--host", "--port", "--model-path", "--model", "--tp-size", "--tp",
               "--tensor-parallel-size", "--served-model-name", "--mem-fraction-static", "--context-length",
               "--api-key", "--load-format") + GROUP_FLAGS
# SGLang 0.5.23's plain argparse keeps '_' in a name (--api_key is no flag of it) and allow_abbrev.
FLAG_SPELLING = {"underscores": False, "abbrev": True}
SECRET_FLAGS = {
    "--api-key": "spec_server_api_key (kept out of the unit and argv)",
    "--hf-token": "spec_server_secret_env: {HF_TOKEN: ...} (the environment file, root 0600)",
    # The admin key has no environment variable: the collection runs without one (listed so that an
    # abbreviation such as --ad, which SGLang's parser resolves to it, is refused too).
    "--admin-api-key": "no admin key (SGLang reads it only from argv, which every local user can read)",
}
# Flags with which SGLang switches --speculative-adaptive off (adaptive_unsupported_reason).
SCHEDULE_OFF = {"--enable-dp-attention": "attention DP (adaptive decisions are not synchronized across DP ranks)",
                "--enable-two-batch-overlap": "two-batch overlap",
                "--enable-pdmux": "PD multiplexing",
                "--enable-multi-layer-eagle": "multi-layer EAGLE"}
SCHEDULE_OFF_UNLESS_ONE = False


def schedule_env_conflict(method, environment):
    """No environment variable turns SGLang's adaptive schedule off."""
    return None


# Readiness: /health_generate is 200 (it runs a one-token generation, so the model is served).
# Compilation caches in the one directory the unit may write (spec_server_cache_dir, docs/load.md). SGLang
# 0.5.23 keeps its own under SGLANG_CACHE_DIR (default ~/.cache/sglang) and points Triton, Inductor, CUDA's JIT,
# TileLang and FlashInfer there with setdefault (srt/environ.py, third_party_cache_defaults), which does nothing
# once FlashInfer or Inductor resolved theirs: the same layout is set here explicitly.
def cache_env(cache_dir):
    return {"SGLANG_CACHE_DIR": cache_dir, "TRITON_CACHE_DIR": cache_dir + "/triton",
            "TORCHINDUCTOR_CACHE_DIR": cache_dir + "/inductor", "CUDA_CACHE_PATH": cache_dir + "/nv",
            "TILELANG_CACHE_DIR": cache_dir + "/tilelang", "FLASHINFER_WORKSPACE_BASE": cache_dir}


HEALTH_PATH = "/health_generate"
READY_LISTS_MODEL = False

# Log lines worth reporting: SGLang prints a traceback's lines as they are (no prefix to skip).
LOG_PREFIX = r''

# The load, in the engine's own start-up lines (docs/load.md; SGLang 0.5.23: model_runner.py "Load weight end",
# cuda_graph_setup.py "Capture <name> CUDA graph end" once per graph runner, target and draft, one after the
# other: a named group `what` sums them). torch.compile runs inside graph capture; the KV pool has no figure.
LOAD_FIGURES = (
    ("weights", r"Load weight end\. elapsed=(?P<s>[0-9.]+) s"),
    ("graph_capture", r"Capture (?P<what>.+?) (?:CUDA )?graph end\..*elapsed=(?P<s>[0-9.]+) s"),
)
# No phase without a figure, and no line about a compile cache (torch.compile runs inside graph capture).
LOAD_SPANS = ()
COMPILE_CACHE_LINES = ()
# tqdm's bar while the shards are read (weight_utils.py "Loading safetensors checkpoint shards: 41% Completed").
LOAD_PROGRESS = r"Loading safetensors checkpoint shards:\s+(?P<pct>\d+)% Completed"
# The line that ends the start (the API serves): the load's total runs from the unit's start to it.
READY_LINE = r"The server is fired up and ready to roll"
LOAD_STAGES = (
    (r"Load weight begin", "loading weights"),
    (r"Load weight end", "allocating the KV cache and capturing graphs"),
    (r"The server is fired up", "warming up"),
)


def load_phases(figures):
    """Seconds per phase from the figures (SGLang reports weights and graph capture)."""
    return {"weights": figures.get("weights"), "compile": None, "graph_capture": figures.get("graph_capture"),
            "kv_profile": None}


# Parking (sglang/srt/entrypoints/http_server.py).
PARK = {
    "flag": "--enable-memory-saver",
    "env": {},
    # Releasing asserts the scheduler is idle (a busy one dies of it): pause first, which aborts the
    # requests in flight and holds new ones until generation continues after the wake-up.
    "pause": ("POST", "/pause_generation", {"mode": "abort"}),
    "park": ("POST", "/release_memory_occupation", {"tags": None}),
    "wake": ("POST", "/resume_memory_occupation", {"tags": None}),
    "resume": ("POST", "/continue_generation", {}),
    "ask": None,  # SGLang 0.5.23 has no route that says whether memory is released
}

# Acceptance (_bench_accept): kind ``server_info``, avg_spec_accept_length of /get_server_info (a running
# average since the server started), and the last batch's gauge from /metrics when exported.
METRICS_MARKER = "sglang:"
ACCEPTANCE_SOURCE = "sglang_server_info"
ACCEPTANCE_METRICS = {
    "kind": "server_info",
    "path": "/get_server_info",
    "field": "avg_spec_accept_length",
    "gauge": "sglang:spec_accept_length",
    "caveat": ("SGLang reports avg_spec_accept_length as a running average since the server "
               "started, so it mixes earlier traffic (warm-up, health checks, other levels) "
               "into this figure; use a fresh server per run for an exact value"),
}

# Prefix cache (_bench_accept.PrefixCacheProbe): the tokenizer's counters of prompt tokens and of the cached ones
# (observability/metrics_collector.py; cached_tokens_total has a cache_source label and no series before the first
# hit; both need --enable-metrics), differenced around a level. The sglang:cache_hit_rate gauge is a recent window.
PREFIX_CACHE_METRICS = {
    "hits": "sglang:cached_tokens_total",
    "queries": "sglang:prompt_tokens_total",
}

# The batch the engine runs now (_levels, issue 32): srt/observability/metrics_collector.py's gauge, one series per
# scheduler (labels tp_rank, pp_rank, moe_ep_rank ...); the first rank of each data-parallel scheduler holds its batch.
RUNNING_GAUGE = {"name": "sglang:num_running_reqs", "only": {"tp_rank": "0", "pp_rank": "0"}}

# ---------------------------------------------------------------------------------------------
# speculative methods: SGLang's spelling, parameters and checks (ServerArgs 0.5.23), rendering
# ---------------------------------------------------------------------------------------------

_TREE = ("eagle_steps", "eagle_topk", "num_draft_tokens")
_SCHEDULED = {"schedule": ENGINE}
_EAGLE = {"num_speculative_tokens": ENGINE, "eagle_steps": ENGINE, "eagle_topk": ENGINE,
          "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}
_FROZEN_KV_MTP_K = 3  # SGLang's automatic chain for the same draft under NEXTN (_auto_choose_speculative_params)

# Per canonical method (``_spec.METHOD_DOCS``): SGLang's --speculative-algorithm and the parameters it takes
# (REQUIRED, ENGINE or a fixed default), `schedule` where --speculative-adaptive honours it, `one_of`.
METHODS = {
    "none": {"name": None, "params": {}},
    "ngram": {"name": "NGRAM", "params": {
        "num_speculative_tokens": 11, "ngram_min_bfs_breadth": 1, "ngram_max_bfs_breadth": 10,
        "ngram_match_type": "BFS", "ngram_max_trie_depth": 18}},
    "eagle": {"name": "EAGLE", "params": _params({"draft_model": REQUIRED}, _EAGLE, _SCHEDULED)},
    "eagle3": {"name": "EAGLE3", "params": _params({"draft_model": REQUIRED}, _EAGLE, _SCHEDULED)},
    "mtp": {"name": "NEXTN", "params": _params({"draft_model": ENGINE}, _EAGLE, _SCHEDULED)},
    "draft_model": {"name": "STANDALONE", "params": _params({"draft_model": REQUIRED}, _EAGLE)},
    # k renders as the verify window (block size) k+1; absent: the draft's block_size, else 16.
    "dflash": {"name": "DFLASH", "params": {
        "draft_model": REQUIRED, "num_speculative_tokens": ENGINE, "draft_quantization": ENGINE}},
    # k is gamma (--speculative-dspark-block-size); absent: the draft's block size, else SGLang's default.
    "dspark": {"name": "DSPARK", "params": {
        "draft_model": ENGINE, "num_speculative_tokens": ENGINE, "draft_quantization": ENGINE}},
    "uno": {"name": "UNO", "params": {
        "uno_lora_path": REQUIRED, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
        "eagle_topk": ENGINE, "num_draft_tokens": ENGINE},
        "one_of": [("num_speculative_tokens", "eagle_steps")]},  # k (linear) or the tree trio
    "frozen_kv_mtp": {"name": "FROZEN_KV_MTP", "params": _params({"draft_model": REQUIRED}, _EAGLE)},
}
# Deprecated method names SGLang rewrites itself: none (the collection's aliases come from other engines).
METHOD_ALIASES = {}

_ADAPTIVE = ("SGLang 0.5.23 runs --speculative-adaptive only for EAGLE, EAGLE3 and NEXTN (eagle, eagle3, mtp) "
             "with topk 1; for %s it switches adaptive off with a warning and runs a fixed k")
# Why a method cannot take a schedule here (the engine would drop it and run a fixed k).
NO_SCHEDULE = dict((m, _ADAPTIVE % METHODS[m]["name"])
                   for m in ("ngram", "draft_model", "dflash", "dspark", "uno", "frozen_kv_mtp"))
NO_SCHEDULE["none"] = "method none does not speculate; give a method (a band with k: 0 stops drafting there)"
SCHEDULE_TOP_K = "SGLang starts every band from it and sizes its buffers by it"

# canonical parameter -> launch_server flag. num_speculative_tokens has no flag of its own: it renders
# through --speculative-num-draft-tokens (and steps/topk), see render_spec; the schedule renders as
# --speculative-adaptive --speculative-adaptive-config PATH.
SPEC_FLAGS = {
    "draft_model": "--speculative-draft-model-path",
    "draft_quantization": "--speculative-draft-model-quantization",
    "eagle_steps": "--speculative-num-steps",
    "eagle_topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
    "ngram_min_bfs_breadth": "--speculative-ngram-min-bfs-breadth",
    "ngram_max_bfs_breadth": "--speculative-ngram-max-bfs-breadth",
    "ngram_match_type": "--speculative-ngram-match-type",
    "ngram_max_trie_depth": "--speculative-ngram-max-trie-depth",
    "uno_lora_path": "--uno-lora-path",
}
ADAPTIVE_FLAGS = ("--speculative-adaptive", "--speculative-adaptive-config")

# The quantization names --speculative-draft-model-quantization takes as its choices: QUANTIZATION_CHOICES
# (sglang/srt/arg_groups/choices.py).
QUANTIZATIONS = ("awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt",
                 "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8",
                 "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors",
                 "modelslim", "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8",
                 "unquant", "humming")


def _ngram(out, tp, given=()):
    window = out["num_speculative_tokens"] + 1
    if "ngram_max_bfs_breadth" not in given:
        # The default breadth (10) must not turn a small k into a refusal: cap it at the window.
        out["ngram_max_bfs_breadth"] = min(out["ngram_max_bfs_breadth"], window)
    lo, hi = out["ngram_min_bfs_breadth"], out["ngram_max_bfs_breadth"]
    if lo > hi:
        raise SpecError("ngram_min_bfs_breadth (%d) must be <= ngram_max_bfs_breadth (%d)" % (lo, hi))
    if hi > window:
        # SGLang derives num_steps = num_draft_tokens // max_bfs_breadth, which would be 0.
        raise SpecError("ngram_max_bfs_breadth (%d) must be <= num_speculative_tokens + 1 (%d)" % (hi, window))


def _tree(out):
    tree = [k for k in _TREE if k in out]
    if tree and "schedule" in out:
        raise SpecError("a schedule sets the steps per batch band itself (a chain, topk 1); leave out "
                        "eagle_steps/eagle_topk/num_draft_tokens")
    if tree and "num_speculative_tokens" in out:
        raise SpecError("give either num_speculative_tokens (a chain: steps=k, topk=1) or the SGLang tree "
                        "eagle_steps/eagle_topk/num_draft_tokens, not both")
    if tree and len(tree) != len(_TREE):
        missing = [k for k in _TREE if k not in out]
        raise SpecError("SGLang needs eagle_steps, eagle_topk and num_draft_tokens all set or all unset; "
                        "missing: %s" % ", ".join(missing))
    return bool(tree)


def _eagle(out, tp, given=()):
    if not _tree(out):
        return
    steps, topk, ndt = out["eagle_steps"], out["eagle_topk"], out["num_draft_tokens"]
    if topk == 1 and ndt != steps + 1:
        raise SpecError("with eagle_topk=1 SGLang forces num_draft_tokens = eagle_steps + 1 (%d), got %d"
                        % (steps + 1, ndt))
    most = topk + (steps - 1) * topk * topk + 1  # candidates the tree offers, plus the root
    if ndt > most:
        raise SpecError("num_draft_tokens (%d) exceeds what eagle_steps=%d, eagle_topk=%d can draft "
                        "(topk + (steps-1)*topk^2 + 1 = %d)" % (ndt, steps, topk, most))


def _frozen_kv_mtp(out, tp, given=()):
    # SGLang picks no steps for an explicit FROZEN_KV_MTP (only NEXTN/EAGLE get automatic values, and
    # `mtp` with a Gemma-4 assistant draft is promoted to FROZEN_KV_MTP with them: 3 steps, topk 1).
    # Ours is that same chain, so `method: frozen_kv_mtp` with a draft is a complete request.
    if "num_speculative_tokens" not in out and not any(k in out for k in _TREE):
        out["num_speculative_tokens"] = _FROZEN_KV_MTP_K
    _eagle(out, tp, given)


def _uno(out, tp, given=()):
    # speculative_hook._handle_uno: TP=PP=1; linear width Q, or a tree (topk > 1) within UNO's limits.
    if tp != 1:
        raise SpecError("uno on sglang requires tensor_parallel_size 1 (SGLang: 'UNO requires TP=PP=1'), got %d" % tp)
    tree = _tree(out)
    if not tree and "num_speculative_tokens" not in out:
        raise SpecError("uno on sglang requires num_speculative_tokens (linear: verify width k+1) or the tree "
                        "eagle_steps/eagle_topk/num_draft_tokens")
    if not tree:
        return
    steps, topk, q = out["eagle_steps"], out["eagle_topk"], out["num_draft_tokens"]
    if topk == 1:
        raise SpecError("UNO with eagle_topk=1 is linear and ignores eagle_steps: give num_speculative_tokens")
    if q < steps + 1:
        raise SpecError("UNO tree mode requires num_draft_tokens >= eagle_steps + 1 (%d), got %d" % (steps + 1, q))
    if q > 128:
        raise SpecError("UNO tree mode supports at most 128 verify nodes (num_draft_tokens), got %d" % q)
    if q * topk > 2048:
        raise SpecError("UNO tree mode supports num_draft_tokens * eagle_topk <= 2048, got %d" % (q * topk))
    capacity, level = 1, 1
    for _level in range(steps):
        level *= topk
        capacity += level
        if capacity >= q:
            break
    if q > capacity:
        raise SpecError("UNO tree mode cannot build num_draft_tokens=%d from eagle_steps=%d, eagle_topk=%d "
                        "(capacity %d)" % (q, steps, topk, capacity))
    parent = topk * max(steps - 1, 0) + 1
    if q - 1 > parent:
        raise SpecError("UNO tree mode needs num_draft_tokens - 1 <= eagle_topk*(eagle_steps-1)+1 (%d), got %d"
                        % (parent, q - 1))


# Per method: the checks beyond the parameter table (SGLang's own rules), filling what it derives.
CHECKS = {
    "ngram": _ngram,
    "eagle": _eagle,
    "eagle3": _eagle,
    "mtp": _eagle,
    "draft_model": _eagle,
    "frozen_kv_mtp": _frozen_kv_mtp,
    "uno": _uno,
}

# SGLang pads a batch up to its next CUDA-graph capture size before it picks the band
# (AdaptiveSpeculativeParams._route); with speculation the sizes are these (cuda_graph_hook.py,
# generate_decode_cuda_graph_batch_sizes; --cuda-graph-max-bs adds itself and cuts the list).
CUDA_GRAPH_SIZES = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                    + list(range(272, _specdef.BATCH_MAX + 17, 16)))
# The tuner snaps band ends down to the sizes up to 256 (its levels stay below).
TUNE_BATCH_ENDS = tuple(size for size in CUDA_GRAPH_SIZES if size <= 256)

# A schedule needs a file beside the unit: --speculative-adaptive-config PATH.
SCHEDULE_FILES = True


def _span(lo, hi):
    return "batch %d" % lo if lo == hi else "batches %d-%d" % (lo, hi)


def schedule_warnings(schedule):
    """Bands SGLang reads differently: it pads a batch to its CUDA-graph size before it picks the band."""
    found = []
    for band in schedule[:-1]:
        lo, hi = band["batch"]
        below = max([c for c in CUDA_GRAPH_SIZES if c <= hi] or [0])
        if below != hi:
            found.append("schedule: SGLang pads a batch to its CUDA-graph size before it picks the band, so "
                         "%s of band %d-%d run%s the next band's k; end bands at 1-8, even numbers to "
                         "32, multiples of 4 from 40 to 64, of 8 to 256, of 16 above"
                         % (_span(max(below + 1, lo), hi), lo, hi, "s" if max(below + 1, lo) == hi else ""))
    return found


def _adaptive_text(schedule):
    # One fixed candidate per band: AdaptiveStepSlot never moves off a single candidate.
    cfg = dict((str(b["batch"][0]), {"candidate_steps": [b["k"]]}) for b in schedule)
    return json.dumps(cfg, separators=(",", ":")) + "\n"


def _schedule_path(text, schedule_dir):
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return "%s/sglang-adaptive-%s.json" % (schedule_dir.rstrip("/") or "", digest)


def schedule_file(schedule, schedule_dir):
    """``{"path", "text"}`` of the adaptive config for a canonical ``schedule`` under ``schedule_dir``."""
    text = _adaptive_text(schedule)
    return {"path": _schedule_path(text, schedule_dir), "text": text}


def render_spec(spec, schedule_dir=None):
    """The argv fragment for a normalized ``spec`` (not method none); ``schedule_dir`` checked by the caller."""
    method = spec["method"]
    args = ["--speculative-algorithm", METHODS[method]["name"]]
    k = spec.get("num_speculative_tokens")
    if k is not None:
        if method == "dspark":
            args += ["--speculative-dspark-block-size", str(k)]  # gamma: tokens proposed per step
        else:
            if method in ("eagle", "eagle3", "mtp", "draft_model", "frozen_kv_mtp"):
                args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
            args += ["--speculative-num-draft-tokens", str(k + 1)]
    for name, value in spec.items():
        if name in SPEC_FLAGS:
            args += [SPEC_FLAGS[name], str(value)]
    if "schedule" in spec:
        args += [ADAPTIVE_FLAGS[0], ADAPTIVE_FLAGS[1], schedule_file(spec["schedule"], schedule_dir)["path"]]
    return args
