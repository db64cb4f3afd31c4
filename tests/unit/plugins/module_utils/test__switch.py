# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch role's own settings pass the gate too (suite, benchmark, paths)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _group, _switch

GOOD = {"suite": "reasoning", "bench_api": "completions", "bench_concurrency": [8, 1, 1], "bench_requests": "8",
        "bench_warmup": 1, "bench_max_tokens": 256, "bench_timeout": 120, "missing_baseline": "measure",
        "reclaim_scope": "gpu", "reclaim_verify_timeout": 60, "state_dir": "/var/lib/llmops-specdec",
        "lock_path": "/run/llmops-specdec.lock", "lock_wait": 0, "textfile_dir": ""}


def test_good_settings_come_back_typed():
    out = _switch.settings(GOOD)
    assert out["bench_concurrency"] == [1, 8] and out["bench_requests"] == 8 and out["textfile_dir"] == ""
    assert out["levels_observe"] == 10 and out["levels_max"] == 64


def test_no_levels_named_means_levels_from_the_running_gauge():
    out = _switch.settings(dict(GOOD, bench_concurrency=[], levels_observe="5", levels_max=32))
    assert out["bench_concurrency"] == [] and out["levels_observe"] == 5.0 and out["levels_max"] == 32


@pytest.mark.parametrize("key, value, match", [
    ("suite", "reasoning\n# HELP x", "spec_switch_suite must be one of"),
    ("levels_observe", -1, "spec_switch_levels_observe must be >= 0.0 and <= 3600.0"),
    ("levels_max", 0, "spec_switch_levels_max must be between 1"),
    ("bench_concurrency", [1, True], "spec_switch_bench_concurrency[1] must be an integer"),
    ("bench_requests", 0, "spec_switch_bench_requests must be between 1"),
    ("bench_timeout", "inf", "spec_switch_bench_timeout must be a number"),
    ("reclaim_scope", "all", "spec_switch_reclaim_scope must be one of unit, gpu"),
    ("state_dir", "/var/lib/x\n", "spec_switch_state_dir contains a control"),
    ("lock_path", "run/lock", "spec_switch_lock_path must be an absolute path"),
    ("textfile_dir", "/var/lib/../tmp", "spec_switch_textfile_dir must be a normalised path"),
])
def test_bad_settings_are_refused_naming_the_variable(key, value, match):
    with pytest.raises(_gate.GateError) as info:
        _switch.settings(dict(GOOD, **{key: value}))
    assert match in str(info.value)


def test_a_serving_group_switches_whole_but_is_refused_a_sweep_a_tune_and_parking():
    """_group.node's output for a node of a group passes a plain switch (group.yml switches the group whole) and stops
    a sweep, a tune and a parked switch at the gate; a host alone (None) passes them all."""
    group = _group.node("vllm", ["gpu-a01", "gpu-a02"], "gpu-a01", "", None, 2)
    assert _switch.settings(dict(GOOD, serving_group=group))["serving_group"]["nnodes"] == 2
    for extra, what in (({"operation": "sweep"}, "a sweep of a serving group"),
                        ({"operation": "tune"}, "a tune of a serving group"),
                        ({"park": True, "server_unit": "vllm-server.service", "server_port": "8000"},
                         "parking a serving group")):
        with pytest.raises(_gate.GateError, match=r"node 0 of a serving group of 2 \(spec_server_nodes: gpu-a01, "
                                                  r"gpu-a02\): " + what):
            _switch.settings(dict(GOOD, serving_group=group, **extra))
        assert _switch.settings(dict(GOOD, serving_group=None, **extra))["serving_group"] is None
    with pytest.raises(_gate.GateError, match="operation must be one of switch, sweep, tune"):
        _switch.settings(dict(GOOD, operation="nightly"))


def test_park_settings_default_to_production_port_plus_one_and_its_own_unit():
    off = _switch.settings(GOOD)
    assert off["park"] is False and "park_unit" not in off
    out = _switch.settings(dict(GOOD, park=True, server_unit="vllm-server.service", server_port="8000"))
    assert (out["park_unit"], out["park_port"], out["park_share"]) == ("vllm-server-candidate.service", 8001, 0.9)
    shared = _switch.settings(dict(GOOD, park="yes", server_unit="sg.service", server_port=30000, server_share=0.7,
                                   park_port=31000))
    assert (shared["park_port"], shared["park_share"]) == (31000, 0.7)


@pytest.mark.parametrize("extra,match", [
    ({"park_port": 8000}, "spec_switch_park_port must differ from spec_server_port"),
    ({"park_unit": "vllm-server.service"}, "spec_switch_park_unit must differ"),
    ({"park_unit": "x;rm -rf /.service"}, "spec_switch_park_unit"),
    ({"park_port": 70000}, "spec_switch_park_port"),
    ({"park_share": 1.5}, "spec_switch_park_share"),
])
def test_park_settings_refuse_production_own_unit_or_port_and_bad_values(extra, match):
    values = dict(GOOD, park=True, server_unit="vllm-server.service", server_port=8000, **extra)
    with pytest.raises(_gate.GateError, match=match):
        _switch.settings(values)


@pytest.mark.parametrize("unit", ["sshd.service", "systemd-journald.service",
                                  "candidate.service", "getty@tty1.service"])
def test_the_park_unit_is_only_a_name_of_the_collections_pattern(unit):
    # issue 31, item 3: the park flow writes and later removes this unit; sshd.service must never be it
    values = dict(GOOD, park=True, server_unit="vllm-server.service", server_port=8000, park_unit=unit)
    with pytest.raises(_gate.GateError, match="spec_switch_park_unit must be a candidate unit of the collection's "
                                              "pattern NAME-candidate.service"):
        _switch.settings(values)
    ok = _switch.settings(dict(values, park_unit="vllm-a-candidate.service"))
    assert ok["park_unit"] == "vllm-a-candidate.service"


# ---------------------------------------------------------------- the operator's prompts (issue 32, item 5)

import json  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _suites  # noqa: E402

SECRET = "customer 4711 asked about invoice INV-99"
CHAT = {"model": "qwen3-32b", "max_tokens": 512, "temperature": 0.7, "user": "u-123",
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": [{"type": "text", "text": SECRET}, {"type": "image_url", "image_url": {"url": "x"}}]}]}
COMPLETION = {"model": "qwen3-32b", "prompt": ["def f(x):", "class A:"], "max_tokens": 64}


def _write(tmp_path, lines, name="requests.jsonl"):
    path = tmp_path / name
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return str(path)


def test_a_request_log_gives_its_prompt_texts_and_only_counts_and_a_digest_are_reported(tmp_path):
    batch = {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}}
    tokens = {"model": "m", "prompt": [1, 2, 3]}
    path = _write(tmp_path, [CHAT, COMPLETION, batch, tokens, ""])
    prompts, source = _switch.prompts_source(path)
    assert prompts == [("chat", "system: You are terse.\nuser: " + SECRET), ("completions", "def f(x):"),
                       ("completions", "class A:"), ("chat", "user: hello there")]
    digest = __import__("hashlib").sha256(open(path, "rb").read()).hexdigest()
    assert source == {"source": "request_log", "name": "requests.jsonl", "sha256": digest, "bytes": len(open(path, "rb").read()),
                      "prompts": 4, "skipped": 1, "truncated": 0, "categories": {"chat": 2, "completions": 2},
                      "synthetic": False, "suite": "ops-" + digest[:12]}
    assert SECRET not in json.dumps(source)
    # what travels to the host: the prompts only, read back by the benchmark's own parser; nothing of the
    # request beyond them (model, user id, sampling)
    text = _suites.prompts_jsonl(prompts)
    assert _suites.parse_prompts_file(text) == prompts and "u-123" not in text and "0.7" not in text


def test_a_prompts_file_is_read_as_the_benchmark_reads_it(tmp_path):
    path = _write(tmp_path, ["# ours", "Summarise the incident report", "Refactor load_users\\nkeep the API"], "p.txt")
    prompts, source = _switch.prompts_source(path, "auto")
    assert prompts == [("file", "Summarise the incident report"), ("file", "Refactor load_users\nkeep the API")]
    assert source["source"] == "prompts_file" and source["prompts"] == 2 and source["synthetic"] is False
    jsonl = _write(tmp_path, [{"prompt": "a", "category": "coding"}], "p.jsonl")
    assert _switch.prompts_source(jsonl)[1]["source"] == "prompts_file"
    # the operator may say which: the same JSON lines as requests have no request key, so no prompt
    with pytest.raises(_gate.GateError, match="holds no prompt [(]1 request[(]s[)] without a text prompt[)]"):
        _switch.prompts_source(_write(tmp_path, [{"text": "a"}], "r.jsonl"), "requests")


def test_no_file_is_the_shipped_suite_and_says_it_is_synthetic():
    prompts, source = _switch.prompts_source("", "auto", "coding")
    assert prompts == [] and source["source"] == "suite" and source["synthetic"] is True
    assert source["suite"] == "coding" and source["prompts"] == len(_suites.suite_prompts("coding"))


@pytest.mark.parametrize("lines, fmt, match", [
    ([CHAT, "{not json"], "auto", "line 2: invalid JSON"),
    ([CHAT, "[1, 2]"], "requests", "line 2: not a JSON object"),
    ([{"prompt": ""}], "prompts", r"line 1: no \"prompt\" string"),
    ([{"model": "m", "prompt": [1, 2]}], "auto", "holds no prompt"),
    ([CHAT], "yaml", "spec_switch_prompts_format must be one of auto, prompts, requests"),
])
def test_a_bad_source_is_refused_naming_the_variable_and_the_line_never_the_text(tmp_path, lines, fmt, match):
    path = _write(tmp_path, lines)
    with pytest.raises(_gate.GateError, match=match) as err:
        _switch.prompts_source(path, fmt)
    assert SECRET not in str(err.value)
    if "format" not in match:
        assert str(err.value).startswith("spec_switch_prompts_file %s: " % path)


def test_a_missing_relative_or_oversized_file_is_refused(tmp_path, monkeypatch):
    with pytest.raises(_gate.GateError, match="cannot be read on the controller: No such file"):
        _switch.prompts_source(str(tmp_path / "nope.jsonl"))
    with pytest.raises(_gate.GateError, match="must be an absolute path"):
        _switch.prompts_source("prompts.txt")
    monkeypatch.setattr(_suites, "MAX_OPERATOR_BYTES", 10)
    with pytest.raises(_gate.GateError, match="more than the 10 a prompts source may have"):
        _switch.prompts_source(_write(tmp_path, ["a prompt longer than ten bytes"]))


def test_more_prompts_than_kept_are_cut_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(_suites, "MAX_OPERATOR_PROMPTS", 2)
    prompts, source = _switch.prompts_source(_write(tmp_path, ["a", "b", "c"], "p.txt"))
    assert [p for _c, p in prompts] == ["a", "b"] and source["prompts"] == 2 and source["truncated"] == 1
