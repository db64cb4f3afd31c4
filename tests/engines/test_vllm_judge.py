"""vLLM 0.33 judges _spec: its `vllm serve` parser reads what we render, and its SpeculativeConfig,
built from that parse against tiny local models, holds exactly what the operator asked for."""
from __future__ import annotations

import json
from unittest import mock

import pytest

vllm = pytest.importorskip("vllm")

from vllm.config import ParallelConfig, SpeculativeConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _spec  # noqa: E402

# Suffix decoding needs the arctic-inference package (CUDA kernels) at engine start; config
# validation only asks whether it is importable. Answering "yes" there lets vLLM's own suffix
# checks run; it is the only thing replaced in this file.
ARCTIC = "vllm.config.speculative.has_arctic_inference"

# (spec, target tensor-parallel size); "@name" is a tiny local model from tiny_models.py.
ACCEPTED = {
    "ngram 5 lookup 2..4": ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2,
                             "prompt_lookup_max": 4}, 1),
    "ngram default lookup": ({"method": "ngram", "num_speculative_tokens": 3}, 1),
    # vLLM itself refuses ngram without k; the spec model supplies k=5, so plain `method=ngram` runs.
    "ngram plain (our k=5)": ({"method": "ngram"}, 1),
    "ngram max only": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 7}, 1),
    "ngram min only": ({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 3}, 1),
    "ngram 1 lookup 1..1 tp4": ({"method": "ngram", "num_speculative_tokens": 1, "prompt_lookup_min": 1,
                                 "prompt_lookup_max": 1}, 4),
    "eagle": ({"method": "eagle", "draft_model": "@eagle", "num_speculative_tokens": 3}, 1),
    "eagle tp2 draft tp1": ({"method": "eagle", "draft_model": "@eagle", "num_speculative_tokens": 2,
                             "draft_tensor_parallel_size": 1}, 2),
    "eagle3": ({"method": "eagle3", "draft_model": "@eagle3", "num_speculative_tokens": 4}, 1),
    "eagle3 tp2 draft tp2": ({"method": "eagle3", "draft_model": "@eagle3", "num_speculative_tokens": 4,
                              "draft_tensor_parallel_size": 2}, 2),
    "mtp from target": ({"method": "mtp", "num_speculative_tokens": 1}, 1),
    "mtp 2 draft tp1": ({"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}, 1),
    "mtp explicit weights": ({"method": "mtp", "draft_model": "@mtp_target", "num_speculative_tokens": 1}, 1),
    "draft_model": ({"method": "draft_model", "draft_model": "@draft", "num_speculative_tokens": 4}, 1),
    "draft_model fp8": ({"method": "draft_model", "draft_model": "@draft", "num_speculative_tokens": 4,
                         "draft_quantization": "fp8"}, 1),
    "draft_model tp2": ({"method": "draft_model", "draft_model": "@draft", "num_speculative_tokens": 5,
                         "draft_tensor_parallel_size": 2}, 2),
    "suffix defaults": ({"method": "suffix"}, 1),
    "suffix tuned": ({"method": "suffix", "num_speculative_tokens": 8, "suffix_max_tree_depth": 32,
                      "suffix_max_cached_requests": 0, "suffix_max_spec_factor": 2.5,
                      "suffix_min_token_prob": 0.25}, 1),
}

# Refused by _spec, and by vLLM too when the same request reaches it unchecked:
# (spec, tp, what vLLM says).
REJECTED_BY_BOTH = {
    "lookup min > max": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5,
                          "prompt_lookup_max": 2}, 1, "must be <= prompt_lookup_max"),
    "k = 0": ({"method": "ngram", "num_speculative_tokens": 0}, 1, "greater than 0"),
    "k not an integer": ({"method": "ngram", "num_speculative_tokens": 2.5}, 1, "num_speculative_tokens"),
    "k not a number": ({"method": "ngram", "num_speculative_tokens": "five"}, 1, "num_speculative_tokens"),
    "eagle without draft": ({"method": "eagle", "num_speculative_tokens": 3}, 1, "without speculative model"),
    "eagle3 without draft": ({"method": "eagle3", "num_speculative_tokens": 3}, 1, "without speculative model"),
    "draft tp neither 1 nor tp": ({"method": "eagle3", "draft_model": "@eagle3", "num_speculative_tokens": 3,
                                   "draft_tensor_parallel_size": 2}, 4, "cannot be other value than 1"),
    "unknown method": ({"method": "medusa", "num_speculative_tokens": 3}, 1, "method"),
    "unknown parameter": ({"method": "ngram", "num_speculative_tokens": 3, "lookahead": 2}, 1, "lookahead"),
    "suffix prob > 1": ({"method": "suffix", "suffix_min_token_prob": 1.5}, 1, "must be in [0, 1]"),
    "suffix depth 0": ({"method": "suffix", "suffix_max_tree_depth": 0}, 1, "must be >= 1"),
    "suffix cache < 0": ({"method": "suffix", "suffix_max_cached_requests": -1}, 1, "must be >= 0"),
    "suffix factor < 0": ({"method": "suffix", "suffix_max_spec_factor": -1.0}, 1, "must be >= 0"),
}

# Refused by _spec on purpose although vLLM 0.33 takes them (docs/spec-methods.md says why).
ACCEPTED_BY_VLLM_ONLY = {
    "k above our cap of 128 (typo guard)": ({"method": "ngram", "num_speculative_tokens": 500}, 1),
    "lookup above our cap": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 200}, 1),
    "suffix depth above our cap": ({"method": "suffix", "suffix_max_tree_depth": 200}, 1),
    "k given as a boolean": ({"method": "ngram", "num_speculative_tokens": True}, 1),
    "draft tp on ngram (ignored by vLLM)": ({"method": "ngram", "num_speculative_tokens": 3,
                                            "draft_tensor_parallel_size": 2}, 2),
    "suffix key on ngram (ignored by vLLM)": ({"method": "ngram", "num_speculative_tokens": 3,
                                              "suffix_max_tree_depth": 8}, 1),
}


def resolve(spec, models):
    return {k: (models[v[1:]] if isinstance(v, str) and v.startswith("@") else v) for k, v in spec.items()}


def target_for(spec, models):
    return models["mtp_target"] if spec.get("method") == "mtp" else models["target"]


def parse_serve(argv):
    """`vllm serve MODEL ...` as vLLM parses and checks it."""
    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(argv)
    args.model = args.model_tag  # what `vllm serve` does with its positional model
    validate_parsed_serve_args(args)
    return args


def build_speculative_config(args):
    """SpeculativeConfig exactly as the engine builds it from parsed serve args."""
    engine_args = EngineArgs.from_cli_args(args)
    model_config = engine_args.create_model_config()
    parallel = ParallelConfig(tensor_parallel_size=engine_args.tensor_parallel_size)
    with mock.patch(ARCTIC, return_value=True):
        return engine_args.create_speculative_config(model_config, parallel)


def raw_vllm_config(spec):
    """The request in vLLM's names without our checks: what an operator could pass by hand."""
    cfg = {}
    for key, value in spec.items():
        if key == "method":
            table = _spec.METHODS.get(value, {}).get("vllm")
            cfg["method"] = table["name"] if table else value
        else:
            cfg[_spec.VLLM_KEYS.get(key, key)] = value
    return cfg


def vllm_accepts(cfg, target, tp):
    args = parse_serve([target, "--tensor-parallel-size", str(tp), "--speculative-config", json.dumps(cfg)])
    return build_speculative_config(args)


@pytest.mark.parametrize("spec, tp", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_vllm_builds_what_was_asked(spec, tp, models):
    spec = resolve(spec, models)
    target = target_for(spec, models)
    want = _spec.normalize(spec, "vllm", tp)
    fragment = _spec.engine_args(spec, "vllm", tp)

    args = parse_serve([target, "--tensor-parallel-size", str(tp)] + fragment)
    # The parser hands the JSON over key for key, in vLLM's names.
    assert args.speculative_config == {"method": _spec.METHODS[want["method"]]["vllm"]["name"],
                                       **{_spec.VLLM_KEYS[k]: v for k, v in want.items() if k != "method"}}

    sc = build_speculative_config(args)
    assert sc.method == _spec.METHODS[want["method"]]["vllm"]["name"]
    assert sc.num_speculative_tokens == want["num_speculative_tokens"]
    if want["method"] == "ngram":
        assert (sc.prompt_lookup_min, sc.prompt_lookup_max) == (want["prompt_lookup_min"], want["prompt_lookup_max"])
    elif want["method"] == "suffix":
        assert sc.suffix_decoding_max_tree_depth == want["suffix_max_tree_depth"]
        assert sc.suffix_decoding_max_cached_requests == want["suffix_max_cached_requests"]
        assert sc.suffix_decoding_max_spec_factor == want["suffix_max_spec_factor"]
        assert sc.suffix_decoding_min_token_prob == want["suffix_min_token_prob"]
    else:
        # mtp without draft_model drafts from the target's own MTP layers.
        assert sc.model == want.get("draft_model", target)
        assert sc.draft_model_config is not None and sc.draft_model_config.model == sc.model
        assert sc.draft_parallel_config.tensor_parallel_size == want.get("draft_tensor_parallel_size", tp)
        assert sc.quantization == want.get("draft_quantization")


@pytest.mark.parametrize("spec, tp, message", list(REJECTED_BY_BOTH.values()), ids=list(REJECTED_BY_BOTH))
def test_refused_by_both(spec, tp, message, models):
    spec = resolve(spec, models)
    with pytest.raises(_spec.SpecError):
        _spec.normalize(spec, "vllm", tp)
    with pytest.raises((ValueError, TypeError, NotImplementedError)) as err:  # pydantic errors are ValueErrors
        vllm_accepts(raw_vllm_config(spec), target_for(spec, models), tp)
    assert message in str(err.value)


@pytest.mark.parametrize("spec, tp", list(ACCEPTED_BY_VLLM_ONLY.values()), ids=list(ACCEPTED_BY_VLLM_ONLY))
def test_refused_by_us_on_purpose(spec, tp, models):
    spec = resolve(spec, models)
    with pytest.raises(_spec.SpecError):
        _spec.normalize(spec, "vllm", tp)
    assert vllm_accepts(raw_vllm_config(spec), target_for(spec, models), tp) is not None


def test_our_filled_defaults_are_vllms():
    fields = SpeculativeConfig.__dataclass_fields__
    for name, default in _spec.METHODS["suffix"]["vllm"]["params"].items():
        if name.startswith("suffix_"):
            assert fields[_spec.VLLM_KEYS[name]].default == default, name


def test_ngram_lookup_defaults_are_vllms():
    # Both bounds absent: vLLM picks 5..5; _spec fills the same so reports say what runs.
    sc = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    want = _spec.normalize({"method": "ngram", "num_speculative_tokens": 3}, "vllm")
    assert (sc.prompt_lookup_min, sc.prompt_lookup_max) == (want["prompt_lookup_min"], want["prompt_lookup_max"])


def test_suffix_k_defaults_to_tree_depth_as_in_vllm():
    with mock.patch(ARCTIC, return_value=True):
        sc = SpeculativeConfig(method="suffix", suffix_decoding_max_tree_depth=16)
    assert sc.num_speculative_tokens == _spec.normalize(
        {"method": "suffix", "suffix_max_tree_depth": 16}, "vllm")["num_speculative_tokens"]


def test_every_vllm_method_is_judged():
    judged = {case[0]["method"] for case in ACCEPTED.values()}
    assert judged == set(_spec.methods_for("vllm")) - {"none"}


def test_none_adds_no_speculative_config(models):
    args = parse_serve([models["target"]] + _spec.engine_args({"method": "none"}, "vllm"))
    assert args.speculative_config is None


def test_quantization_names_are_vllms_to_check(models):
    # _spec passes draft_quantization through (each engine has its own list); vLLM refuses an
    # unknown name while building the config, before any GPU work.
    spec = {"method": "draft_model", "draft_model": models["draft"], "num_speculative_tokens": 3,
            "draft_quantization": "bogus"}
    fragment = _spec.engine_args(spec, "vllm")
    with pytest.raises(ValueError, match="quantization"):
        build_speculative_config(parse_serve([models["target"]] + fragment))
