# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The speculative-decoding model: every method x engine rendering and every refusal.

The real vLLM / SGLang parsers judge the same renderings in tests/engines; here the exact argv is
pinned so a change of rendering is a visible, reviewed change.
"""
from __future__ import annotations

import hashlib
import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils._spec import (
    ALIASES, ENGINES, METHODS, PARAMS, REQUIRED, SCHEDULE_DIR, SpecError, describe, engine_args,
    engines_for, methods_for, normalize, schedule_file, schedule_text, spec_warnings)
from ansible_collections.llmops.specdec.plugins.module_utils._engine_sglang import SPEC_FLAGS as SGLANG_FLAGS
from ansible_collections.llmops.specdec.plugins.module_utils._engine_vllm import SPEC_KEYS as VLLM_KEYS

EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
EAGLE3 = "/srv/models/EAGLE3 head"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"
DFLASH = "z-lab/Qwen3-8B-DFlash-b16"
SCHED = [{"batch": [1, 8], "k": 4}, {"batch": [9, 32], "k": 2}, {"batch": [33, None], "k": 0}]


def vllm_cfg(args):
    """The --speculative-config JSON of a vLLM argv fragment, decoded."""
    assert args[0] == "--speculative-config" and len(args) == 2
    return json.loads(args[1])


# (spec, tp, expected vLLM config) for every vLLM method, defaults included.
VLLM_CASES = {
    "ngram full": ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}, 1,
                   {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    "ngram defaults 5..5": ({"method": "ngram", "num_speculative_tokens": 3}, 1,
                            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 5}),
    "ngram max only": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 7}, 1,
                       {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 7, "prompt_lookup_max": 7}),
    "ngram min only": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2}, 1,
                       {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 2}),
    "eagle": ({"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3}, 1,
              {"method": "eagle", "model": EAGLE, "num_speculative_tokens": 3}),
    "eagle3 tp2 draft tp1": ({"method": "eagle3", "draft_model": EAGLE3, "num_speculative_tokens": 4,
                              "draft_tensor_parallel_size": 1}, 2,
                             {"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 4,
                              "draft_tensor_parallel_size": 1}),
    "mtp without draft": ({"method": "mtp", "num_speculative_tokens": 1}, 8,
                          {"method": "mtp", "num_speculative_tokens": 1}),
    "mtp draft tp = tp": ({"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 8}, 8,
                          {"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 8}),
    "draft_model quantized": ({"method": "draft_model", "draft_model": DRAFT, "num_speculative_tokens": 4,
                               "draft_quantization": "fp8"}, 1,
                              {"method": "draft_model", "model": DRAFT, "num_speculative_tokens": 4, "quantization": "fp8"}),
    "suffix defaults": ({"method": "suffix"}, 1,
                        {"method": "suffix", "num_speculative_tokens": 24, "suffix_decoding_max_tree_depth": 24,
                         "suffix_decoding_max_cached_requests": 10000, "suffix_decoding_max_spec_factor": 1.0,
                         "suffix_decoding_min_token_prob": 0.1}),
    "suffix tuned": ({"method": "suffix", "num_speculative_tokens": 8, "suffix_max_tree_depth": 32,
                      "suffix_max_cached_requests": 0, "suffix_max_spec_factor": 2, "suffix_min_token_prob": 0.2}, 1,
                     {"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_max_tree_depth": 32,
                      "suffix_decoding_max_cached_requests": 0, "suffix_decoding_max_spec_factor": 2.0,
                      "suffix_decoding_min_token_prob": 0.2}),
    "ngram_gpu plain (our k=5)": ({"method": "ngram_gpu"}, 1,
                                  {"method": "ngram_gpu", "num_speculative_tokens": 5, "prompt_lookup_min": 5,
                                   "prompt_lookup_max": 5}),
    "ngram_gpu lookup": ({"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_max": 4}, 1,
                         {"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 4, "prompt_lookup_max": 4}),
    "dflash": ({"method": "dflash", "draft_model": DFLASH, "num_speculative_tokens": 15}, 2,
               {"method": "dflash", "model": DFLASH, "num_speculative_tokens": 15}),
    "dspark with draft (k = its block size)": ({"method": "dspark", "draft_model": "/m/dspark"}, 1,
                                               {"method": "dspark", "model": "/m/dspark"}),
    "dspark bundled in the target": ({"method": "dspark", "num_speculative_tokens": 7, "draft_tensor_parallel_size": 8}, 8,
                                     {"method": "dspark", "num_speculative_tokens": 7, "draft_tensor_parallel_size": 8}),
    "ngram schedule (k = largest band k)": ({"method": "ngram", "schedule": SCHED}, 1,
                                            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5,
                                             "prompt_lookup_max": 5,
                                             "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 32, 2],
                                                                                       [33, 1048576, 0]]}),
    "eagle3 schedule compact": ({"method": "eagle3", "draft_model": EAGLE3, "schedule": "1-4:5, 5-16:3, 17+:1"}, 1,
                                {"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 5,
                                 "num_speculative_tokens_per_batch_size": [[1, 4, 5], [5, 16, 3], [17, 1048576, 1]]}),
    "mtp schedule with k": ({"method": "mtp", "num_speculative_tokens": 2, "schedule": "1-16:2,17+:1"}, 8,
                            {"method": "mtp", "num_speculative_tokens": 2,
                             "num_speculative_tokens_per_batch_size": [[1, 16, 2], [17, 1048576, 1]]}),
    "dflash schedule": ({"method": "dflash", "draft_model": DFLASH, "schedule": "1-8:15,9+:7"}, 1,
                        {"method": "dflash", "model": DFLASH, "num_speculative_tokens": 15,
                         "num_speculative_tokens_per_batch_size": [[1, 8, 15], [9, 1048576, 7]]}),
}


@pytest.mark.parametrize("spec, tp, expected", list(VLLM_CASES.values()), ids=list(VLLM_CASES))
def test_vllm_rendering(spec, tp, expected):
    args = engine_args(spec, "vllm", tp)
    assert vllm_cfg(args) == expected
    # Stable text: sorted keys, no spaces, so a unit file only changes when the request does.
    assert args[1] == json.dumps(expected, sort_keys=True, separators=(",", ":"))


SGLANG_CASES = {
    "ngram defaults": ({"method": "ngram"},
                       ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "12",
                        "--speculative-ngram-min-bfs-breadth", "1", "--speculative-ngram-max-bfs-breadth", "10",
                        "--speculative-ngram-match-type", "BFS", "--speculative-ngram-max-trie-depth", "18"]),
    "ngram tuned": ({"method": "ngram", "num_speculative_tokens": 7, "ngram_min_bfs_breadth": 2,
                     "ngram_max_bfs_breadth": 4, "ngram_match_type": "prob", "ngram_max_trie_depth": 12},
                    ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8",
                     "--speculative-ngram-min-bfs-breadth", "2", "--speculative-ngram-max-bfs-breadth", "4",
                     "--speculative-ngram-match-type", "PROB", "--speculative-ngram-max-trie-depth", "12"]),
    "eagle auto": ({"method": "eagle", "draft_model": EAGLE},
                   ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", EAGLE]),
    "eagle chain k": ({"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3},
                      ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                       "--speculative-num-draft-tokens", "4", "--speculative-draft-model-path", EAGLE]),
    "eagle3 tree": ({"method": "eagle3", "draft_model": EAGLE3, "eagle_steps": 5, "eagle_topk": 4, "num_draft_tokens": 8},
                    ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", EAGLE3,
                     "--speculative-num-steps", "5", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]),
    "eagle topk1 tree": ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
                         ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", EAGLE,
                          "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]),
    "mtp bare": ({"method": "mtp"}, ["--speculative-algorithm", "NEXTN"]),
    "mtp chain with draft": ({"method": "mtp", "num_speculative_tokens": 2, "draft_model": "/m/nextn"},
                             ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2", "--speculative-eagle-topk",
                              "1", "--speculative-num-draft-tokens", "3", "--speculative-draft-model-path", "/m/nextn"]),
    "standalone quantized": ({"method": "draft_model", "draft_model": DRAFT, "draft_quantization": "fp8"},
                             ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", DRAFT,
                              "--speculative-draft-model-quantization", "fp8"]),
    "dflash auto block": ({"method": "dflash", "draft_model": DFLASH},
                          ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", DFLASH]),
    "dflash k=15 (block 16)": ({"method": "dflash", "draft_model": DFLASH, "num_speculative_tokens": 15},
                               ["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16",
                                "--speculative-draft-model-path", DFLASH]),
    "dspark bundled": ({"method": "dspark"}, ["--speculative-algorithm", "DSPARK"]),
    "dspark gamma 7": ({"method": "dspark", "draft_model": "/m/dspark", "num_speculative_tokens": 7},
                       ["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "7",
                        "--speculative-draft-model-path", "/m/dspark"]),
    "uno linear": ({"method": "uno", "uno_lora_path": "/m/uno-lora", "num_speculative_tokens": 4},
                   ["--speculative-algorithm", "UNO", "--speculative-num-draft-tokens", "5", "--uno-lora-path", "/m/uno-lora"]),
    "uno tree": ({"method": "uno", "uno_lora_path": "/m/uno-lora", "eagle_steps": 3, "eagle_topk": 2, "num_draft_tokens": 6},
                 ["--speculative-algorithm", "UNO", "--uno-lora-path", "/m/uno-lora", "--speculative-num-steps", "3",
                  "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"]),
    "frozen_kv_mtp chain": ({"method": "frozen_kv_mtp", "draft_model": "google/gemma-4-assistant", "num_speculative_tokens": 3},
                            ["--speculative-algorithm", "FROZEN_KV_MTP", "--speculative-num-steps", "3",
                             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                             "--speculative-draft-model-path", "google/gemma-4-assistant"]),
    "eagle3 schedule": ({"method": "eagle3", "draft_model": EAGLE3, "schedule": SCHED},
                        ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "4", "--speculative-eagle-topk", "1",
                         "--speculative-num-draft-tokens", "5", "--speculative-draft-model-path", EAGLE3,
                         "--speculative-adaptive", "--speculative-adaptive-config",
                         SCHEDULE_DIR + "/sglang-adaptive-%s.json" % hashlib.sha256(
                             b'{"1":{"candidate_steps":[4]},"9":{"candidate_steps":[2]},"33":{"candidate_steps":[0]}}\n'
                         ).hexdigest()[:16]]),
}


@pytest.mark.parametrize("spec, expected", list(SGLANG_CASES.values()), ids=list(SGLANG_CASES))
def test_sglang_rendering(spec, expected):
    assert engine_args(spec, "sglang") == expected


@pytest.mark.parametrize("engine", ENGINES)
def test_none_renders_nothing(engine):
    assert engine_args({"method": "none"}, engine) == []
    assert engine_args(None, engine) == []
    assert normalize(None, engine) == {"method": "none"}


def every_case():
    for name, case in VLLM_CASES.items():
        yield pytest.param(case[0], "vllm", case[1], id="vllm " + name)
    for name, case in SGLANG_CASES.items():
        yield pytest.param(case[0], "sglang", 1, id="sglang " + name)


@pytest.mark.parametrize("spec, engine, tp", list(every_case()))
def test_normalize_is_idempotent_and_renders_the_same(spec, engine, tp):
    once = normalize(spec, engine, tp)
    assert normalize(once, engine, tp) == once
    assert engine_args(once, engine, tp) == engine_args(spec, engine, tp)
    assert list(once)[0] == "method"
    assert spec == dict(spec)  # the caller's dict is not modified


def test_every_method_is_covered_on_every_engine_it_has():
    rendered = {("vllm", c[0]["method"]) for c in VLLM_CASES.values()}
    rendered |= {("sglang", c[0]["method"]) for c in SGLANG_CASES.values()}
    rendered |= {(e, "none") for e in ENGINES}
    assert rendered == {(e, m) for m in METHODS for e in engines_for(m)}


def test_table_is_consistent():
    for method, table in METHODS.items():
        for engine in ENGINES:
            for name in table.get(engine, {"params": {}})["params"]:
                assert name in PARAMS, (method, engine, name)
                if engine == "vllm":
                    assert name in VLLM_KEYS
                elif name not in ("num_speculative_tokens", "schedule"):
                    assert name in SGLANG_FLAGS


def test_text_values_from_extra_vars_are_coerced():
    spec = {"method": "ngram", "num_speculative_tokens": "5", "prompt_lookup_min": " 2 ", "prompt_lookup_max": 4.0}
    want = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    assert normalize(spec, "vllm") == want
    assert normalize({"method": "suffix", "suffix_min_token_prob": "0.25"}, "vllm")["suffix_min_token_prob"] == 0.25


def test_methods_and_engines_listing():
    assert methods_for("vllm") == ["none", "ngram", "ngram_gpu", "eagle", "eagle3", "mtp", "draft_model", "suffix",
                                   "dflash", "dspark"]
    assert methods_for("sglang") == ["none", "ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash", "dspark",
                                     "uno", "frozen_kv_mtp"]
    assert engines_for("suffix") == ["vllm"]
    assert engines_for("deepseek_mtp") == ["vllm", "sglang"]


@pytest.mark.parametrize("spec, label", [
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}, "ngram k=5 lookup=2..4"),
    ({"method": "eagle3", "num_speculative_tokens": 3, "draft_model": "/srv/models/eagle3-8b/"}, "eagle3 k=3 draft=eagle3-8b"),
    ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": 5, "eagle_topk": 4, "num_draft_tokens": 8},
     "eagle tree=5/4/8 draft=" + EAGLE),
    ({"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}, "mtp k=2 draft_tp=1"),
    ({"method": "draft_model", "num_speculative_tokens": 4, "draft_model": DRAFT, "draft_quantization": "fp8"},
     "draft_model k=4 draft=%s draft_q=fp8" % DRAFT),
    ({"method": "ngram", "num_speculative_tokens": 11, "ngram_min_bfs_breadth": 1, "ngram_max_bfs_breadth": 10},
     "ngram k=11 bfs=1..10"),
    ({"method": "suffix", "num_speculative_tokens": 24, "suffix_max_tree_depth": 24}, "suffix k=24 depth=24"),
    ({"method": "none"}, "none"),
    (None, "none"),
])
def test_describe(spec, label):
    assert describe(spec) == label


# Every refusal, with the words that tell the operator what to do instead.
ERRORS = [
    ({"method": "medusa"}, "vllm", 1,
     "unknown speculative method 'medusa'; methods for vllm: none, ngram, ngram_gpu, eagle, eagle3, mtp, draft_model, "
     "suffix, dflash, dspark"),
    ({"method": "suffix"}, "sglang", 1,
     "sglang does not support speculative method 'suffix' (supported by: vllm); "
     "methods for sglang: none, ngram, eagle, eagle3, mtp, draft_model, dflash, dspark, uno, frozen_kv_mtp"),
    ({"method": "uno", "uno_lora_path": "/l", "num_speculative_tokens": 3}, "vllm", 1,
     "vllm does not support speculative method 'uno' (supported by: sglang)"),
    ({"method": "custom_class", "draft_model": "pkg.MyProposer"}, "vllm", 1, "unknown speculative method 'custom_class'"),
    ({"method": "extract_hidden_states"}, "vllm", 1, "unknown speculative method 'extract_hidden_states'"),
    ({"num_speculative_tokens": 3}, "vllm", 1, "the spec has no 'method'; methods for vllm: none, ngram"),
    ({"method": None}, "vllm", 1, "unknown speculative method None"),
    ("ngram", "vllm", 1, "a speculative spec must be a mapping with a 'method' key, got str"),
    ({"method": "ngram"}, "tgi", 1, "unknown engine 'tgi'; supported engines: vllm, sglang"),
    ({"method": "ngram", "num_speculative_tokens": 3}, "vllm", 0,
     "tensor_parallel_size must be an integer between 1 and 64, got 0"),
    ({"method": "ngram", "num_speculative_tokens": 3, "lookahead": 2}, "vllm", 1,
     "unknown parameter 'lookahead' for ngram on vllm; allowed parameters: "
     "num_speculative_tokens, prompt_lookup_min, prompt_lookup_max"),
    ({"method": "ngram", "prompt_lookup_min": 2}, "sglang", 1,
     "prompt_lookup_min is not a parameter of ngram on sglang (it applies to: vllm/ngram, vllm/ngram_gpu); allowed parameters: "
     "num_speculative_tokens, ngram_min_bfs_breadth, ngram_max_bfs_breadth, ngram_match_type, ngram_max_trie_depth"),
    ({"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3, "eagle_topk": 4}, "vllm", 1,
     "eagle_topk is not a parameter of eagle on vllm (it applies to: sglang/eagle, sglang/eagle3, sglang/mtp, "
     "sglang/draft_model, sglang/uno, sglang/frozen_kv_mtp)"),
    ({"method": "mtp", "draft_tensor_parallel_size": 1}, "sglang", 1,
     "draft_tensor_parallel_size is not a parameter of mtp on sglang (it applies to: vllm/eagle, vllm/eagle3, "
     "vllm/mtp, vllm/draft_model, vllm/dflash, vllm/dspark)"),
    ({"method": "none", "num_speculative_tokens": 3}, "vllm", 1,
     "num_speculative_tokens is not a parameter of none on vllm (it applies to: vllm/ngram"),
    ({"method": "mtp"}, "vllm", 1, "mtp on vllm requires num_speculative_tokens (tokens drafted per step)"),
    ({"method": "eagle", "num_speculative_tokens": 3}, "vllm", 1, "eagle on vllm requires draft_model"),
    ({"method": "eagle3"}, "sglang", 1, "eagle3 on sglang requires draft_model"),
    ({"method": "draft_model"}, "sglang", 1, "draft_model on sglang requires draft_model"),
    ({"method": "mtp"}, "vllm", 1, "mtp on vllm requires num_speculative_tokens"),
    ({"method": "ngram", "num_speculative_tokens": 0}, "vllm", 1, "num_speculative_tokens must be between 1 and 128, got 0"),
    ({"method": "ngram", "num_speculative_tokens": 500}, "vllm", 1, "num_speculative_tokens must be between 1 and 128, got 500"),
    ({"method": "ngram", "num_speculative_tokens": True}, "vllm", 1, "num_speculative_tokens must be an integer, got True"),
    ({"method": "ngram", "num_speculative_tokens": "five"}, "vllm", 1, "num_speculative_tokens must be an integer, got 'five'"),
    ({"method": "ngram", "num_speculative_tokens": 2.5}, "vllm", 1, "num_speculative_tokens must be an integer, got 2.5"),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0}, "vllm", 1,
     "prompt_lookup_min must be between 1 and 128, got 0"),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}, "vllm", 1,
     "prompt_lookup_min (5) must be <= prompt_lookup_max (2)"),
    ({"method": "eagle", "draft_model": "", "num_speculative_tokens": 3}, "vllm", 1,
     "draft_model must be a non-empty string, got ''"),
    ({"method": "eagle", "draft_model": ["a"], "num_speculative_tokens": 3}, "vllm", 1,
     "draft_model must be a non-empty string, got ['a']"),
    ({"method": "eagle3", "draft_model": EAGLE3, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2}, "vllm", 4,
     "draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (4), got 2"),
    ({"method": "suffix", "suffix_min_token_prob": 1.5}, "vllm", 1, "suffix_min_token_prob must be between 0.0 and 1.0, got 1.5"),
    ({"method": "suffix", "suffix_max_spec_factor": "nan"}, "vllm", 1, "suffix_max_spec_factor must be a number, got 'nan'"),
    ({"method": "suffix", "suffix_max_cached_requests": -1}, "vllm", 1,
     "suffix_max_cached_requests must be between 0 and 1000000000, got -1"),
    ({"method": "suffix", "suffix_max_tree_depth": 0}, "vllm", 1, "suffix_max_tree_depth must be between 1 and 128, got 0"),
    ({"method": "ngram", "ngram_match_type": "DFS"}, "sglang", 1, "ngram_match_type must be one of BFS, PROB, got 'DFS'"),
    ({"method": "ngram", "ngram_min_bfs_breadth": 4, "ngram_max_bfs_breadth": 2}, "sglang", 1,
     "ngram_min_bfs_breadth (4) must be <= ngram_max_bfs_breadth (2)"),
    ({"method": "ngram", "num_speculative_tokens": 3, "ngram_max_bfs_breadth": 10}, "sglang", 1,
     "ngram_max_bfs_breadth (10) must be <= num_speculative_tokens + 1 (4)"),
    ({"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3, "eagle_steps": 3}, "sglang", 1,
     "give either num_speculative_tokens (a chain: steps=k, topk=1) or the SGLang tree "
     "eagle_steps/eagle_topk/num_draft_tokens, not both"),
    ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": 3}, "sglang", 1,
     "SGLang needs eagle_steps, eagle_topk and num_draft_tokens all set or all unset; missing: eagle_topk, num_draft_tokens"),
    ({"method": "mtp", "eagle_topk": 1, "num_draft_tokens": 4}, "sglang", 1,
     "all set or all unset; missing: eagle_steps"),
    ({"method": "eagle3", "draft_model": EAGLE3, "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 8}, "sglang", 1,
     "with eagle_topk=1 SGLang forces num_draft_tokens = eagle_steps + 1 (4), got 8"),
    ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": 2, "eagle_topk": 2, "num_draft_tokens": 8}, "sglang", 1,
     "num_draft_tokens (8) exceeds what eagle_steps=2, eagle_topk=2 can draft (topk + (steps-1)*topk^2 + 1 = 7)"),
    ({"method": "eagle", "draft_model": EAGLE, "eagle_steps": 3, "eagle_topk": 2, "num_draft_tokens": 1}, "sglang", 1,
     "num_draft_tokens must be between 2 and 1024, got 1"),
]


@pytest.mark.parametrize("spec, engine, tp, message", ERRORS, ids=[e[3][:60] for e in ERRORS])
def test_refusals_say_what_is_allowed(spec, engine, tp, message):
    with pytest.raises(SpecError) as err:
        normalize(spec, engine, tp)
    assert message in str(err.value)
    # engine_args goes through the same gate.
    with pytest.raises(SpecError):
        engine_args(spec, engine, tp)


def test_spec_error_is_a_value_error():
    assert issubclass(SpecError, ValueError)


def test_describe_refuses_non_mapping():
    with pytest.raises(SpecError, match="mapping"):
        describe(["ngram"])


def test_docs_cover_every_method_and_parameter():
    import os
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "spec-methods.md")
    with open(doc) as f:
        text = f.read()
    for name in list(PARAMS) + list(METHODS):
        assert "| `%s` |" % name in text, name
    for flag in SGLANG_FLAGS.values():
        assert flag in text, flag


def test_plain_ngram_is_a_complete_request_on_both_engines():
    # `switch_spec -e method=ngram` must work as is: vLLM needs k, so the model supplies 5.
    assert normalize({"method": "ngram"}, "vllm") == {
        "method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 5, "prompt_lookup_max": 5}
    assert engine_args({"method": "ngram"}, "vllm") == [
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":5,"prompt_lookup_min":5}']
    assert normalize({"method": "ngram"}, "sglang")["num_speculative_tokens"] == 11


def test_sglang_ngram_default_breadth_is_capped_at_a_small_window():
    # A sweep over ngram k=2..6 must be valid on SGLang too: only a breadth the operator gave is refused.
    out = normalize({"method": "ngram", "num_speculative_tokens": 2}, "sglang")
    assert out["ngram_max_bfs_breadth"] == 3 and out["ngram_min_bfs_breadth"] == 1
    assert normalize({"method": "ngram"}, "sglang")["ngram_max_bfs_breadth"] == 10


# ---- methods added for vLLM 0.33 / SGLang 0.5.23 -------------------------------------------------------

NEW_METHOD_ERRORS = [
    ({"method": "dflash", "num_speculative_tokens": 15}, "vllm", 1, "dflash on vllm requires draft_model"),
    ({"method": "dflash", "draft_model": DFLASH}, "vllm", 1, "dflash on vllm requires num_speculative_tokens"),
    ({"method": "dflash"}, "sglang", 1, "dflash on sglang requires draft_model"),
    ({"method": "dflash", "draft_model": DFLASH, "eagle_steps": 1}, "sglang", 1,
     "eagle_steps is not a parameter of dflash on sglang"),
    ({"method": "dspark"}, "vllm", 1, "dspark on vllm requires draft_model (k then defaults to its block size) or "
                                      "num_speculative_tokens"),
    ({"method": "dspark", "num_speculative_tokens": 7, "draft_tensor_parallel_size": 2}, "vllm", 4,
     "draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (4), got 2"),
    ({"method": "uno", "num_speculative_tokens": 3}, "sglang", 1, "uno on sglang requires uno_lora_path"),
    ({"method": "uno", "uno_lora_path": "/l", "num_speculative_tokens": 3, "draft_model": "x"}, "sglang", 1,
     "draft_model is not a parameter of uno on sglang"),
    ({"method": "uno", "uno_lora_path": "/l"}, "sglang", 1, "uno on sglang requires num_speculative_tokens"),
    ({"method": "uno", "uno_lora_path": "/l", "num_speculative_tokens": 3}, "sglang", 2,
     "uno on sglang requires tensor_parallel_size 1"),
    ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}, "sglang", 1,
     "UNO with eagle_topk=1 is linear"),
    ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 4, "eagle_topk": 2, "num_draft_tokens": 4}, "sglang", 1,
     "num_draft_tokens >= eagle_steps + 1 (5), got 4"),
    ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 64, "eagle_topk": 4, "num_draft_tokens": 200}, "sglang", 1,
     "at most 128 verify nodes"),
    ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 20, "eagle_topk": 32, "num_draft_tokens": 100}, "sglang", 1,
     "num_draft_tokens * eagle_topk <= 2048, got 3200"),
    ({"method": "uno", "uno_lora_path": "/l", "eagle_steps": 2, "eagle_topk": 2, "num_draft_tokens": 6}, "sglang", 1,
     "UNO tree mode needs num_draft_tokens - 1 <= eagle_topk*(eagle_steps-1)+1 (3), got 5"),
    ({"method": "uno", "uno_lora_path": "-rf", "num_speculative_tokens": 3}, "sglang", 1,
     "uno_lora_path may not start with '-'"),
    ({"method": "uno", "uno_lora_path": "/l\nExecStartPre=/bin/sh", "num_speculative_tokens": 3}, "sglang", 1,
     "uno_lora_path contains a control or line-separator character"),
    ({"method": "frozen_kv_mtp", "num_speculative_tokens": 3}, "sglang", 1, "frozen_kv_mtp on sglang requires draft_model"),
    ({"method": "frozen_kv_mtp", "draft_model": "g", "eagle_steps": 3, "eagle_topk": 1, "num_draft_tokens": 6}, "sglang", 1,
     "with eagle_topk=1 SGLang forces num_draft_tokens = eagle_steps + 1 (4), got 6"),
    ({"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 4, "prompt_lookup_max": 2}, "vllm", 1,
     "prompt_lookup_min (4) must be <= prompt_lookup_max (2)"),
    ({"method": "ngram_gpu"}, "sglang", 1, "sglang does not support speculative method 'ngram_gpu' (supported by: vllm)"),
]


@pytest.mark.parametrize("spec, engine, tp, message", NEW_METHOD_ERRORS, ids=[e[3][:60] for e in NEW_METHOD_ERRORS])
def test_new_method_refusals(spec, engine, tp, message):
    with pytest.raises(SpecError) as err:
        normalize(spec, engine, tp)
    assert message in str(err.value)


@pytest.mark.parametrize("alias", sorted(ALIASES))
@pytest.mark.parametrize("engine", ENGINES)
def test_model_specific_mtp_names_run_as_mtp_with_a_warning(alias, engine):
    spec = {"method": alias, "num_speculative_tokens": 1}
    found = []
    assert normalize(spec, engine, warnings=found) == normalize({"method": "mtp", "num_speculative_tokens": 1}, engine)
    assert len(found) == 1 and "%r is deprecated" % alias in found[0] and "running method mtp" in found[0]
    assert spec_warnings(spec, engine) == found
    assert engine_args(spec, engine) == engine_args({"method": "mtp", "num_speculative_tokens": 1}, engine)
    assert spec_warnings({"method": "mtp", "num_speculative_tokens": 1}, engine) == []


def test_frozen_kv_mtp_gets_the_chain_sglang_gives_the_same_draft_under_nextn():
    assert normalize({"method": "frozen_kv_mtp", "draft_model": "g"}, "sglang") == {
        "method": "frozen_kv_mtp", "draft_model": "g", "num_speculative_tokens": 3}
    tree = {"method": "frozen_kv_mtp", "draft_model": "g", "eagle_steps": 3, "eagle_topk": 2, "num_draft_tokens": 6}
    assert normalize(tree, "sglang") == tree


def test_aliases_are_vllms_mtp_names():
    # vllm/config/speculative.py MTPModelTypes (0.33) without "mtp" itself; tests/engines checks the real list.
    assert len(ALIASES) == 27 and set(ALIASES.values()) == {"mtp"} and "mtp" not in ALIASES
    assert not set(ALIASES) & set(METHODS)


# ---- schedules ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", [
    SCHED,
    "1-8:4,9-32:2,33+:0",
    " 1-8 : 4 , 9-32:2, 33+:0 ",
    ["1-8:4", "9-32:2", "33+:0"],
    [{"batch": "1-8", "k": "4"}, {"batch": [9, 32], "k": 2.0}, {"batch": [33], "k": 0}],
    [{"batch": [1, 8], "k": 4}, {"batch": (9, 32), "k": 2}, {"batch": "33+", "k": 0}],
])
def test_schedule_forms_normalize_to_one(form):
    out = normalize({"method": "ngram", "schedule": form}, "vllm")
    assert out["schedule"] == SCHED and out["num_speculative_tokens"] == 4
    assert schedule_text(out["schedule"]) == "1-8:4,9-32:2,33+:0"


@pytest.mark.parametrize("engine, method, extra", [
    ("vllm", "ngram", {}), ("vllm", "ngram_gpu", {}), ("vllm", "eagle", {"draft_model": EAGLE}),
    ("vllm", "eagle3", {"draft_model": EAGLE3}), ("vllm", "mtp", {}), ("vllm", "draft_model", {"draft_model": DRAFT}),
    ("vllm", "dflash", {"draft_model": DFLASH}), ("vllm", "dspark", {}),
    ("sglang", "eagle", {"draft_model": EAGLE}), ("sglang", "eagle3", {"draft_model": EAGLE3}), ("sglang", "mtp", {}),
])
def test_schedule_is_taken_where_the_engine_honours_it(engine, method, extra):
    spec = dict({"method": method, "schedule": "1-8:4,9+:1"}, **extra)
    once = normalize(spec, engine)
    assert normalize(once, engine) == once
    assert engine_args(once, engine) == engine_args(spec, engine)
    assert once["num_speculative_tokens"] == 4 and list(once)[-1] == "schedule"


@pytest.mark.parametrize("engine, method, extra, why", [
    ("vllm", "suffix", {}, "Model Runner V1 only, which drops num_speculative_tokens_per_batch_size"),
    ("sglang", "ngram", {}, "for NGRAM it switches adaptive off with a warning"),
    ("sglang", "draft_model", {"draft_model": DRAFT}, "for STANDALONE it switches adaptive off"),
    ("sglang", "dflash", {"draft_model": DFLASH}, "for DFLASH"),
    ("sglang", "dspark", {}, "for DSPARK"),
    ("sglang", "uno", {"uno_lora_path": "/l"}, "for UNO"),
    ("sglang", "frozen_kv_mtp", {"draft_model": "g"}, "for FROZEN_KV_MTP"),
    ("vllm", "none", {}, "method none does not speculate"),
    ("sglang", "none", {}, "method none does not speculate"),
])
def test_schedule_refused_where_the_engine_would_drop_it(engine, method, extra, why):
    with pytest.raises(SpecError) as err:
        normalize(dict({"method": method, "schedule": "1-8:4,9+:1"}, **extra), engine)
    assert "schedule is not possible for %s on %s" % (method, engine) in str(err.value)
    assert why in str(err.value)
    assert "methods with a schedule on %s: " % engine in str(err.value)


SCHEDULE_ERRORS = [
    ("2-8:4,9+:1", "schedule must start at batch 1 (every batch size needs a k), starts at 2"),
    ("1-8:4,10+:1", "schedule has a gap: 1-8 then 10+ (batch 9 has no k)"),
    ("1-8:4,12-16:2,17+:1", "schedule has a gap: 1-8 then 12-16 (batches 9-11 have no k)"),
    ("1-8:4,8+:1", "schedule bands overlap or are out of order: 1-8 then 8+"),
    ("1-8:4,1-8:2,9+:1", "schedule bands overlap or are out of order"),
    ("1+:4,9+:1", "schedule[0] (1+) is open but is not the last band"),
    ("1-8:0,9+:0", "schedule has k: 0 in every band; that is method none"),
    ("1-8:129,9+:1", "schedule[0].k must be between 0 and 128, got 129"),
    ("1-8:-1,9+:1", "schedule[0].k must be between 0 and 128, got -1"),
    ("1-8:four", "schedule[0].k must be an integer, got 'four'"),
    ("1-8:2.5", "schedule[0].k must be an integer, got '2.5'"),
    ("8-1:4", "schedule[0].batch runs backwards: 8-1"),
    ("0-8:4", "schedule[0].batch first must be between 1 and 65536, got 0"),
    ("1-70000:4", "schedule[0].batch last must be between 1 and 65536, got 70000"),
    ("1-8", "schedule[0] must be BATCHES:K (e.g. 9-32:2 or 33+:0), got '1-8'"),
    ("a-b:3", "schedule[0].batch must be FIRST-LAST or FIRST+ (e.g. 9-32, 33+), got 'a-b'"),
    ("", "schedule has no bands; leave it out for a fixed k"),
    ([], "schedule has no bands"),
    ({"batch": [1, 8], "k": 4}, "schedule must be a list of {batch: [first, last], k: K} bands"),
    (4, "schedule must be a list of"),
    ([{"batch": [1, 8]}], "schedule[0] needs batch and k"),
    ([{"batch": [1, 8], "k": 4, "topk": 2}], "schedule[0] has unknown key(s) topk; a band has batch and k"),
    ([{"batch": [1, 2, 3], "k": 4}], "schedule[0].batch must be [first, last]"),
    ([{"batch": [1, None], "k": True}], "schedule[0].k must be an integer, got True"),
    ([{"batch": [True, None], "k": 1}], "schedule[0].batch first must be an integer, got True"),
    (",".join("%d-%d:1" % (i, i) for i in range(1, 66)), "schedule has 65 bands, at most 64 allowed"),
]


@pytest.mark.parametrize("schedule, message", SCHEDULE_ERRORS, ids=[e[1][:50] for e in SCHEDULE_ERRORS])
def test_schedule_refusals(schedule, message):
    for engine, extra in (("vllm", {}), ("sglang", {"draft_model": EAGLE})):
        with pytest.raises(SpecError) as err:
            normalize(dict({"method": "eagle" if extra else "ngram", "schedule": schedule}, **extra), engine)
        assert message in str(err.value)


def test_schedule_sets_k_and_k_must_agree():
    assert normalize({"method": "ngram", "num_speculative_tokens": 4, "schedule": "1-8:4,9+:1"}, "vllm")[
        "num_speculative_tokens"] == 4
    for engine, extra, why in (("vllm", {}, "vLLM caps every band at it"),
                               ("sglang", {"draft_model": EAGLE}, "SGLang starts every band from it")):
        with pytest.raises(SpecError) as err:
            normalize(dict({"method": "eagle" if extra else "ngram", "num_speculative_tokens": 3,
                            "schedule": "1-8:4,9+:1"}, **extra), engine)
        assert "num_speculative_tokens is the largest k of the schedule (4), got 3" in str(err.value)
        assert why in str(err.value)


def test_sglang_schedule_and_tree_exclude_each_other():
    with pytest.raises(SpecError, match="a schedule sets the steps per batch band itself"):
        normalize({"method": "eagle", "draft_model": EAGLE, "schedule": "1+:3", "eagle_steps": 3, "eagle_topk": 1,
                   "num_draft_tokens": 4}, "sglang")


def test_schedule_file_is_sglangs_adaptive_config_named_by_content():
    spec = {"method": "eagle3", "draft_model": EAGLE3, "schedule": SCHED}
    f = schedule_file(spec, "sglang")
    assert json.loads(f["text"]) == {"1": {"candidate_steps": [4]}, "9": {"candidate_steps": [2]},
                                     "33": {"candidate_steps": [0]}}
    assert f["text"].endswith("\n")
    assert f["path"] == SCHEDULE_DIR + "/sglang-adaptive-%s.json" % hashlib.sha256(f["text"].encode()).hexdigest()[:16]
    assert engine_args(spec, "sglang")[-3:] == ["--speculative-adaptive", "--speculative-adaptive-config", f["path"]]
    moved = schedule_file(spec, "sglang", schedule_dir="/srv/sched")
    assert moved["path"].startswith("/srv/sched/sglang-adaptive-") and moved["text"] == f["text"]
    assert engine_args(spec, "sglang", 1, "/srv/sched")[-1] == moved["path"]
    other = schedule_file(dict(spec, schedule="1-8:4,9+:1"), "sglang")
    assert other["path"] != f["path"]
    assert schedule_file(spec, "vllm") is None
    assert schedule_file({"method": "eagle3", "draft_model": EAGLE3, "num_speculative_tokens": 3}, "sglang") is None
    with pytest.raises(SpecError, match="schedule_dir must be an absolute path"):
        engine_args(spec, "sglang", 1, "relative/dir")


def test_schedule_warnings():
    # A closed last band runs its k for every larger batch on both engines: normalized open, and said.
    found = spec_warnings({"method": "ngram", "schedule": [{"batch": [1, 8], "k": 4}, {"batch": [9, 64], "k": 1}]}, "vllm")
    assert found == ["schedule: the last band 9-64 covers every larger batch too (both engines keep its k=1 beyond 64)"]
    assert spec_warnings({"method": "ngram", "schedule": "1-8:4,9+:1"}, "vllm") == []
    # SGLang pads the batch to a CUDA-graph size first: a band end between two sizes moves.
    found = spec_warnings({"method": "eagle", "draft_model": EAGLE, "schedule": "1-9:4,10-36:2,37+:1"}, "sglang")
    assert len(found) == 2
    assert "batch 9 of band 1-9 runs the next band's k" in found[0]
    assert "batches 33-36 of band 10-36 run the next band's k" in found[1]
    for fine in ("1-8:4,9-32:2,33+:0", "1-4:4,5-40:2,41-256:1,257+:0", "1-64:3,65-272:1,273+:0"):
        assert spec_warnings({"method": "eagle", "draft_model": EAGLE, "schedule": fine}, "sglang") == [], fine
    # vLLM looks the batch size up as is: no padding warning there.
    assert spec_warnings({"method": "ngram", "schedule": "1-9:4,10-36:2,37+:1"}, "vllm") == []


def test_describe_shows_the_schedule():
    out = normalize({"method": "eagle3", "draft_model": EAGLE3, "schedule": SCHED}, "vllm")
    assert describe(out) == "eagle3 k=4 schedule=1-8:4,9-32:2,33+:0 draft=EAGLE3 head"
    assert describe({"method": "uno", "uno_lora_path": "/m/lora/", "num_speculative_tokens": 4}) == "uno k=4 lora=lora"
    assert describe({"method": "ngram", "schedule": "junk"}) == "ngram schedule=?"


def test_required_and_one_of_make_a_complete_request_for_every_method():
    """What a survey must ask for: the REQUIRED parameters and one of each `one_of` group."""
    samples = {int: lambda i: max(i["min"], min(4, i["max"])), float: lambda i: float(i["min"]),
               str: lambda i: i["choices"][0] if "choices" in i else "org/draft-model"}
    for engine in ENGINES:
        for method in methods_for(engine):
            table = METHODS[method][engine]
            names = [p for p, d in table["params"].items() if d is REQUIRED] + [g[0] for g in table.get("one_of", [])]
            request = dict({p: samples[PARAMS[p]["type"]](PARAMS[p]) for p in names}, method=method)
            normalize(request, engine)
            for group in table.get("one_of", []):
                with pytest.raises(SpecError):
                    normalize({k: v for k, v in request.items() if k not in group}, engine)
