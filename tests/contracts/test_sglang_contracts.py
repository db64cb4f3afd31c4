# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang 0.5.23's own code judges the mock SGLang: streams, API keys, metrics, accept length, titles.

The sglang venv (tests/engines/sglang-cpu-pins.txt) has no fastapi, openai or prometheus_client, so
SGLang's OpenAI serving modules, its protocol models and its metrics collector cannot be imported
here. What runs for real: `sse_utils.build_sse_content` (the chat chunk builder, msgspec only),
`utils.auth.decide_request_auth`, and single functions compiled from the wheel's source text
(`should_include_usage`, the scheduler's accept-length bookkeeping). The rest is compared against
the wheel's source text, never against a copy of ours.
"""
from __future__ import annotations

import ast
import json
import types

import pytest

pytest.importorskip("sglang.srt")  # the real SGLang (the mock launcher is also called sglang)

# pylint: disable=wrong-import-position
from sglang.srt.entrypoints.openai import sse_utils  # noqa: E402
from sglang.srt.utils import auth  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_sglang, _prom  # noqa: E402

from conftest import MOCK, collection_bench, real_function, wheel_file  # noqa: E402


# The engine's metric name and reader, from their adapters (moved out of _prom with the engine adapters).
def sglang_gauge(samples):
    return _prom.gauge_mean(samples, _engine_sglang.ACCEPTANCE_METRICS['gauge'])


_bench = collection_bench()
OPTIONS = {
    "none": None,
    "usage": {"include_usage": True},
    "usage+continuous": {"include_usage": True, "continuous_usage_stats": True},
    "continuous only": {"continuous_usage_stats": True},
}


@pytest.fixture(scope="module")
def mock_sglang(mock_host):
    engine = MOCK.Engine.sglang(mock_host, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                                "org/eagle3-head", "--enable-metrics", "--api-key", "k1",
                                env=mock_host.env(CUDA_VISIBLE_DEVICES="5"))
    engine.wait_ready()
    yield engine
    engine.kill_group()


def _request(engine, method, path, body=None, key="k1"):
    conn = MOCK.http.client.HTTPConnection("127.0.0.1", engine.port, timeout=30)
    try:
        headers = {"content-type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer %s" % key
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _events(engine, api, options, max_tokens=24):
    body = {"max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    if options is not None:
        body["stream_options"] = options
    if api == "chat":
        body["messages"] = [{"role": "user", "content": MOCK.REPETITIVE}]
    else:
        body["prompt"] = MOCK.REPETITIVE
    code, raw = _request(engine, "POST", "/v1/chat/completions" if api == "chat" else "/v1/completions", body)
    assert code == 200
    return [block + "\n\n" for block in raw.decode().split("\n\n") if block]


def _payloads(events):
    return [ev[6:-2] if ev[6:-2] == "[DONE]" else json.loads(ev[6:-2]) for ev in events]


# -- streams --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option", list(OPTIONS))
def test_usage_options_mean_what_sglang_makes_of_them(mock_sglang, option):
    """entrypoints/openai/utils.py should_include_usage: unlike vLLM, continuous_usage_stats works
    without include_usage."""
    should_include_usage = real_function("sglang", "srt/entrypoints/openai/utils.py", "should_include_usage",
                                         {"StreamOptions": object})
    opts = OPTIONS[option]
    stream_options = types.SimpleNamespace(**dict({"include_usage": False, "continuous_usage_stats": False}, **opts)) if opts else None
    include, continuous = should_include_usage(stream_options, False)
    mock = _payloads(_events(mock_sglang, "completions", opts))[:-1]
    assert any(not p["choices"] for p in mock) == bool(include)  # the trailing usage chunk
    assert all(p.get("usage") is not None for p in mock if p["choices"]) == bool(continuous)


def _shape(value):
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return None


def test_chat_chunks_are_what_build_sse_content_writes(mock_sglang):
    """serving_chat.py opens with build_sse_content(role="assistant", content="") and streams the text
    through build_sse_content; the mock's chunks have the same keys in the same order."""
    source = wheel_file("sglang", "srt/entrypoints/openai/serving_chat.py")
    assert 'role="assistant",\n                        content="",' in source
    mock = _payloads(_events(mock_sglang, "chat", OPTIONS["usage"]))
    role = json.loads(sse_utils.build_sse_content("id", 1, "m", 0, role="assistant", content="")[6:-2])
    token = json.loads(sse_utils.build_sse_content("id", 1, "m", 0, content=" a")[6:-2])
    final = json.loads(sse_utils.build_sse_content("id", 1, "m", 0, content=" b", finish_reason="length")[6:-2])
    assert _shape(mock[0]) == _shape(role) and mock[0]["choices"][0]["delta"]["content"] == ""
    assert _shape(mock[1]) == _shape(token)
    assert _shape(mock[-3]) == _shape(final) and mock[-3]["choices"][0]["finish_reason"] == "length"
    assert mock[-1] == "[DONE]" and mock[-2]["choices"] == []


def _fields(source, cls_name):
    """Field names, in order, of a pydantic model class in source text."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)]


def test_completion_chunks_have_the_protocol_fields():
    """protocol.py (not importable here: it needs openai): a completion chunk is
    CompletionStreamResponse.model_dump_json(), hidden_states/token_ids/prompt_token_ids/sglext popped
    when None. Skipped: validating the mock's chunks against the models themselves."""
    source = wheel_file("sglang", "srt/entrypoints/openai/protocol.py")
    assert _fields(source, "CompletionResponseStreamChoice") == [
        "index", "text", "logprobs", "finish_reason", "matched_stop", "hidden_states", "token_ids", "prompt_token_ids"]
    assert _fields(source, "CompletionStreamResponse") == ["id", "object", "created", "model", "choices", "usage", "sglext"]
    assert 'yield f"data: {chunk.model_dump_json()}\\n\\n"' in wheel_file(
        "sglang", "srt/entrypoints/openai/serving_completions.py")


def test_mock_completion_chunks_have_that_layout(mock_sglang):
    mock = _payloads(_events(mock_sglang, "completions", OPTIONS["none"]))
    assert list(mock[0]) == ["id", "object", "created", "model", "choices", "usage"]
    assert list(mock[0]["choices"][0]) == ["index", "text", "logprobs", "finish_reason", "matched_stop"]


def test_chat_built_by_sglang_parses_in_spec_bench_to_its_counts_and_times():
    steps = [1, 3, 2, 4, 1]
    usage = {"prompt_tokens": 7, "total_tokens": 7, "completion_tokens": 0}
    events = [sse_utils.build_sse_content("id", 1, "m", 0, role="assistant", content="")]
    done = 0
    for k, count in enumerate(steps):
        done += count
        usage = dict(usage, completion_tokens=done, total_tokens=7 + done)
        events.append(sse_utils.build_sse_content("id", 1, "m", 0, content=" w" * count, usage=usage,
                                                  finish_reason="length" if k == len(steps) - 1 else None))
    usage_chunk = {"id": "id", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [], "usage": usage}
    events.append("data: %s\n\n" % json.dumps(usage_chunk))
    events.append("data: [DONE]\n\n")
    result = _bench.RequestResult()
    assert _bench.parse_stream([((i + 1) * 1000, ev.encode()) for i, ev in enumerate(events)], 0, result)
    assert result.chunk_tokens == steps and result.output_tokens == sum(steps)
    assert result.chunk_times_ns == [(i + 2) * 1000 for i in range(len(steps))]  # after the role chunk


# -- API keys -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/health", "/health_generate", "/metrics", "/v1/models", "/get_server_info",
                                  "/server_info", "/version", "/nope"])
@pytest.mark.parametrize("key", [None, "k1", "wrong"])
def test_api_key_decisions_are_sglangs(mock_sglang, path, key):
    decision = auth.decide_request_auth(method="GET", path=path, authorization_header="Bearer %s" % key if key else None,
                                        api_key="k1", admin_api_key=None, auth_level=auth.AuthLevel.NORMAL)
    code, body = _request(mock_sglang, "GET", path, key=key)
    if decision.allowed:
        assert code != 401
    else:
        assert (code, json.loads(body)) == (decision.error_status_code, {"error": "Unauthorized"})


# -- metrics and accept length ----------------------------------------------------------------------------

def _real_metric_families():
    """{name: type} of every sglang: metric the collector defines (source text)."""
    out = {}
    tree = ast.parse(wheel_file("sglang", "srt/observability/metrics_collector.py"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Gauge", "Counter", "Histogram"):
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                    out[kw.value.value] = node.func.id.lower()
    return out


def _label_sets():
    """Key lists of the dict literals that start with model_name, engine_type (the collectors' labels)."""
    sets = []
    for node in ast.walk(ast.parse(wheel_file("sglang", "srt/observability/metrics_collector.py"))):
        if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) for k in node.keys):
            keys = [k.value for k in node.keys]
            if keys[:2] == ["model_name", "engine_type"]:
                sets.append(keys)
    return sets


def test_mock_metrics_are_sglangs_names_types_and_labels(mock_sglang):
    real = _real_metric_families()
    code, raw = _request(mock_sglang, "GET", "/metrics", key=None)
    assert code == 200
    text = raw.decode()
    types_seen = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _hash, _type, name, kind = line.split()
            if not name.endswith("_created"):
                types_seen[name] = kind
    for name, kind in types_seen.items():
        assert real.get(name) == kind, name  # counters: the collector names them with `_total`
    sets = _label_sets()
    assert ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"] in sets  # scheduler gauges
    assert ["model_name", "engine_type"] in sets  # tokenizer metrics
    for name, labels, _value in _prom.parse_text_small(text):
        keys = [k for k in labels if k not in ("le", "is_streaming", "cache_source")]
        assert keys in sets, (name, keys)
    assert sglang_gauge(_prom.parse_text_small(text)) is not None


def test_the_prefix_cache_counters_the_adapter_reads_are_sglangs():
    """PREFIX_CACHE_METRICS (the verdict's prefix-cache guardrail): counters of the collector, the cached tokens' with
    the cache_source label the mock gives them too."""
    real = _real_metric_families()
    for key in ("hits", "queries"):
        name = _engine_sglang.PREFIX_CACHE_METRICS[key]
        assert real.get(name) == "counter", name  # SGLang's collector names its counters with `_total`
    source = wheel_file("sglang", "srt/observability/metrics_collector.py")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Counter" and any(
                kw.arg == "name" and getattr(kw.value, "value", None) == "sglang:cached_tokens_total" for kw in node.keywords):
            labelnames = next(kw.value for kw in node.keywords if kw.arg == "labelnames")
            assert "cache_source" in ast.unparse(labelnames)
            break
    else:
        raise AssertionError("no sglang:cached_tokens_total Counter in the collector")


def test_avg_spec_accept_length_is_what_the_scheduler_computes(mock_host):
    """metrics_reporter.update_spec_metrics adds each verify batch (bs, generated tokens) and
    internal_state._average_accept_length divides the totals; run on the mock's own steps (the tokens
    per chunk of a stream on a fresh server), they give the mock's /get_server_info figure."""
    update = real_function("sglang", "srt/managers/scheduler_components/metrics_reporter.py",
                           "SchedulerMetricsReporter.update_spec_metrics")
    average = real_function("sglang", "srt/managers/scheduler_components/internal_state.py",
                            "SchedulerInternalStateController._average_accept_length")
    engine = MOCK.Engine.sglang(mock_host, "--speculative-algorithm", "NGRAM", env=mock_host.env(CUDA_VISIBLE_DEVICES="4"))
    try:
        engine.wait_ready()
        events = _events(engine, "completions", OPTIONS["usage+continuous"], max_tokens=40)
        tokens = MOCK.chunk_tokens([(0, p) for p in _payloads(events)])
        reporter = types.SimpleNamespace(spec_num_accept_tokens=0, spec_num_correct_drafts=0, spec_num_forward_ct=0,
                                         spec_num_block_accept_tokens=0, spec_num_cap_tokens=0)
        for count in tokens[1:]:  # the first token comes from prefill, every later chunk is one verify step
            update(reporter, 1, count - 1, num_accept_tokens=count)
        reporter.spec_total_num_accept_tokens = reporter.spec_num_accept_tokens  # the periodic flush
        reporter.spec_total_num_forward_ct = reporter.spec_num_forward_ct
        scheduler = types.SimpleNamespace(metrics_reporter=reporter,
                                          spec_algorithm=types.SimpleNamespace(is_none=lambda: False))
        want = average(types.SimpleNamespace(scheduler=scheduler))
        code, body = _request(engine, "GET", "/get_server_info", key=None)
        assert code == 200
        assert json.loads(body)["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(want)
    finally:
        engine.kill_group()


# -- readiness and process titles ----------------------------------------------------------------------------

def test_health_is_503_while_starting_in_sglangs_source():
    source = wheel_file("sglang", "srt/entrypoints/http_server.py")
    assert '@app.get("/health")\n@app.get("/health_generate")' in source
    assert "if _global_state.tokenizer_manager.server_status == ServerStatus.Starting:\n" \
           "        return Response(status_code=503)" in source


@pytest.mark.parametrize("tp", [1, 2])
def test_process_titles_and_tree_are_sglangs(mock_host, tp):
    """managers/scheduler.py: `sglang::scheduler` + `_TP<r>` only when tp_size > 1;
    detokenizer_manager.py: `sglang::detokenizer`; both children of the launching process."""
    sched = wheel_file("sglang", "srt/managers/scheduler.py")
    assert "if parallel.tp_size > 1:\n        prefix += f\" TP{shown_tp}\"" in sched
    assert "setproctitle.setproctitle(f\"sglang::scheduler{prefix.replace(' ', '_')}\")" in sched
    assert 'setproctitle.setproctitle("sglang::detokenizer")' in wheel_file("sglang", "srt/managers/detokenizer_manager.py")
    want = sorted(["sglang::scheduler" + ("_TP%d" % r if tp > 1 else "") for r in range(tp)] + ["sglang::detokenizer"])
    engine = MOCK.Engine.sglang(mock_host, "--tp", str(tp), env=mock_host.env(CUDA_VISIBLE_DEVICES="6,7"))
    try:
        engine.wait_ready()
        assert sorted(MOCK.argv0(p) for p in MOCK.children(engine.proc.pid)) == want
    finally:
        engine.kill_group()


def test_the_running_request_gauge_the_levels_are_read_from_is_sglangs(mock_sglang):
    """Issue 32, item 4: the adapter's RUNNING_GAUGE is a gauge SGLang's collector defines, on the scheduler's labels
    it filters on, and the collection reads it from the mock (idle: 0 running)."""
    gauge = _engine_sglang.RUNNING_GAUGE
    assert _real_metric_families()[gauge["name"]] == "gauge"
    assert any(set(gauge["only"]) <= set(keys) for keys in _label_sets())
    code, raw = _request(mock_sglang, "GET", "/metrics", key=None)
    assert code == 200
    assert _prom.gauge_sum(_prom.parse_text_small(raw.decode()), gauge["name"], gauge["only"]) == 0.0
