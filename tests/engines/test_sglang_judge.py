"""SGLang 0.5.23 judges _spec: `prepare_server_args` (the launch_server parser) reads what we render
into ServerArgs fields equal to the request, and SpeculativeAlgorithm knows the algorithm.

Reach on this machine: argparse-level only. SGLang's startup resolution (ServerArgs.resolve_once,
where the EAGLE steps/topk/draft-tokens rules live) loads its model-config registry, which imports
torchvision; PyPI's torchvision needs a CUDA torch, so it cannot run next to the CPU torch here.
Those rules are enforced by _spec and listed below as refused by us, taken by the parser.
"""
from __future__ import annotations

import pytest

pytest.importorskip("sglang")

from sglang.srt.server_args import ServerArgs, prepare_server_args  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _spec  # noqa: E402

EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
EAGLE3 = "/srv/models/EAGLE3 head"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"

# What SpeculativeAlgorithm.from_string makes of each rendered name (NEXTN is EAGLE's alias).
ALGORITHM = {"ngram": "NGRAM", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "EAGLE", "draft_model": "STANDALONE"}

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
}

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
        if key in _spec.SGLANG_FLAGS:
            argv += [_spec.SGLANG_FLAGS[key], str(value)]
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
    if want["method"] == "ngram":
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


def test_none_leaves_speculation_off():
    sa = parse(_spec.engine_args({"method": "none"}, "sglang"))
    assert sa.speculative_algorithm is None
    assert SpeculativeAlgorithm.from_string(sa.speculative_algorithm) is SpeculativeAlgorithm.NONE


def test_quantization_names_are_sglangs_to_check():
    # _spec passes draft_quantization through; SGLang's parser has the list of names.
    fragment = _spec.engine_args({"method": "draft_model", "draft_model": DRAFT, "draft_quantization": "bogus"},
                                 "sglang")
    with pytest.raises(SystemExit):
        parse(fragment)
