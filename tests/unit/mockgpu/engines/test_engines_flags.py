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
