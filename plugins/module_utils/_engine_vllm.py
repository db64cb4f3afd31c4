# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about vLLM (0.33, ``vllm serve``): one adapter of the registry in ``_engine``.

Every name below is a fact ``_engine.FACTS`` asks each engine for; the facts were read from the pinned
engine and are judged by its own code in ``tests/contracts`` and ``tests/engines``. Standard library only.
"""
from __future__ import annotations

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
MEMORY_FLAG = "--gpu-memory-utilization"
MAX_LEN_FLAG = "--max-model-len"

# Flags the collection sets itself; the same flag in extra_args would override or duplicate it.
OWNED_FLAGS = ("--speculative", "-sc", "--host", "--port", "--model", "--tensor-parallel-size", "-tp",
               "--served-model-name", "--gpu-memory-utilization", "--device-memory-utilization", "--max-model-len",
               "--api-key")
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
HEALTH_PATH = "/health"
READY_LISTS_MODEL = True

# Log lines worth reporting (_ready.engine_log_tail): an exception line may stand behind vLLM's process
# prefix ("(EngineCore_DP0 pid=42) ") and its logger's ("ERROR 12-04 01:50:28 [multiproc_executor.py:953] "):
# a real vLLM 0.32 logs a failed worker's traceback line by line through its logger (tests/real).
LOG_PREFIX = r'(?:\([^)]*\)\s+)?(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s+)?'

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

# Acceptance: the spec_decode counters of /metrics, differenced around a level (_prom.vllm_acceptance).
METRICS_MARKER = "vllm:"  # a /metrics text with this in it is vLLM's (_bench_accept.detect_metrics)
ACCEPTANCE_SOURCE = "vllm_counters"
ACCEPTANCE_METRICS = {
    "prefix": "vllm:spec_decode_",
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
}

# Tune: band ends the engine honours as they are (None: every batch size; SGLang pads to graph sizes).
TUNE_BATCH_ENDS = None
