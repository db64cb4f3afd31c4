# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM 0.33 judges _spec: its `vllm serve` parser reads what we render, and its SpeculativeConfig,
built from that parse against tiny local models, holds exactly what the operator asked for."""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import get_args
from unittest import mock

import pytest

vllm = pytest.importorskip("vllm")

from vllm.config import ParallelConfig, SpeculativeConfig, VllmConfig  # noqa: E402
from vllm.config.speculative import MTPModelTypes, SpeculativeMethod  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from vllm.v1.spec_decode.dynamic.utils import (  # noqa: E402
    build_dynamic_sd_schedule_lookup, validate_and_normalize_dynamic_sd_schedule)

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_vllm, _gate, _server, _spec  # noqa: E402
from tiny_models import CONFIGS  # noqa: E402

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
    "ngram_gpu plain (our k=5)": ({"method": "ngram_gpu"}, 1),
    "ngram_gpu lookup 2..3": ({"method": "ngram_gpu", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
                               "prompt_lookup_max": 3}, 1),
    "dflash": ({"method": "dflash", "draft_model": "@dflash", "num_speculative_tokens": 15}, 1),
    "dflash tp2 draft tp1": ({"method": "dflash", "draft_model": "@dflash", "num_speculative_tokens": 7,
                              "draft_tensor_parallel_size": 1}, 2),
    "dspark k from the draft's block size": ({"method": "dspark", "draft_model": "@dspark"}, 1),
    "dspark k given": ({"method": "dspark", "draft_model": "@dspark", "num_speculative_tokens": 7}, 1),
    # Batch-size schedules: num_speculative_tokens_per_batch_size inside --speculative-config.
    "ngram schedule": ({"method": "ngram", "schedule": "1-8:4,9-32:2,33+:0"}, 1),
    "ngram_gpu schedule": ({"method": "ngram_gpu", "schedule": "1-16:3,17+:1"}, 1),
    "eagle schedule": ({"method": "eagle", "draft_model": "@eagle", "schedule": "1-4:5,5-64:2,65+:0"}, 1),
    "eagle3 schedule tp2": ({"method": "eagle3", "draft_model": "@eagle3", "schedule": [
        {"batch": [1, 8], "k": 4}, {"batch": [9, None], "k": 1}]}, 2),
    "mtp schedule": ({"method": "mtp", "schedule": "1-8:3,9+:1"}, 1),
    "draft_model schedule": ({"method": "draft_model", "draft_model": "@draft", "schedule": "1-2:6,3-20:3,21+:0"}, 1),
    "dflash schedule": ({"method": "dflash", "draft_model": "@dflash", "schedule": "1-8:15,9-32:7,33+:0"}, 1),
    "dspark schedule": ({"method": "dspark", "draft_model": "@dspark", "schedule": "1-8:7,9+:3"}, 1),
}

# vLLM's own method names that the spec model leaves out on purpose (docs/spec-methods.md says why).
LEFT_OUT = {"custom_class", "extract_hidden_states"}

# Schedules vLLM refuses too (when the scheduler builds its lookup at engine start): raw
# num_speculative_tokens_per_batch_size, with vLLM's message.
SCHEDULE_REJECTED_BY_BOTH = {
    "first band not at 1": ("2-8:4,9+:1", [[2, 8, 4], [9, 100, 1]], "must start at 1"),
    "overlapping bands": ("1-8:4,8+:1", [[1, 8, 4], [8, 100, 1]], "non-overlapping"),
    "negative k": ("1-8:-1,9+:1", [[1, 8, -1], [9, 100, 1]], ">= 0"),
    "band backwards": ("8-1:4", [[8, 1, 4]], "start must be <= end"),
    "batch 0": ("0-8:4", [[0, 8, 4]], "must be positive"),
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
    "ngram_gpu lookup min > max": ({"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
                                    "prompt_lookup_max": 2}, 1, "must be <= prompt_lookup_max"),
    "dflash without draft": ({"method": "dflash", "num_speculative_tokens": 15}, 1, "without speculative model"),
    "dflash without k": ({"method": "dflash", "draft_model": "@dflash"}, 1, "`num_speculative_tokens` was not provided"),
    "dspark with neither draft nor k": ({"method": "dspark"}, 1, "num_speculative_tokens must be provided"),
    "dflash draft tp neither 1 nor tp": ({"method": "dflash", "draft_model": "@dflash", "num_speculative_tokens": 7,
                                          "draft_tensor_parallel_size": 2}, 4, "cannot be other value than 1"),
    "custom_class (left out)": ({"method": "custom_class", "num_speculative_tokens": 3}, 1, "custom proposer module path"),
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
    method = _spec.ALIASES.get(spec.get("method"), spec.get("method"))
    if method == "mtp":
        return models["mtp_target"]
    return models["qwen3_target"] if method in ("dflash", "dspark") else models["target"]


def vllm_value(name, value):
    """A canonical value as it appears in --speculative-config."""
    if name == "schedule":
        return [[b["batch"][0], b["batch"][1] or (1 << 20), b["k"]] for b in value]
    return value


def k_at(schedule, batch):
    """The k our canonical schedule means for one batch size."""
    return [b["k"] for b in schedule if b["batch"][0] <= batch and (b["batch"][1] is None or batch <= b["batch"][1])][0]


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
            cfg[_engine_vllm.SPEC_KEYS.get(key, key)] = value
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
                                       **{_engine_vllm.SPEC_KEYS[k]: vllm_value(k, v) for k, v in want.items() if k != "method"}}

    sc = build_speculative_config(args)
    assert sc.method == _spec.METHODS[want["method"]]["vllm"]["name"]
    # dspark without k drafts its checkpoint's block size, vLLM's default.
    assert sc.num_speculative_tokens == want.get("num_speculative_tokens", CONFIGS["dspark"]["block_size"])
    if "schedule" in want:
        assert sc.num_speculative_tokens_per_batch_size == [tuple(b) for b in vllm_value("schedule", want["schedule"])]
    else:
        assert sc.num_speculative_tokens_per_batch_size is None
    if want["method"] in ("ngram", "ngram_gpu"):
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
            assert fields[_engine_vllm.SPEC_KEYS[name]].default == default, name


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
    scheduled = {case[0]["method"] for case in ACCEPTED.values() if "schedule" in case[0]}
    assert scheduled == {m for m in _spec.methods_for("vllm") if "schedule" in _spec.METHODS[m]["vllm"]["params"]}


def test_every_vllm_method_is_in_the_table_or_left_out_on_purpose():
    ours = {t["vllm"]["name"] for t in _spec.METHODS.values() if "vllm" in t and t["vllm"]["name"]}
    assert set(get_args(SpeculativeMethod)) == ours | set(_spec.ALIASES) | LEFT_OUT
    assert set(get_args(MTPModelTypes)) == set(_spec.ALIASES) | {"mtp"}


@pytest.mark.parametrize("alias", sorted(_spec.ALIASES))
def test_model_specific_mtp_names_are_rewritten_to_mtp_by_vllm_too(alias, models):
    found = []
    want = _spec.normalize({"method": alias, "num_speculative_tokens": 1}, "vllm", warnings=found)
    assert want["method"] == "mtp" and alias in found[0]
    with mock.patch("vllm.config.speculative.logger") as logger:
        sc = vllm_accepts({"method": alias, "num_speculative_tokens": 1}, models["mtp_target"], 1)
    assert sc.method == "mtp" and sc.num_speculative_tokens == 1
    logger.warning.assert_any_call("method `%s` is deprecated and replaced with mtp.", alias)


def _v1(sc, v2=False, dp=1):
    """The VllmConfig steps that switch a schedule off, run on their real code with a stand-in config."""
    stub = SimpleNamespace(speculative_config=sc, use_v2_model_runner=v2,
                           parallel_config=SimpleNamespace(data_parallel_size=dp))
    VllmConfig._maybe_disable_dynamic_sd_for_data_parallel(stub)
    VllmConfig._maybe_disable_dynamic_sd_for_v1(stub)
    return sc.num_speculative_tokens_per_batch_size


SCHEDULED = {name: case for name, case in ACCEPTED.items() if "schedule" in case[0]}


@pytest.mark.parametrize("spec, tp", list(SCHEDULED.values()), ids=list(SCHEDULED))
def test_schedule_runs_as_asked(spec, tp, models):
    """The scheduler's own lookup (built at engine start) gives every batch size the k we mean."""
    spec = resolve(spec, models)
    want = _spec.normalize(spec, "vllm", tp)
    sc = build_speculative_config(parse_serve([target_for(spec, models), "--tensor-parallel-size", str(tp)]
                                              + _spec.engine_args(spec, "vllm", tp)))
    assert validate_and_normalize_dynamic_sd_schedule(sc.num_speculative_tokens_per_batch_size)
    lookup = build_dynamic_sd_schedule_lookup(sc.num_speculative_tokens_per_batch_size, vllm_max_batch_size=1024,
                                              vllm_num_speculative_tokens=sc.num_speculative_tokens)
    assert [lookup[b] for b in range(1, 1025)] == [k_at(want["schedule"], b) for b in range(1, 1025)]
    # Model Runner V2 (vLLM's default) keeps it for every method we allow; V1 for those it supports.
    assert _v1(sc, v2=True) is not None
    if want["method"] not in ("ngram_gpu", "dspark"):
        assert _v1(sc) is not None


@pytest.mark.parametrize("ours, raw, message", list(SCHEDULE_REJECTED_BY_BOTH.values()), ids=list(SCHEDULE_REJECTED_BY_BOTH))
def test_schedule_refused_by_both(ours, raw, message, models):
    with pytest.raises(_spec.SpecError):
        _spec.normalize({"method": "ngram", "schedule": ours}, "vllm")
    sc = vllm_accepts({"method": "ngram", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": raw},
                      models["target"], 1)
    with pytest.raises(ValueError, match=message):  # at engine start: the scheduler's lookup
        build_dynamic_sd_schedule_lookup(sc.num_speculative_tokens_per_batch_size, 256, sc.num_speculative_tokens)


def test_schedules_vllm_would_change_are_refused_by_us(models):
    """Taken by vLLM, but not as written: refused by _spec (docs/spec-methods.md)."""
    # A gap: vLLM carries the previous k through it.
    with pytest.raises(_spec.SpecError, match="gap"):
        _spec.normalize({"method": "ngram", "schedule": "1-8:4,17+:1"}, "vllm")
    sc = vllm_accepts({"method": "ngram", "num_speculative_tokens": 4,
                       "num_speculative_tokens_per_batch_size": [[1, 8, 4], [17, 100, 1]]}, models["target"], 1)
    assert build_dynamic_sd_schedule_lookup(sc.num_speculative_tokens_per_batch_size, 32, 4)[9:17] == [4] * 8
    # A band k above num_speculative_tokens: vLLM caps it.
    with pytest.raises(_spec.SpecError, match="largest k of the schedule"):
        _spec.normalize({"method": "ngram", "num_speculative_tokens": 2, "schedule": "1-8:4,9+:1"}, "vllm")
    sc = vllm_accepts({"method": "ngram", "num_speculative_tokens": 2,
                       "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 100, 1]]}, models["target"], 1)
    assert build_dynamic_sd_schedule_lookup(sc.num_speculative_tokens_per_batch_size, 16, 2)[1:9] == [2] * 8
    # Suffix: Model Runner V2 does not run it, and V1 drops the schedule.
    with pytest.raises(_spec.SpecError, match="schedule is not possible for suffix on vllm"):
        _spec.normalize({"method": "suffix", "schedule": "1-8:8,9+:2"}, "vllm")
    with mock.patch(ARCTIC, return_value=True):
        sc = vllm_accepts({"method": "suffix", "num_speculative_tokens_per_batch_size": [[1, 8, 8], [9, 100, 2]]},
                          models["target"], 1)
    stub = SimpleNamespace(speculative_config=sc, parallel_config=SimpleNamespace(
        distributed_executor_backend=None, pipeline_parallel_size=1, use_ubatching=False))
    assert "speculative method 'suffix'" in VllmConfig._get_v2_model_runner_unsupported_features(stub)
    assert _v1(sc) is None


def test_data_parallel_drops_a_schedule_so_the_unit_refuses_it(models):
    spec = {"method": "ngram", "schedule": "1-8:4,9+:1"}
    args = parse_serve([models["target"], "--data-parallel-size", "2"] + _spec.engine_args(spec, "vllm"))
    assert args.data_parallel_size == 2  # the flag _server looks for is vLLM's
    assert _v1(build_speculative_config(args), v2=True, dp=2) is None
    settings = {"engine": "vllm", "unit": "vllm-server.service", "executable": "/usr/local/bin/vllm",
                "model": "/m", "host": "127.0.0.1", "port": 8000, "spec": spec, "user": "vllm", "group": "vllm",
                "working_dir": "/var/lib/vllm", "env_file": "/etc/x.env", "start_timeout": 1, "stop_timeout": 1,
                "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1}
    for extra in (["--data-parallel-size", "2"], ["--data_parallel_size=2"], ["-dp", "4"]):
        with pytest.raises(_gate.GateError, match="turns the spec's schedule off"):
            _server.unit_settings(dict(settings, extra_args=extra))
    assert _server.unit_settings(dict(settings, extra_args=["--data-parallel-size", "1"]))["argv"]


def test_none_adds_no_speculative_config(models):
    args = parse_serve([models["target"]] + _spec.engine_args({"method": "none"}, "vllm"))
    assert args.speculative_config is None


def test_quantization_names_are_vllms_to_check(models):
    # The gate refuses a name outside vLLM's list (_spec.QUANTIZATIONS, issue 31); vLLM refuses the same
    # name itself while building the config, before any GPU work (the fragment's value swapped).
    spec = {"method": "draft_model", "draft_model": models["draft"], "num_speculative_tokens": 3,
            "draft_quantization": "bogus"}
    with pytest.raises(_spec.SpecError, match="draft_quantization must be one of vllm's"):
        _spec.engine_args(spec, "vllm")
    fragment = _spec.engine_args(dict(spec, draft_quantization="fp8"), "vllm")
    fragment = [arg.replace('"quantization":"fp8"', '"quantization":"bogus"') for arg in fragment]
    assert '"quantization":"bogus"' in fragment[-1]
    with pytest.raises(ValueError, match="quantization"):
        build_speculative_config(parse_serve([models["target"]] + fragment))


@pytest.mark.parametrize("fmt", ["safetensors", "runai_streamer", "fastsafetensors"])
def test_the_load_format_is_vllms(fmt, models):
    # issue 34: spec_server_load_format rendered by the unit's gate, read by vLLM's own parser and EngineArgs
    settings = {"engine": "vllm", "unit": "vllm-server.service", "executable": "/usr/local/bin/vllm",
                "model": models["target"], "host": "127.0.0.1", "port": 8000, "spec": {"method": "none"}, "user": "vllm",
                "group": "vllm", "working_dir": "/var/lib/vllm", "env_file": "/etc/x.env", "start_timeout": 1,
                "stop_timeout": 1, "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1,
                "load_format": fmt}
    argv = _server.unit_settings(settings)["argv"]
    args = parse_serve(argv[2:])  # after `vllm serve`
    assert args.load_format == fmt and EngineArgs.from_cli_args(args).load_format == fmt


def test_a_serving_group_renders_what_vllm_reads_on_every_node(models):
    # issue 33: one spec, every node's argv from it; vLLM's own parser reads each node's rank, rendezvous and
    # --headless (the workers serve no API), and builds the same SpeculativeConfig on every node.
    base = {"engine": "vllm", "unit": "vllm-server.service", "executable": "/usr/local/bin/vllm",
            "model": models["target"], "host": "127.0.0.1", "port": 8000, "user": "vllm", "group": "vllm",
            "working_dir": "/var/lib/vllm", "env_file": "/etc/x.env", "start_timeout": 1, "stop_timeout": 1,
            "restart_sec": 1, "start_limit_burst": 1, "start_limit_interval": 1, "tensor_parallel_size": 2,
            "spec": {"method": "ngram", "num_speculative_tokens": 3}, "nodes": ["gpu-a01", "gpu-a02"],
            "rendezvous_address": "10.0.0.1", "rendezvous_port": 29500}
    configs = []
    for rank, name in enumerate(base["nodes"]):
        argv = _server.unit_settings(dict(base, node=name))["argv"]
        args = parse_serve(argv[2:])  # after `vllm serve`
        assert (args.nnodes, args.node_rank, args.master_addr, args.master_port, args.headless) == (
            2, rank, "10.0.0.1", 29500, rank > 0)
        configs.append(build_speculative_config(args))
    assert configs[0].method == configs[1].method == "ngram"
    assert configs[0].num_speculative_tokens == configs[1].num_speculative_tokens == 3
