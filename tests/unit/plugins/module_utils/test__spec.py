"""The speculative-decoding model: every method x engine rendering and every refusal.

The real vLLM / SGLang parsers judge the same renderings in tests/engines; here the exact argv is
pinned so a change of rendering is a visible, reviewed change.
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils._spec import (
    ENGINES, METHODS, PARAMS, VLLM_KEYS, SGLANG_FLAGS, SpecError, describe, engine_args,
    engines_for, methods_for, normalize)

EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
EAGLE3 = "/srv/models/EAGLE3 head"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"


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
                elif name != "num_speculative_tokens":
                    assert name in SGLANG_FLAGS


def test_text_values_from_extra_vars_are_coerced():
    spec = {"method": "ngram", "num_speculative_tokens": "5", "prompt_lookup_min": " 2 ", "prompt_lookup_max": 4.0}
    want = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    assert normalize(spec, "vllm") == want
    assert normalize({"method": "suffix", "suffix_min_token_prob": "0.25"}, "vllm")["suffix_min_token_prob"] == 0.25


def test_methods_and_engines_listing():
    assert methods_for("vllm") == ["none", "ngram", "eagle", "eagle3", "mtp", "draft_model", "suffix"]
    assert methods_for("sglang") == ["none", "ngram", "eagle", "eagle3", "mtp", "draft_model"]
    assert engines_for("suffix") == ["vllm"]


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
     "unknown speculative method 'medusa'; methods for vllm: none, ngram, eagle, eagle3, mtp, draft_model, suffix"),
    ({"method": "suffix"}, "sglang", 1,
     "sglang does not support speculative method 'suffix' (supported by: vllm); "
     "methods for sglang: none, ngram, eagle, eagle3, mtp, draft_model"),
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
     "prompt_lookup_min is not a parameter of ngram on sglang (it applies to: vllm/ngram); allowed parameters: "
     "num_speculative_tokens, ngram_min_bfs_breadth, ngram_max_bfs_breadth, ngram_match_type, ngram_max_trie_depth"),
    ({"method": "eagle", "draft_model": EAGLE, "num_speculative_tokens": 3, "eagle_topk": 4}, "vllm", 1,
     "eagle_topk is not a parameter of eagle on vllm (it applies to: sglang/eagle, sglang/eagle3, sglang/mtp, "
     "sglang/draft_model)"),
    ({"method": "mtp", "draft_tensor_parallel_size": 1}, "sglang", 1,
     "draft_tensor_parallel_size is not a parameter of mtp on sglang (it applies to: vllm/eagle, vllm/eagle3, "
     "vllm/mtp, vllm/draft_model)"),
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
