# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about SGLang (0.5.23, ``python -m sglang.launch_server``): one adapter of ``_engine``.

Every name below is a fact ``_engine.FACTS`` asks each engine for; the facts were read from the pinned
engine and are judged by its own code in ``tests/contracts`` and ``tests/engines``. Standard library only.
"""
from __future__ import annotations

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
MEMORY_FLAG = "--mem-fraction-static"
MAX_LEN_FLAG = "--context-length"

OWNED_FLAGS = ("--speculative", "--host", "--port", "--model-path", "--model", "--tp-size", "--tp",
               "--tensor-parallel-size", "--served-model-name", "--mem-fraction-static", "--context-length",
               "--api-key")
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
HEALTH_PATH = "/health_generate"
READY_LISTS_MODEL = False

# Log lines worth reporting: SGLang prints a traceback's lines as they are (no prefix to skip).
LOG_PREFIX = r''

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

# Acceptance: avg_spec_accept_length of /get_server_info (a running average since the server started),
# and the last batch's gauge from /metrics when exported.
METRICS_MARKER = "sglang:"
ACCEPTANCE_SOURCE = "sglang_server_info"
ACCEPTANCE_METRICS = {
    "server_info": "/get_server_info",
    "accept_length": "sglang:spec_accept_length",
}

# SGLang pads a batch to its CUDA-graph capture size before it picks a schedule band (cuda_graph_hook.py,
# generate_decode_cuda_graph_batch_sizes): the tuner snaps band ends down to these.
TUNE_BATCH_ENDS = tuple(list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8)))
