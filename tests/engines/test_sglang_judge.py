# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang 0.5.23 judges _spec: `prepare_server_args` (the launch_server parser) reads what we render
into ServerArgs fields equal to the request, and SpeculativeAlgorithm knows the algorithm.

Reach on this machine: argparse-level only. SGLang's startup resolution (ServerArgs.resolve_once,
where the EAGLE steps/topk/draft-tokens rules live) loads its model-config registry, which imports
torchvision; PyPI's torchvision needs a CUDA torch, so it cannot run next to the CPU torch here.
Those rules are enforced by _spec and listed below as refused by us, taken by the parser.

Further in reach: the per-algorithm handlers that read no model config (_handle_uno, _handle_dflash)
run on the parsed ServerArgs with the device set to "cuda" (this machine's stand-in for a GPU host),
and the adaptive-speculation code (adaptive_unsupported_reason, _init_adaptive_speculative_params,
AdaptiveSpeculativeParams with the config file we render, the CUDA-graph batch sizes) runs as is.
"""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("sglang")

from sglang.srt.arg_groups import speculative_hook  # noqa: E402
from sglang.srt.arg_groups.cuda_graph_hook import generate_decode_cuda_graph_batch_sizes  # noqa: E402
from sglang.srt.arg_groups.overrides import resolving_view  # noqa: E402
from sglang.srt.server_args import ServerArgs, prepare_server_args  # noqa: E402
from sglang.srt.speculative import adaptive_spec_params  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_sglang, _gate, _server, _spec  # noqa: E402

EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
EAGLE3 = "/srv/models/EAGLE3 head"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"

# What SpeculativeAlgorithm.from_string makes of each rendered name (NEXTN is EAGLE's alias).
ALGORITHM = {"ngram": "NGRAM", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "EAGLE", "draft_model": "STANDALONE",
             "dflash": "DFLASH", "dspark": "DSPARK", "uno": "UNO", "frozen_kv_mtp": "FROZEN_KV_MTP"}
DFLASH = "z-lab/Qwen3-8B-DFlash-b16"

ACCEPTED = {
    "ngram defaults": {"method": "ngram"},
    "ngram tuned": {"method": "ngram", "num_speculative_tokens": 7, "ngram_min_bfs_breadth": 2,
                    "ngram_max_bfs_breadth": 4, "ngram_match_type": "PROB", "ngram_max_trie_depth": 12},
    "ngram chain": {"method": "ngram", "num_speculative_tokens": 1, "ngram_max_bfs_breadth": 1},
    "ngram small k (default breadth capped at k+1)": {"method": "ngram", "num_speculative_tokens": 2},
    "eagle auto": {"method": "eagle", "draft_model": EAGLE},
    "eagle chain": {"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3},
    "eagle tree": {"method": "eagle", "draft_model": EAGLE, "eagle_steps": 5, "eagle_topk": 4, "num_draft_tokens": 8},
    "eagle3 tree fp8": {"method": "eagle3", "draft_model": EAGLE3, "eagle_steps": 3, "eagle_topk": 1,
                        "num_draft_tokens": 4, "draft_quantization": "fp8"},
    "eagle3 chain": {"method": "eagle3", "draft_model": EAGLE3, "num_speculative_tokens": 5},
    "mtp bare": {"method": "mtp"},
    "mtp chain": {"method": "mtp", "num_speculative_tokens": 2},
    "mtp tree with weights": {"method": "mtp", "draft_model": "/m/nextn", "eagle_steps": 2, "eagle_topk": 2,
                              "num_draft_tokens": 7},
    "standalone auto": {"method": "draft_model", "draft_model": DRAFT},
    "standalone chain": {"method": "draft_model", "draft_model": DRAFT, "num_speculative_tokens": 4},
    "dflash auto block": {"method": "dflash", "draft_model": DFLASH},
    "dflash k=15 (block 16) fp8": {"method": "dflash", "draft_model": DFLASH, "num_speculative_tokens": 15,
                                   "draft_quantization": "fp8"},
    "dspark bundled": {"method": "dspark"},
    "dspark gamma 7": {"method": "dspark", "draft_model": "/m/dspark", "num_speculative_tokens": 7},
    "uno linear": {"method": "uno", "uno_lora_path": "/m/uno-lora", "num_speculative_tokens": 4},
    "uno tree": {"method": "uno", "uno_lora_path": "/m/uno-lora", "eagle_steps": 3, "eagle_topk": 2, "num_draft_tokens": 6},
    "frozen_kv_mtp chain": {"method": "frozen_kv_mtp", "draft_model": "google/gemma-4-assistant", "num_speculative_tokens": 3},
    "frozen_kv_mtp our default chain": {"method": "frozen_kv_mtp", "draft_model": "google/gemma-4-assistant"},
    "frozen_kv_mtp tree": {"method": "frozen_kv_mtp", "draft_model": "google/gemma-4-assistant", "eagle_steps": 3,
                           "eagle_topk": 2, "num_draft_tokens": 6},
    # Batch-size schedules: --speculative-adaptive with one fixed candidate per band.
    "eagle schedule": {"method": "eagle", "draft_model": EAGLE, "schedule": "1-8:4,9-32:2,33+:0"},
    "eagle3 schedule": {"method": "eagle3", "draft_model": EAGLE3, "schedule": [
        {"batch": [1, 4], "k": 5}, {"batch": [5, 64], "k": 3}, {"batch": [65, None], "k": 1}]},
    "mtp schedule": {"method": "mtp", "schedule": "1-16:3,17-48:1,49+:0"},
    "eagle3 schedule off the capture sizes": {"method": "eagle3", "draft_model": EAGLE3, "schedule": "1-9:4,10-36:2,37+:1"},
}

# Refused by _spec and by SGLang's parser or algorithm registry: (spec, raw argv an operator
# could write by hand).
REJECTED_BY_BOTH = {
    "suffix is vLLM-only": ({"method": "suffix"}, ["--speculative-algorithm", "SUFFIX"]),
    "unknown method": ({"method": "medusa"}, ["--speculative-algorithm", "MEDUSA"]),
    "bad match type": ({"method": "ngram", "ngram_match_type": "DFS"}, ["--speculative-ngram-match-type", "DFS"]),
    "steps not a number": ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": "five", "eagle_topk": 1,
                            "num_draft_tokens": 6}, ["--speculative-num-steps", "five"]),
    # SGLang 0.5.23 has no n-gram match-window flags, hence prompt_lookup_* are vLLM-only.
    "prompt lookup on sglang": ({"method": "ngram", "prompt_lookup_min": 2},
                                ["--speculative-ngram-min-match-window-size", "2"]),
    "draft tp on sglang": ({"method": "eagle", "draft_model": EAGLE, "draft_tensor_parallel_size": 1},
                           ["--speculative-draft-tensor-parallel-size", "1"]),
    "ngram_gpu is vLLM-only": ({"method": "ngram_gpu"}, ["--speculative-algorithm", "NGRAM_GPU"]),
}

# Refused by _spec and by the per-algorithm handler SGLang runs at startup (the device set to "cuda";
# --attention-backend fa3 for UNO, which requires it): (spec, tp, handler, SGLang's message).
HANDLER_REJECTED_BY_BOTH = {
    "uno without lora": ({"method": "uno", "num_speculative_tokens": 4}, 1, "_handle_uno", "requires --uno-lora-path"),
    "uno without width": ({"method": "uno", "uno_lora_path": "/l"}, 1, "_handle_uno", "--speculative-num-draft-tokens"),
    "uno tp 2": ({"method": "uno", "uno_lora_path": "/l", "num_speculative_tokens": 4}, 2, "_handle_uno",
                 "UNO requires TP=PP=1"),
    "uno tree Q < F": ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 4, "eagle_topk": 2, "num_draft_tokens": 4},
                       1, "_handle_uno", "requires Q >= F"),
    "uno tree Q > 128": ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 64, "eagle_topk": 4,
                          "num_draft_tokens": 200}, 1, "_handle_uno", "at most Q=128"),
    "uno tree Q*K > 2048": ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 20, "eagle_topk": 32,
                             "num_draft_tokens": 100}, 1, "_handle_uno", "Q*K <= 2048"),
    "uno tree parent width": ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 2, "eagle_topk": 2,
                               "num_draft_tokens": 6}, 1, "_handle_uno", "parent-list ABI"),
    "uno with a draft model": ({"method": "uno", "uno_lora_path": "/l", "num_speculative_tokens": 4, "draft_model": DRAFT},
                               1, "_handle_uno", "does not accept --speculative-draft-model-path"),
    "dflash without draft": ({"method": "dflash", "num_speculative_tokens": 15}, 1, "_handle_dflash",
                             "requires setting --speculative-draft-model-path"),
}

# Schedules SGLang does not run as asked: it switches --speculative-adaptive off (warning, fixed k).
# (spec refused by us, raw argv, what adaptive_unsupported_reason says).
SCHEDULE_SWITCHED_OFF_BY_SGLANG = {
    "ngram": ({"method": "ngram", "schedule": "1+:3"}, ["--speculative-algorithm", "NGRAM"], "only EAGLE/EAGLE3"),
    "standalone": ({"method": "draft_model", "draft_model": DRAFT, "schedule": "1+:3"},
                   ["--speculative-algorithm", "STANDALONE"], "only EAGLE/EAGLE3"),
    "dflash": ({"method": "dflash", "draft_model": DFLASH, "schedule": "1+:3"}, ["--speculative-algorithm", "DFLASH"],
               "only EAGLE/EAGLE3"),
    "dspark": ({"method": "dspark", "schedule": "1+:3"}, ["--speculative-algorithm", "DSPARK"], "only EAGLE/EAGLE3"),
    "uno": ({"method": "uno", "uno_lora_path": "/l", "schedule": "1+:3"}, ["--speculative-algorithm", "UNO"],
            "only EAGLE/EAGLE3"),
    "frozen_kv_mtp": ({"method": "frozen_kv_mtp", "draft_model": "g", "schedule": "1+:3"},
                      ["--speculative-algorithm", "FROZEN_KV_MTP"], "only EAGLE/EAGLE3"),
    "eagle tree topk 2": ({"method": "eagle", "draft_model": EAGLE, "schedule": "1+:3", "eagle_steps": 3,
                           "eagle_topk": 2, "num_draft_tokens": 6},
                          ["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2"], "only topk=1"),
}
# Extra arguments with which SGLang switches adaptive off: _server refuses them next to a schedule.
SCHEDULE_OFF_FLAGS = {"--enable-two-batch-overlap": "two_batch_overlap", "--enable-pdmux": "pdmux",
                      "--enable-multi-layer-eagle": "multi_layer_eagle"}

# Refused by _spec on purpose although SGLang's parser takes them: SGLang silently rewrites them,
# fails later at startup (beyond this machine), or runs something other than what was asked.
ACCEPTED_BY_PARSER_ONLY = {
    "tree half set (startup assert)": {"method": "eagle", "draft_model": EAGLE, "eagle_steps": 3},
    "k and tree together": {"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3,
                            "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
    "topk 1, draft tokens != steps+1 (silently rewritten)": {
        "method": "eagle3", "draft_model": EAGLE3, "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 8},
    "tree larger than the candidates (torch.topk fails at run time)": {
        "method": "eagle", "draft_model": EAGLE, "eagle_steps": 2, "eagle_topk": 2, "num_draft_tokens": 8},
    "eagle without draft (fails at startup)": {"method": "eagle"},
    "standalone without draft (fails at startup)": {"method": "draft_model"},
    "bfs min > max": {"method": "ngram", "ngram_min_bfs_breadth": 4, "ngram_max_bfs_breadth": 2},
    "bfs wider than the window (num_steps would be 0)": {"method": "ngram", "num_speculative_tokens": 3,
                                                         "ngram_max_bfs_breadth": 10},
    "k above our cap": {"method": "ngram", "num_speculative_tokens": 500, "ngram_max_bfs_breadth": 2},
}


def parse(argv):
    return prepare_server_args(["--model-path", "dummy"] + argv)


def raw_sglang_args(spec):
    """The request as SGLang flags without our checks (what an operator could write by hand)."""
    name = _spec.METHODS.get(spec["method"], {}).get("sglang", {}).get("name")
    argv = ["--speculative-algorithm", name or spec["method"].upper()]
    k = spec.get("num_speculative_tokens")
    if k is not None:
        if spec["method"] != "ngram":
            argv += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
        argv += ["--speculative-num-draft-tokens", str(k + 1)]
    for key, value in spec.items():
        if key in _engine_sglang.SPEC_FLAGS:
            argv += [_engine_sglang.SPEC_FLAGS[key], str(value)]
    return argv


@pytest.mark.parametrize("spec", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_sglang_parses_what_was_asked(spec):
    want = _spec.normalize(spec, "sglang")
    sa = parse(_spec.engine_args(spec, "sglang"))
    assert isinstance(sa, ServerArgs)
    assert sa.speculative_algorithm == _spec.METHODS[want["method"]]["sglang"]["name"]
    assert SpeculativeAlgorithm.from_string(sa.speculative_algorithm) is SpeculativeAlgorithm[ALGORITHM[want["method"]]]
    assert sa.speculative_draft_model_path == want.get("draft_model")
    assert sa.speculative_draft_model_quantization == want.get("draft_quantization")
    k = want.get("num_speculative_tokens")
    assert sa.speculative_adaptive is ("schedule" in want)
    if "schedule" in want:
        assert sa.speculative_adaptive_config == _spec.schedule_file(spec, "sglang")["path"]
    if want["method"] == "dflash":  # the verify window (block size) is k+1; steps/topk are SGLang's (forced to 1)
        assert sa.speculative_num_draft_tokens == (k + 1 if k else None)
        assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_dspark_block_size) == (None, None, None)
    elif want["method"] == "dspark":  # gamma is k; the window gamma+1 is SGLang's to derive
        assert sa.speculative_dspark_block_size == k
        assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_num_draft_tokens) == (None, None, None)
    elif want["method"] == "uno" and k is not None:  # linear: the width k+1
        assert sa.uno_lora_path == want["uno_lora_path"]
        assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_num_draft_tokens) == (None, None, k + 1)
    elif want["method"] == "ngram":
        assert sa.speculative_num_draft_tokens == k + 1
        assert sa.speculative_num_steps is None  # SGLang derives it from the window and the breadth
        assert sa.speculative_ngram_min_bfs_breadth == want["ngram_min_bfs_breadth"]
        assert sa.speculative_ngram_max_bfs_breadth == want["ngram_max_bfs_breadth"]
        assert sa.speculative_ngram_match_type == want["ngram_match_type"]
        assert sa.speculative_ngram_max_trie_depth == want["ngram_max_trie_depth"]
    elif k is not None:  # the chain shorthand
        assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_num_draft_tokens) == (k, 1, k + 1)
    else:  # the explicit tree, or all three unset for SGLang's per-model choice
        assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_num_draft_tokens) == (
            want.get("eagle_steps"), want.get("eagle_topk"), want.get("num_draft_tokens"))


@pytest.mark.parametrize("spec, argv", list(REJECTED_BY_BOTH.values()), ids=list(REJECTED_BY_BOTH))
def test_refused_by_both(spec, argv):
    with pytest.raises(_spec.SpecError):
        _spec.normalize(spec, "sglang")
    with pytest.raises((SystemExit, ValueError)):
        sa = parse(argv)
        SpeculativeAlgorithm.from_string(sa.speculative_algorithm)


@pytest.mark.parametrize("spec", list(ACCEPTED_BY_PARSER_ONLY.values()), ids=list(ACCEPTED_BY_PARSER_ONLY))
def test_refused_by_us_on_purpose(spec):
    with pytest.raises(_spec.SpecError):
        _spec.normalize(spec, "sglang")
    sa = parse(raw_sglang_args(spec))
    SpeculativeAlgorithm.from_string(sa.speculative_algorithm)


def test_our_ngram_defaults_are_sglangs():
    sa = parse(["--speculative-algorithm", "NGRAM"])
    table = _spec.METHODS["ngram"]["sglang"]["params"]
    for name in ("ngram_min_bfs_breadth", "ngram_max_bfs_breadth", "ngram_match_type", "ngram_max_trie_depth"):
        assert getattr(sa, "speculative_" + name) == table[name], name


def test_every_sglang_method_is_judged():
    assert {s["method"] for s in ACCEPTED.values()} == set(_spec.methods_for("sglang")) - {"none"}
    scheduled = {s["method"] for s in ACCEPTED.values() if "schedule" in s}
    assert scheduled == {m for m in _spec.methods_for("sglang") if "schedule" in _spec.METHODS[m]["sglang"]["params"]}


def test_every_builtin_algorithm_is_in_the_table():
    ours = {t["sglang"]["name"] for t in _spec.METHODS.values() if "sglang" in t and t["sglang"]["name"]}
    builtin = {a.name for a in SpeculativeAlgorithm if a is not SpeculativeAlgorithm.NONE}
    assert ours == builtin | {"NEXTN"} and SpeculativeAlgorithm.from_string("NEXTN") is SpeculativeAlgorithm.EAGLE


def handled(spec, tp, handler):
    """The rendered argv through the parser and SGLang's own startup handler for the algorithm."""
    argv = ["--tp-size", str(tp), "--attention-backend", "fa3"] + raw_sglang_args(spec)
    sa = parse(argv)
    sa.device = "cuda"  # the handlers refuse a CPU first; everything after is their own rule
    getattr(speculative_hook, handler)(sa)
    return resolving_view(sa)


# DFLASH without k reads the draft's config for its block size (an import of torchvision, beyond reach).
@pytest.mark.parametrize("name, handler", [("uno linear", "_handle_uno"), ("uno tree", "_handle_uno"),
                                           ("dflash k=15 (block 16) fp8", "_handle_dflash")])
def test_startup_handler_takes_what_we_render(name, handler):
    spec = ACCEPTED[name]
    want = _spec.normalize(spec, "sglang")
    sa = parse(_spec.engine_args(spec, "sglang") + ["--attention-backend", "fa3"])
    sa.device = "cuda"
    getattr(speculative_hook, handler)(sa)
    view = resolving_view(sa)
    if want["method"] == "uno" and "eagle_topk" in want:
        assert (view.speculative_num_steps, view.speculative_eagle_topk, view.speculative_num_draft_tokens) == (3, 2, 6)
    else:  # linear UNO, DFLASH: steps/topk 1, the window k+1
        assert (view.speculative_num_steps, view.speculative_eagle_topk, view.speculative_num_draft_tokens) == (
            1, 1, want["num_speculative_tokens"] + 1)


@pytest.mark.parametrize("spec, tp, handler, message", list(HANDLER_REJECTED_BY_BOTH.values()),
                         ids=list(HANDLER_REJECTED_BY_BOTH))
def test_refused_by_both_at_startup(spec, tp, handler, message):
    with pytest.raises(_spec.SpecError):
        _spec.normalize(spec, "sglang", tp)
    with pytest.raises(ValueError, match=message):
        handled(spec, tp, handler)


def k_at(schedule, batch):
    return [b["k"] for b in schedule if b["batch"][0] <= batch and (b["batch"][1] is None or batch <= b["batch"][1])][0]


def _adaptive(spec, tmp_path):
    """Render with the schedule under tmp_path, install the file, run SGLang's adaptive startup steps."""
    f = _spec.schedule_file(spec, "sglang", schedule_dir=str(tmp_path))
    with open(f["path"], "w") as out:
        out.write(f["text"])
    sa = parse(_spec.engine_args(spec, "sglang", 1, str(tmp_path)))
    assert sa.speculative_adaptive_config == f["path"]
    # handle_speculative_decoding: the alias first (NEXTN -> EAGLE), then the adaptive checks.
    sa.speculative_algorithm = speculative_hook._resolve_speculative_algorithm_alias(sa.speculative_algorithm, None)
    assert adaptive_spec_params.adaptive_unsupported_reason(sa) is None
    speculative_hook._init_adaptive_speculative_params(sa)
    return sa, f


SCHEDULED = {name: spec for name, spec in ACCEPTED.items() if "schedule" in spec}


@pytest.mark.parametrize("spec", list(SCHEDULED.values()), ids=list(SCHEDULED))
def test_schedule_runs_as_asked(spec, tmp_path):
    """SGLang's own loader and router give every batch size the k we mean; with CUDA graphs, the
    batches our warnings name (and only those) run another band's k."""
    want = _spec.normalize(spec, "sglang")
    sa, f = _adaptive(spec, tmp_path)
    view = resolving_view(sa)
    k = want["num_speculative_tokens"]
    assert (view.speculative_num_steps, view.speculative_eagle_topk, view.speculative_num_draft_tokens) == (k, 1, k + 1)
    assert adaptive_spec_params.resolve_candidate_steps_from_config(f["path"]) == sorted({b["k"] for b in want["schedule"]})
    params = adaptive_spec_params.AdaptiveSpeculativeParams(initial_steps=k, cfg_path=f["path"])
    assert [params.get_steps_for_batch(b) for b in range(1, 513)] == [k_at(want["schedule"], b) for b in range(1, 513)]
    # Steps stay put: a single candidate per band never moves, whatever the acceptance.
    for _round in range(50):
        params.on_verify_complete([k] * 4, batch_size=1)
        params.on_verify_complete([0] * 4, batch_size=1)
    assert params.get_steps_for_batch(1) == k_at(want["schedule"], 1)
    params.set_cuda_graph_bs(generate_decode_cuda_graph_batch_sizes(sa, 512))
    moved = {b for b in range(1, 513) if params.get_steps_for_batch(b) != k_at(want["schedule"], b)}
    warned = set()
    for line in _spec.spec_warnings(spec, "sglang"):
        if "pads a batch" in line:
            span = line.split(", so ")[1].split(" of band")[0].split(" ")[1]
            lo, _dash, hi = span.partition("-")
            warned |= set(range(int(lo), int(hi or lo) + 1))
    assert moved == warned


def test_sglang_refuses_the_schedules_we_refuse(tmp_path):
    with pytest.raises(_spec.SpecError):
        _spec.normalize({"method": "eagle", "draft_model": EAGLE, "schedule": "1-8:-1,9+:1"}, "sglang")
    path = tmp_path / "bad.json"
    for cfg, message in (({"1": {"candidate_steps": [-1]}}, "non-negative ints"), ({"1": {"candidate_steps": []}},
                         "non-negative ints"), ({"x": {}}, "at least one integer-string")):
        path.write_text(json.dumps(cfg))
        with pytest.raises(ValueError, match=message):
            adaptive_spec_params.resolve_candidate_steps_from_config(str(path))


@pytest.mark.parametrize("spec, argv, reason", list(SCHEDULE_SWITCHED_OFF_BY_SGLANG.values()),
                         ids=list(SCHEDULE_SWITCHED_OFF_BY_SGLANG))
def test_schedule_switched_off_by_sglang_is_refused_by_us(spec, argv, reason):
    with pytest.raises(_spec.SpecError, match="schedule"):
        _spec.normalize(spec, "sglang")
    sa = parse(argv + ["--speculative-adaptive"])
    sa.speculative_algorithm = speculative_hook._resolve_speculative_algorithm_alias(sa.speculative_algorithm, None)
    assert reason in adaptive_spec_params.adaptive_unsupported_reason(sa)


@pytest.mark.parametrize("flag", sorted(SCHEDULE_OFF_FLAGS))
def test_extra_args_that_switch_adaptive_off_are_refused_next_to_a_schedule(flag):
    spec = {"method": "eagle", "draft_model": EAGLE, "schedule": "1-8:4,9+:1"}
    sa = parse(_spec.engine_args(spec, "sglang") + [flag])
    sa.speculative_algorithm = speculative_hook._resolve_speculative_algorithm_alias(sa.speculative_algorithm, None)
    assert SCHEDULE_OFF_FLAGS[flag] in adaptive_spec_params.adaptive_unsupported_reason(sa)
    settings = {"engine": "sglang", "unit": "sglang-server.service", "executable": "/usr/bin/python3", "model": "/m",
                "host": "127.0.0.1", "port": 30000, "spec": spec, "user": "sglang", "group": "sglang",
                "working_dir": "/var/lib/sglang", "env_file": "/etc/x.env", "start_timeout": 1, "stop_timeout": 1,
                "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1}
    with pytest.raises(_gate.GateError, match="turns the spec's schedule off"):
        _server.unit_settings(dict(settings, extra_args=[flag]))
    assert os.path.basename(_server.unit_settings(settings)["schedule_path"]).startswith("sglang-adaptive-")


def test_none_leaves_speculation_off():
    sa = parse(_spec.engine_args({"method": "none"}, "sglang"))
    assert sa.speculative_algorithm is None
    assert SpeculativeAlgorithm.from_string(sa.speculative_algorithm) is SpeculativeAlgorithm.NONE


def test_quantization_names_are_sglangs_to_check():
    # The gate refuses a name outside SGLang's list (_spec.QUANTIZATIONS, issue 31), and SGLang's parser
    # refuses the same name itself: the fragment with a known name, its value swapped, is refused too.
    with pytest.raises(_spec.SpecError, match="draft_quantization must be one of sglang's"):
        _spec.engine_args({"method": "draft_model", "draft_model": DRAFT, "draft_quantization": "bogus"}, "sglang")
    fragment = _spec.engine_args({"method": "draft_model", "draft_model": DRAFT, "draft_quantization": "fp8"},
                                 "sglang")
    parse(fragment)
    with pytest.raises(SystemExit):
        parse(["bogus" if arg == "fp8" else arg for arg in fragment])


@pytest.mark.parametrize("fmt", ["safetensors", "runai_streamer", "fastsafetensors"])
def test_the_load_format_is_sglangs(fmt):
    # issue 34: spec_server_load_format rendered by the unit's gate, read by SGLang's own parser
    settings = {"engine": "sglang", "unit": "sglang-server.service", "executable": "/usr/bin/python3",
                "model": "/m", "host": "127.0.0.1", "port": 30000, "spec": {"method": "none"}, "user": "sglang",
                "group": "sglang", "working_dir": "/var/lib/sglang", "env_file": "/etc/x.env", "start_timeout": 1,
                "stop_timeout": 1, "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1,
                "load_format": fmt}
    argv = _server.unit_settings(settings)["argv"]
    sa = prepare_server_args(argv[argv.index("--model-path"):])
    assert sa.load_format == fmt


def test_a_serving_group_renders_what_sglang_reads_on_every_node():
    # issue 33: one spec, every node's argv from it; SGLang's own parser reads each node's rank and rendezvous
    base = {"engine": "sglang", "unit": "sglang-server.service", "executable": "/usr/bin/python3",
            "model": "/m", "host": "127.0.0.1", "port": 30000, "user": "sglang", "group": "sglang",
            "working_dir": "/var/lib/sglang", "env_file": "/etc/x.env", "start_timeout": 1, "stop_timeout": 1,
            "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1, "tensor_parallel_size": 16,
            "spec": {"method": "ngram", "num_speculative_tokens": 3}, "nodes": ["gpu-a01", "gpu-a02"],
            "rendezvous_address": "10.0.0.1", "rendezvous_port": 29500}
    parsed = []
    for rank, name in enumerate(base["nodes"]):
        argv = _server.unit_settings(dict(base, node=name))["argv"]
        sa = prepare_server_args(argv[argv.index("--model-path"):])
        assert (sa.nnodes, sa.node_rank, sa.dist_init_addr, sa.tp_size) == (2, rank, "10.0.0.1:29500", 16)
        parsed.append(sa)
    assert parsed[0].speculative_algorithm == parsed[1].speculative_algorithm == "NGRAM"
    assert parsed[0].speculative_num_draft_tokens == parsed[1].speculative_num_draft_tokens
