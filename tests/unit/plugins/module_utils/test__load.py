# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_load reads the engines' own start-up lines: a real vLLM CPU build's log (tests/real, vLLM 0.32.0), and lines
made from the format strings of vLLM 0.33's and SGLang 0.5.23's GPU paths (the file and line named by each)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _load

# vllm serve of tests/real's target, CPU build 0.32.0, torch.compile on (2026-12-04, this machine)
VLLM_CPU = [
    "(APIServer pid=26174) INFO 12-04 05:28:06 [api_server.py:1] vLLM API server version 0.32.0",
    "(Worker pid=29773) INFO 12-04 05:28:37 [cpu_model_runner.py:68] Starting to load model /m/target...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 103.45it/s]",
    "(Worker pid=29773) INFO 12-04 05:28:37 [default_loader.py:501] Loading weights took 0.01 seconds",
    "(Worker pid=29773) INFO 12-04 05:28:38 [cpu_model_runner.py:87] Warming up model for the compilation...",
    "(EngineCore pid=29394) INFO 12-04 05:29:09 [core.py:402] init engine (profile, create kv cache, warmup model) "
    "took 31.30 s",
]
# vLLM 0.33 on GPUs, TP 2: gpu_model_runner.py:5150, compilation/monitor.py:20, gpu_model_runner.py:6582, core.py:402
VLLM_GPU = [
    "(Worker_TP0 pid=1) INFO 12-04 05:00:00 [gpu_model_runner.py:4100] Starting to load model /models/kimi...",
    "Loading safetensors checkpoint shards:  41% Completed | 26/64 [01:10<01:41,  2.70s/it]",
    "(Worker_TP0 pid=1) INFO 12-04 05:03:00 [gpu_model_runner.py:5150] Model loading took 61.2 GiB memory and "
    "171.204512 seconds",
    "(Worker_TP1 pid=2) INFO 12-04 05:03:01 [gpu_model_runner.py:5150] Model loading took 61.2 GiB memory and "
    "172.000000 seconds",
    "(Worker_TP0 pid=1) INFO 12-04 05:04:00 [monitor.py:40] torch.compile took 48.37 s in total",
    "(Worker_TP0 pid=1) INFO 12-04 05:05:00 [gpu_model_runner.py:6582] Graph capturing finished in 21 secs, took 1.20 GiB",
    "(EngineCore pid=3) INFO 12-04 05:05:02 [core.py:402] init engine (profile, create kv cache, warmup model) took 80.50 s",
]
# The same build in the unit as shipped, on the real tier's host (tests/real/test_real_load.py, 2026-12-04): the
# second start of the same unit finds its AOT graph in spec_server_cache_dir and cannot load it (0.32's CPU path).
_CACHE = "/var/cache/llmops-specdec/vllm/vllm/torch_compile_cache/torch_aot_compile/053a158d/rank_0_0/model"
VLLM_CPU_WARM = [
    (8.1, "(Worker pid=1189) INFO 12-04 08:47:04 [default_loader.py:501] Loading weights took 0.02 seconds"),
    (9.2, "(Worker pid=1189) INFO 12-04 08:47:05 [cpu_model_runner.py:87] Warming up model for the compilation..."),
    (19.4, "(Worker pid=1189) WARNING 12-04 08:47:15 [decorators.py:333] [backbone] Compiling model again due to a load "
           "failure from %s, reason: 'function' object has no attribute 'finalize_loading'" % _CACHE),
    (26.3, "(Worker pid=1189) INFO 12-04 08:47:22 [decorators.py:743] [backbone] saved AOT compiled function to %s" % _CACHE),
    (26.4, "(Worker pid=1189) INFO 12-04 08:47:22 [cpu_model_runner.py:91] Warming up done."),
    (28.1, "(EngineCore pid=1168) INFO 12-04 08:47:24 [core.py:402] init engine (profile, create kv cache, warmup model) "
           "took 19.00 s"),
    (30.2, "(APIServer pid=1143) INFO:     Application startup complete."),
]
VLLM_GPU_CACHED = [line for line in VLLM_GPU if "torch.compile" not in line] + [
    "(Worker_TP0 pid=1) INFO 12-04 05:04:00 [backends.py:296] Directly load the compiled graph(s) for compile range "
    "(1, 8192) from the cache, took 6.120 s"]
# SGLang 0.5.23: model_runner.py:1373, cuda_graph_setup.py:696/788 (target decode, then the draft's)
SGLANG = [
    "[2026-12-04 05:00:00 TP0] Load weight begin. avail mem=139.10 GB",
    "Loading safetensors checkpoint shards:  75% Completed | 3/4 [00:09<00:03,  3.1s/it]",
    "[2026-12-04 05:00:12 TP0] Load weight end. elapsed=12.34 s, type=Qwen3ForCausalLM, avail mem=120.1 GB, "
    "mem usage=18.9 GB.",
    "[2026-12-04 05:00:13 TP0] Memory pool end. avail mem=20.1 GB",
    "[2026-12-04 05:00:14 TP0] Capture target decode CUDA graph begin. backend=fa3, num_tokens_per_req=1, avail mem=20 GB",
    "[2026-12-04 05:00:30 TP0] Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=16.00 s, mem usage=0.9 GB, "
    "avail mem=19.1 GB.",
    "[2026-12-04 05:00:30 TP1] Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=15.50 s, mem usage=0.9 GB, "
    "avail mem=19.1 GB.",
    "[2026-12-04 05:00:35 TP0] Capture draft decode CUDA graph end. bs=[1, 2, 4], elapsed=4.50 s, mem usage=0.2 GB, "
    "avail mem=18.9 GB.",
    "[2026-12-04 05:00:40] The server is fired up and ready to roll!",
]


def test_a_real_vllm_cpu_start():
    assert _load.figures("vllm", VLLM_CPU) == {"weights": 0.01, "engine_init": 31.3}
    assert _load.breakdown("vllm", VLLM_CPU, 62.0) == {
        "weights": 0.01, "compile": None, "graph_capture": None, "kv_profile": 31.3, "total": 62.0, "other": 30.69,
        "compile_cache": None, "compile_cache_hit": False}
    assert _load.stage("vllm", VLLM_CPU) == "starting the API server"
    assert _load.stage("vllm", VLLM_CPU[:3]) == "loading weights 0 %"
    assert _load.stage("vllm", VLLM_CPU[:5]) == "compiling, profiling memory and capturing graphs"
    assert _load.stage("vllm", VLLM_CPU[:1]) == "starting"


def test_the_cpu_builds_compile_is_timed_between_its_warm_up_lines_and_a_cache_it_cannot_load_is_named():
    lines = [msg for _t, msg in VLLM_CPU_WARM]
    assert _load.spans("vllm", VLLM_CPU_WARM) == {"compile": 17.2}
    out = _load.breakdown("vllm", lines, 30.2, VLLM_CPU_WARM)
    assert (out["weights"], out["compile"], out["kv_profile"]) == (0.02, 17.2, 1.8)
    assert out["compile_cache"] == "load_failed" and not out["compile_cache_hit"]
    assert out["compile_cache_error"] == "'function' object has no attribute 'finalize_loading'"
    # The cold start compiles with no cache line at all: a miss; without the journal's times, no compile figure.
    cold = [(t, msg) for t, msg in VLLM_CPU_WARM if "decorators.py:333" not in msg]
    assert _load.breakdown("vllm", [m for _t, m in cold], 30.2, cold)["compile_cache"] == "miss"
    assert _load.breakdown("vllm", lines, 30.2)["compile"] is None
    # A warm-up that has not ended has no span.
    assert _load.spans("vllm", VLLM_CPU_WARM[:3]) == {}


def test_a_loaded_aot_graph_is_a_hit_and_a_rank_that_failed_to_load_is_not():
    hit = "(Worker pid=1) INFO 12-04 08:47:10 [decorators.py:319] [backbone] Directly load AOT compilation from path %s" % _CACHE
    assert _load.compile_cache("vllm", [hit]) == ("hit", None)
    assert _load.compile_cache("vllm", [hit, VLLM_CPU_WARM[2][1]])[0] == "load_failed"
    assert _load.compile_cache("sglang", [hit]) == (None, None)


def test_vllm_on_gpus_ranks_count_once_and_init_engine_holds_compile_and_capture():
    out = _load.breakdown("vllm", VLLM_GPU, 300.0)
    assert out["weights"] == 172.0  # the slower rank: the engine waits for both
    assert (out["compile"], out["graph_capture"], out["kv_profile"]) == (48.37, 21.0, 11.13)
    assert out["other"] == pytest.approx(300.0 - 172.0 - 80.5) and not out["compile_cache_hit"]
    assert _load.stage("vllm", VLLM_GPU[:2]) == "loading weights 41 %"
    assert out["compile_cache"] == "miss"
    cached = _load.breakdown("vllm", VLLM_GPU_CACHED, 250.0)
    assert cached["compile"] == 6.12 and cached["compile_cache_hit"] and cached["kv_profile"] == pytest.approx(53.38)
    assert cached["compile_cache"] == "hit"


def test_sglang_sums_its_graph_runners_and_counts_ranks_once():
    out = _load.breakdown("sglang", SGLANG, 45.0)
    assert (out["weights"], out["graph_capture"], out["compile"], out["kv_profile"]) == (12.34, 20.5, None, None)
    assert out["other"] == pytest.approx(45.0 - 12.34 - 20.5)
    assert _load.stage("sglang", SGLANG[:2]) == "loading weights 75 %"
    assert _load.stage("sglang", SGLANG[:4]) == "allocating the KV cache and capturing graphs"
    assert _load.stage("sglang", SGLANG) == "warming up"


@pytest.mark.parametrize("engine", _engine.NAMES)
def test_no_lines_no_figures_and_an_unknown_total(engine):
    assert _load.breakdown(engine, [], None) == dict({p: None for p in _load.PHASES}, total=None, other=None,
                                                     compile_cache=None, compile_cache_hit=False)
    assert _load.stage(engine, ["anything else"]) == "starting"
