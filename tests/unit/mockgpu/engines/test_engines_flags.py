# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock engines refuse what the real ones refuse, with their messages and exit codes, before loading."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import VLLM, MockGpuHost
from mockengine import settings, vllm_cli, vllm_spec
from mockengine.sglang_cli import ArgsError, build_parser, check_speculative


def run_vllm(host, *args):
    return subprocess.run([VLLM, "serve", "org/m", "--port", "1"] + list(args),
                          env=host.env(), capture_output=True, text=True, timeout=20, check=False)


def run_sglang(host, *args):
    return subprocess.run([sys.executable, "-m", "sglang.launch_server", "--port", "1"] + list(args),
                          env=host.env(), capture_output=True, text=True, timeout=20, check=False)


def dotted(cfg):
    out = []
    for key, value in cfg.items():
        out += ["--speculative-config.%s" % key, value if isinstance(value, str) else json.dumps(value)]
    return out


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    return MockGpuHost(tmp_path_factory.mktemp("flags"))


SPEC_ERRORS = [
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 3}, [],
     "Value error, prompt_lookup_min=5 must be <= prompt_lookup_max=3"),
    ({"method": "eagle3", "num_speculative_tokens": 3}, [],
     "Value error, num_speculative_tokens was provided but without speculative model."),
    ({"method": "ngram", "num_speculative_tokens": 3, "tensor_parallel_size": 2}, [],
     "'tensor_parallel_size' is not a valid argument in the speculative_config. "
     "Please pass 'draft_tensor_parallel_size' instead."),
    ({"method": "eagle", "model": "org/EAGLE-m", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 3},
     ["-tp", "2"], "speculative_draft_tensor_parallel_size=3 cannot be other value than 1 or target model "
                   "tensor_parallel_size"),
    ({"method": "lookahead", "num_speculative_tokens": 3}, [],
     "method\n  Input should be 'ngram', 'draft_model', 'suffix', 'custom_class', 'eagle', 'eagle3', "
     "'extract_hidden_states', 'deepseek_mtp'"),
    ({"method": "ngram", "num_speculative_tokens": 0}, [], "Input should be greater than 0 [type=greater_than"),
    ({"method": "eagle3", "model": "org/drafter"}, [],
     "A speculative model was provided, but `num_speculative_tokens` was not provided"),
    ({"method": "ngram", "num_speculative_tokens": 2, "bogus_key": 1}, [], "bogus_key\n  Unexpected keyword argument"),
]


def spec_args(form, cfg):
    return ["--speculative-config", json.dumps(cfg)] if form == "json" else dotted(cfg)


@pytest.mark.parametrize("form", ["json", "dotted"])
@pytest.mark.parametrize("cfg,extra,message", SPEC_ERRORS)
def test_vllm_speculative_rules_give_vllms_messages(form, cfg, extra, message):
    """Every rule, through the CLI parser (both forms) and the SpeculativeConfig rules."""
    args = vllm_cli.parse(["serve", "org/m"] + spec_args(form, cfg) + extra)
    assert args.speculative_config == cfg
    with pytest.raises(vllm_spec.ConfigError) as err:
        vllm_spec.validate(args.speculative_config, args.model, args.tensor_parallel_size, lambda m: None)
    assert message in str(err.value)


@pytest.mark.parametrize("form,case", [("json", 0), ("dotted", 1), ("dotted", 4)])
def test_vllm_exits_1_with_a_traceback_before_loading(host, form, case):
    cfg, extra, message = SPEC_ERRORS[case]
    res = run_vllm(host, *(spec_args(form, cfg) + extra))
    assert res.returncode == 1, res.stderr
    assert message in res.stderr
    assert "Traceback (most recent call last):" in res.stderr
    assert "Starting vLLM API server" not in res.stdout
    assert host.holders() == []  # nothing was loaded


def test_vllm_unknown_flag_is_an_argparse_error(host):
    res = run_vllm(host, "--disable-log-requests")  # removed in vLLM 0.11
    assert res.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --disable-log-requests" in res.stderr


def test_vllm_bad_json_is_an_argparse_error(host):
    res = run_vllm(host, "--speculative-config", "{method: ngram")
    assert res.returncode == 2
    assert "argument --speculative-config: invalid loads value" in res.stderr


def test_dotted_keys_merge_over_json_and_underscores_normalise():
    args = vllm_cli.parse(["serve", "org/m", "--speculative_config", '{"method": "ngram", "prompt_lookup_max": 4}',
                           "--speculative-config.num_speculative_tokens", "3",
                           "--speculative-config.prompt_lookup_max=6", "--max_model_len", "8k"])
    assert args.speculative_config == {"method": "ngram", "prompt_lookup_max": 6, "num_speculative_tokens": 3}
    assert args.max_model_len == 8000


def test_vllm_spec_rules_resolve_like_vllm():
    warnings = []
    ngram = vllm_spec.validate({"method": "ngram", "num_speculative_tokens": 4}, "org/m", 1, warnings.append)
    assert (ngram["prompt_lookup_min"], ngram["prompt_lookup_max"]) == (5, 5)
    only_min = vllm_spec.validate({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2},
                                  "org/m", 1, warnings.append)
    assert (only_min["prompt_lookup_min"], only_min["prompt_lookup_max"]) == (2, 2)
    mtp = vllm_spec.validate({"method": "deepseek_mtp", "num_speculative_tokens": 2}, "org/m", 2, warnings.append)
    assert (mtp["method"], mtp["model"], mtp["draft_tensor_parallel_size"]) == ("mtp", "org/m", 2)
    assert "method `deepseek_mtp` is deprecated and replaced with mtp." in warnings
    detected = vllm_spec.validate({"model": "org/EAGLE3-m", "num_speculative_tokens": 3}, "org/m", 1, warnings.append)
    assert detected["method"] == "eagle3"
    plain = vllm_spec.validate({"model": "org/small-draft", "num_speculative_tokens": 3}, "org/m", 1, warnings.append)
    assert plain["method"] == "draft_model"
    assert vllm_spec.validate({"model": "ngram", "num_speculative_tokens": 3}, "org/m", 1, warnings.append)["method"] == "ngram"


def sg(*argv):
    args = build_parser().parse_args(["--model-path", "org/qwen"] + list(argv))
    return args, check_speculative(args, lambda m: None)


def test_sglang_speculative_resolution():
    args, shape = sg("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
                     "--speculative-num-steps", "4", "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", "9")
    assert args.speculative_num_draft_tokens == 5  # topk=1 forces steps + 1
    assert (shape.depth, shape.verify_tokens) == (4, 4)
    args, shape = sg("--speculative-algorithm", "eagle3", "--speculative-draft-model", "d")
    assert (args.speculative_algorithm, args.speculative_num_steps, args.speculative_eagle_topk,
            args.speculative_num_draft_tokens) == ("EAGLE3", 3, 1, 4)
    args, shape = sg("--speculative-algorithm", "NGRAM")
    assert args.speculative_num_draft_tokens == 12 and shape.depth == 11
    assert (args.speculative_ngram_min_match_window_size, args.speculative_ngram_max_bfs_breadth,
            args.speculative_ngram_match_type, args.speculative_ngram_branch_length,
            args.speculative_ngram_capacity) == (1, 10, "BFS", 18, 10000000)
    args, shape = sg("--speculative-algorithm", "NEXTN")
    assert args.speculative_algorithm == "EAGLE" and args.speculative_draft_model_path == "org/qwen"
    assert shape.method_key == "mtp"
    assert sg()[1] is None


SG_ERRORS = [
    (["--speculative-algorithm", "LOOKAHEAD"], "ValueError: Unknown speculative algorithm name: LOOKAHEAD"),
    (["--speculative-algorithm", "EAGLE"], "--speculative-draft-model-path is required"),
    (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-num-steps", "3"],
     "AssertionError"),
    (["--speculative-algorithm", "NGRAM", "--speculative-ngram-min-match-window-size", "13"],
     "speculative_ngram_min_match_window_size=13 must be >= 1 and <="),
]


@pytest.mark.parametrize("argv,message", SG_ERRORS)
def test_sglang_speculative_rules(argv, message):
    with pytest.raises(ArgsError) as err:
        sg(*argv)
    assert message in str(err.value)


@pytest.mark.parametrize("case", [0, 2])
def test_sglang_exits_1_before_serving(host, case):
    argv, message = SG_ERRORS[case]
    res = run_sglang(host, "--model-path", "org/m", *argv)
    assert res.returncode == 1
    assert message in res.stderr
    assert "Uvicorn running" not in res.stdout


def test_sglang_unknown_flag_is_an_argparse_error(host):
    res = run_sglang(host, "--model-path", "org/m", "--bogus-flag")
    assert res.returncode == 2
    assert "launch_server.py: error: unrecognized arguments: --bogus-flag" in res.stderr


def test_faults_are_keyed_by_normalised_method_case_insensitively(host, monkeypatch):
    host.set_faults({"*": {"http_5xx": 0.1, "load_seconds": 3}, "EAGLE3": {"load_seconds": 1}, "none": {"fail_start": True}})
    monkeypatch.setenv("MOCK_ENGINE_FAULTS", host.faults)
    assert settings.load_faults("eagle3") == {"http_5xx": 0.1, "load_seconds": 1}
    assert settings.load_faults("ngram") == {"http_5xx": 0.1, "load_seconds": 3}
    assert settings.load_faults("none")["fail_start"] is True


def test_production_command_lines_parse():
    v = vllm_cli.parse(["serve", "org/m", "--host", "0.0.0.0", "--port", "8001", "--served-model-name", "a", "b",
                        "-tp", "2", "--gpu-memory-utilization", "0.85", "--max-model-len", "32768",
                        "--max-num-seqs", "64", "--no-enable-prefix-caching", "--trust-remote-code",
                        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'])
    got = (v.port, v.served_model_name, v.tensor_parallel_size, v.gpu_memory_utilization, v.max_model_len,
           v.max_num_seqs, v.enable_prefix_caching, v.trust_remote_code)
    assert got == (8001, ["a", "b"], 2, 0.85, 32768, 64, False, True)
    assert vllm_cli.parse(["serve", "org/m", "--enable-prefix-caching"]).enable_prefix_caching is True
    assert vllm_cli.parse(["serve", "org/m", "--tensor-parallel-size", "4"]).port == 8000
    s = build_parser().parse_args(["--model", "org/m", "--tp", "2", "--mem-fraction-static", "0.8",
                                   "--context-length", "8192", "--served-model-name", "q", "--enable-metrics",
                                   "--speculative-algorithm", "NGRAM", "--speculative-ngram-max-trie-depth", "12",
                                   "--speculative-ngram-max-bfs-breadth", "4", "--speculative-num-draft-tokens", "8"])
    assert (s.model_path, s.tp_size, s.mem_fraction_static, s.context_length, s.served_model_name,
            s.enable_metrics, s.speculative_ngram_branch_length, s.host, s.port) == (
        "org/m", 2, 0.8, 8192, "q", True, 12, "127.0.0.1", 30000)
    assert check_speculative(s, lambda m: None).depth == 7


# ---- methods of vLLM 0.33 / SGLang 0.5.23 and batch-size schedules ---------------------------------------

def test_vllm_new_methods_resolve_like_vllm():
    warnings = []
    gpu = vllm_spec.validate({"method": "ngram_gpu", "num_speculative_tokens": 3}, "org/m", 1, warnings.append)
    assert (gpu["method"], gpu["prompt_lookup_min"], gpu["prompt_lookup_max"], gpu["profile"]) == ("ngram_gpu", 5, 5,
                                                                                                   "ngram_gpu")
    dflash = vllm_spec.validate({"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15},
                                "org/m", 2, warnings.append)
    assert (dflash["method"], dflash["num_speculative_tokens"], dflash["draft_tensor_parallel_size"],
            dflash["profile"]) == ("dflash", 15, 2, "dflash")
    block = vllm_spec.validate({"method": "dspark", "model": "deepseek-ai/dspark_qwen3_8b_block7"}, "org/m", 1,
                               warnings.append)
    assert (block["method"], block["num_speculative_tokens"]) == ("dspark", 7)
    bundled = vllm_spec.validate({"method": "dspark", "num_speculative_tokens": 5}, "org/dsv4", 1, warnings.append)
    assert bundled["model"] == "org/dsv4"
    assert vllm_spec.validate({"model": "org/qwen-dflash", "num_speculative_tokens": 7}, "org/m", 1,
                              warnings.append)["method"] == "dflash"
    for alias in ("gemma4_mtp", "qwen3_next_mtp", "glm5_next_mtp"):
        assert vllm_spec.validate({"method": alias, "num_speculative_tokens": 1}, "org/m", 1, warnings.append)[
            "method"] == "mtp"
        assert "method `%s` is deprecated and replaced with mtp." % alias in warnings


@pytest.mark.parametrize("cfg, message", [
    ({"method": "dflash", "num_speculative_tokens": 15}, "num_speculative_tokens was provided but without speculative model."),
    ({"method": "dflash", "model": "z/d"}, "A speculative model was provided, but `num_speculative_tokens` was not provided"),
    ({"method": "dspark"}, "num_speculative_tokens must be provided with speculative model unless"),
    ({"method": "ngram", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 8]]},
     "num_speculative_tokens_per_batch_size\n  Input should be a valid list"),
])
def test_vllm_new_method_refusals(cfg, message):
    with pytest.raises(vllm_spec.ConfigError) as err:
        vllm_spec.validate(cfg, "org/m", 1, lambda m: None)
    assert message in str(err.value)


def vsched(cfg, dp=1, v2=True):
    warnings = []
    spec = vllm_spec.validate(cfg, "org/m", 1, warnings.append)
    return vllm_spec.schedule(spec, dp, v2, warnings.append), warnings


def test_vllm_schedule_runs_as_the_scheduler_builds_it():
    sched, warnings = vsched({"method": "ngram", "num_speculative_tokens": 4,
                              "num_speculative_tokens_per_batch_size": [[9, 32, 2], [1, 8, 4], [33, 1048576, 0]]})
    assert sched == [(1, 8, 4), (9, 32, 2), (33, 1048576, 0)] and warnings == []
    assert [vllm_spec.k_for_batch(sched, b) for b in (1, 8, 9, 32, 33, 5000)] == [4, 4, 2, 2, 0, 0]
    # k above num_speculative_tokens is capped; a gap carries the previous k (vLLM's dense lookup).
    sched, _warn = vsched({"method": "eagle3", "model": "org/EAGLE3-m", "num_speculative_tokens": 2,
                           "num_speculative_tokens_per_batch_size": [[1, 8, 4], [17, 64, 1]]})
    assert [vllm_spec.k_for_batch(sched, b) for b in (1, 12, 17, 100)] == [2, 2, 1, 1]
    # ngram_gpu and dspark keep it on Model Runner V2 (the default), lose it on V1.
    cfg = {"method": "ngram_gpu", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 8, 3]]}
    assert vsched(cfg)[0] == [(1, 8, 3)]
    sched, warnings = vsched(cfg, v2=False)
    assert sched is None and "not supported with the 'ngram_gpu' speculative method on Model Runner V1" in warnings[-1]
    # Suffix runs on V1 only, which drops it; data parallelism drops it for every method.
    sched, warnings = vsched({"method": "suffix", "num_speculative_tokens_per_batch_size": [[1, 8, 8]]})
    assert sched is None and "'suffix' speculative method on Model Runner V1" in warnings[-1]
    sched, warnings = vsched({"method": "ngram", "num_speculative_tokens": 3,
                              "num_speculative_tokens_per_batch_size": [[1, 8, 3]]}, dp=2)
    assert sched is None and "not supported with data parallelism" in warnings[-1]


@pytest.mark.parametrize("raw, message", [
    ([[2, 8, 4]], "The first batch-size range must start at 1"),
    ([[1, 8, 4], [8, 16, 2]], "Batch-size ranges must be non-overlapping and sorted."),
    ([[1, 8, -1]], "values must be >= 0"),
    ([[8, 1, 4]], "Batch-size range start must be <= end"),
    ([[0, 8, 4]], "must be positive"),
])
def test_vllm_schedule_refusals(raw, message):
    with pytest.raises(vllm_spec.ConfigError) as err:
        vsched({"method": "ngram", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": raw})
    assert message in str(err.value) and str(err.value).startswith("ValueError: ")


def test_vllm_schedule_error_exits_1_before_loading(host):
    res = run_vllm(host, "--speculative-config", json.dumps({
        "method": "ngram", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[2, 8, 4]]}))
    assert res.returncode == 1, res.stderr
    assert "The first batch-size range must start at 1" in res.stderr
    assert host.holders() == []


def test_sglang_new_algorithms():
    args, shape = sg("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "z/d",
                     "--speculative-num-draft-tokens", "16")
    assert (args.speculative_num_steps, args.speculative_eagle_topk, shape.depth, shape.method_key) == (1, 1, 15, "dflash")
    args, shape = sg("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "z/d")
    assert args.speculative_num_draft_tokens == 16
    args, shape = sg("--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "/d",
                     "--speculative-dspark-block-size", "5")
    assert (args.speculative_num_draft_tokens, shape.depth, shape.method_key) == (6, 5, "dspark")
    assert sg("--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "/d")[0].speculative_num_draft_tokens == 8
    args, shape = sg("--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-num-draft-tokens", "5")
    assert (shape.depth, shape.topk, shape.method_key) == (4, 1, "uno")
    args, shape = sg("--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6")
    assert (shape.depth, shape.verify_tokens, shape.topk) == (3, 5, 2)
    args, shape = sg("--speculative-algorithm", "FROZEN_KV_MTP", "--speculative-draft-model-path", "g",
                     "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    assert (shape.depth, shape.method_key) == (3, "frozen_kv_mtp")
    assert shape.schedule is None


SG_NEW_ERRORS = [
    (["--speculative-algorithm", "DFLASH"], "DFLASH speculative decoding requires setting --speculative-draft-model-path."),
    (["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--speculative-dflash-block-size", "8",
      "--speculative-num-draft-tokens", "16"], "For DFLASH they must match"),
    (["--speculative-algorithm", "DSPARK"], "DSpark dense speculative decoding requires setting"),
    (["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "d", "--speculative-dspark-block-size", "5",
      "--speculative-num-draft-tokens", "5"], "must equal gamma + 1"),
    (["--speculative-algorithm", "UNO", "--speculative-num-draft-tokens", "5"], "UNO requires --uno-lora-path."),
    (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l"], "UNO requires --speculative-num-draft-tokens"),
    (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-num-draft-tokens", "5", "--tp", "2"],
     "UNO requires TP=PP=1."),
    (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-draft-model-path", "d",
      "--speculative-num-draft-tokens", "5"], "does not accept --speculative-draft-model-path"),
    (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-num-steps", "2",
      "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"], "parent-list ABI"),
    (["--speculative-algorithm", "FROZEN_KV_MTP", "--speculative-draft-model-path", "g"], "TypeError"),
]


@pytest.mark.parametrize("argv,message", SG_NEW_ERRORS)
def test_sglang_new_algorithm_rules(argv, message):
    with pytest.raises(ArgsError) as err:
        sg(*argv)
    assert message in str(err.value)


def adaptive_file(tmp_path, cfg):
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_sglang_adaptive_schedule(tmp_path):
    path = adaptive_file(tmp_path, {"1": {"candidate_steps": [4]}, "9": {"candidate_steps": [2]},
                                    "33": {"candidate_steps": [0]}})
    args, shape = sg("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
                     "--speculative-num-steps", "4", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                     "5", "--speculative-adaptive", "--speculative-adaptive-config", path)
    assert shape.schedule == [(1, 8, 4), (9, 32, 2), (33, None, 0)] and args.speculative_adaptive
    # Steps unset: the middle candidate; NEXTN is EAGLE, so it takes a schedule too.
    args, shape = sg("--speculative-algorithm", "NEXTN", "--speculative-adaptive", "--speculative-adaptive-config", path)
    assert (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens) == (2, 1, 3)
    assert shape.schedule == [(1, 8, 4), (9, 32, 2), (33, None, 0)]
    # No file: SGLang's default tiers (stop speculating from batch 64).
    args, shape = sg("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--speculative-adaptive")
    assert shape.schedule[-1] == (64, None, 0)


@pytest.mark.parametrize("argv, reason", [
    (["--speculative-algorithm", "NGRAM"], "only EAGLE/EAGLE3"),
    (["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "d"], "only EAGLE/EAGLE3"),
    (["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d"], "only EAGLE/EAGLE3"),
    (["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--speculative-num-steps", "3",
      "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"], "only topk=1"),
    (["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--enable-two-batch-overlap"],
     "enable_two_batch_overlap"),
    (["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--enable-dp-attention"], "attention DP"),
])
def test_sglang_switches_adaptive_off_with_a_warning(tmp_path, argv, reason):
    warnings = []
    args = build_parser().parse_args(["--model-path", "org/qwen"] + argv + [
        "--speculative-adaptive", "--speculative-adaptive-config", adaptive_file(tmp_path, {"1": {"candidate_steps": [3]}})])
    shape = check_speculative(args, warnings.append)
    assert args.speculative_adaptive is False and shape.schedule is None
    assert any(w.startswith("speculative_adaptive disabled: ") and reason in w for w in warnings), warnings


@pytest.mark.parametrize("cfg, extra, message", [
    ({"1": {"candidate_steps": [-1]}}, [], "candidate_steps must be a list of non-negative ints"),
    ({"x": 1}, [], "must contain at least one integer-string BS key"),
    ({"1": {"candidate_steps": [2, 4]}}, ["--speculative-num-steps", "3"], "is not in the adaptive config candidate_steps"),
])
def test_sglang_adaptive_refusals(tmp_path, cfg, extra, message):
    with pytest.raises(ArgsError) as err:
        sg("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--speculative-adaptive",
           "--speculative-adaptive-config", adaptive_file(tmp_path, cfg), *extra)
    assert message in str(err.value)
    with pytest.raises(ArgsError, match="FileNotFoundError"):
        sg("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--speculative-adaptive",
           "--speculative-adaptive-config", str(tmp_path / "missing.json"))
