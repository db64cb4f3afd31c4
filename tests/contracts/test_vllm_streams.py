# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM 0.33's own streaming generators judge the mock's SSE chunks and the collection's SSE parser.

The real `OpenAIServingCompletion.completion_stream_generator` and
`OpenAIServingChat.chat_completion_stream_generator` are driven with real `RequestOutput`s (one per
engine step, several tokens per step as under speculation); what they yield is exactly what
`vllm serve` writes to the socket. The serving objects are built without an engine (`__new__` plus the
attributes those generators read), since an engine needs a GPU.
"""
from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("vllm")

# pylint: disable=wrong-import-position
from vllm.entrypoints.generate.base.protocol import RequestResponseMetadata  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import (ChatCompletionRequest,  # noqa: E402
                                                               ChatCompletionStreamResponse)
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402
from vllm.entrypoints.openai.completion.protocol import CompletionRequest, CompletionStreamResponse  # noqa: E402
from vllm.entrypoints.openai.completion.serving import OpenAIServingCompletion  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402

from conftest import MOCK, collection_bench  # noqa: E402

_bench = collection_bench()

OPTIONS = {
    "none": None,
    "usage": {"include_usage": True},
    "usage+continuous": {"include_usage": True, "continuous_usage_stats": True},
    "continuous only": {"continuous_usage_stats": True},
}
STEPS = [1, 3, 1, 4, 2, 1]  # tokens per engine step: prefill token, then 1 + accepted drafts
PROMPT_IDS = [11, 12, 13, 14]

_SERVING_ATTRS = dict(enable_force_include_usage=False, enable_log_outputs=False, request_logger=None,
                      system_fingerprint=None, enable_prompt_tokens_details=False, enable_per_request_metrics=False,
                      parser_cls=None, enable_auto_tools=False, response_role="assistant",
                      _include_reasoning_tokens_details=False)


def _serving(cls):
    obj = object.__new__(cls)
    for key, value in _SERVING_ATTRS.items():
        setattr(obj, key, value)
    return obj


def _outputs(steps, finish="length"):
    n = 0
    for k, count in enumerate(steps):
        last = k == len(steps) - 1
        ids = list(range(100 + n, 100 + n + count))
        n += count
        yield RequestOutput("req", "hello world", PROMPT_IDS, None,
                            [CompletionOutput(0, "".join(" w%d" % i for i in ids), ids, None, None,
                                              finish_reason=finish if last else None)],
                            finished=last)


def real_sse(api, options, steps=tuple(STEPS)):
    """The SSE events (strings, `data: ...\\n\\n` each) vLLM writes for this request."""
    async def results(with_index):
        for out in _outputs(steps):
            yield (0, out) if with_index else out

    async def collect(gen):
        return [event async for event in gen]

    meta = RequestResponseMetadata(request_id="req")
    if api == "completions":
        req = CompletionRequest(model="m", prompt="hello world", stream=True, max_tokens=sum(steps),
                                stream_options=options)
        gen = _serving(OpenAIServingCompletion).completion_stream_generator(
            req, [None], results(True), "cmpl-req", 1, "m", 1, None, meta)
    else:
        req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hello world"}], stream=True,
                                    max_tokens=sum(steps), stream_options=options)
        gen = _serving(OpenAIServingChat).chat_completion_stream_generator(req, results(False), "chatcmpl-req", "m",
                                                                           [], None, meta)
    return asyncio.run(collect(gen))


def _payloads(events):
    out = []
    for event in events:
        assert event.startswith("data: ") and event.endswith("\n\n"), event
        data = event[6:-2]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _shape(value):
    """Keys (in order) all the way down, values dropped: the layout of a chunk."""
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return None


def _kinds(payloads):
    """Chunk layouts keyed by their role in the stream."""
    kinds = {}
    for obj in payloads:
        if obj == "[DONE]":
            kind = "done"
        elif not obj["choices"]:
            kind = "usage"
        else:
            choice = obj["choices"][0]
            if "delta" in choice and "role" in choice["delta"]:
                kind = "role"
            elif choice.get("finish_reason") is not None:
                kind = "final"
            else:
                kind = "token"
        kinds.setdefault(kind, _shape(obj))
    return kinds


def _reads(events, gap_ns=1000000):
    """The events as socket reads, one per event, `gap_ns` apart (event i arrives at (i+1)*gap)."""
    return [((i + 1) * gap_ns, ev.encode()) for i, ev in enumerate(events)]


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_real_stream_parses_in_spec_bench_to_the_engines_counts_and_times(api, option):
    events = real_sse(api, OPTIONS[option])
    result = _bench.RequestResult()
    assert _bench.parse_stream(_reads(events), 0, result)  # ends with [DONE]
    first_token_event = 2 if api == "chat" else 1  # the chat stream opens with a role-only chunk
    times = [(first_token_event + i) * 1000000 for i in range(len(STEPS))]
    assert result.error is None
    assert result.chunk_times_ns == times
    assert result.ttft_ns == times[0] and result.last_token_ns == times[-1]
    if OPTIONS[option] and OPTIONS[option].get("include_usage"):
        assert (result.output_tokens, result.tokens_source, result.prompt_tokens) == (sum(STEPS), "usage", 4)
    else:  # no usage: spec_bench counts chunks, a lower bound under speculation, and says so
        assert (result.output_tokens, result.tokens_source) == (len(STEPS), "chunks")
    if option == "usage+continuous":
        assert result.chunk_tokens == STEPS
        assert _bench.token_latencies_ms(result) == [1.0 / k for k in STEPS[1:] for _token in range(k)]
    else:
        assert result.chunk_tokens is None
    result.ok = True
    if result.tokens_source == "usage":
        assert _bench.tpot_ms(result) == pytest.approx((len(STEPS) - 1) * 1.0 / (sum(STEPS) - 1))


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_continuous_usage_needs_include_usage(api):
    """vllm/entrypoints/serve/utils/api_utils.py should_include_usage: continuous only with include_usage."""
    assert not any("usage" in p for p in _payloads(real_sse(api, OPTIONS["continuous only"]))[:-1])


@pytest.fixture(scope="module")
def mock_vllm(mock_host):
    engine = MOCK.Engine.vllm(mock_host, "--served-model-name", "m", "--speculative-config",
                              json.dumps({"method": "ngram", "num_speculative_tokens": 4}),
                              env=mock_host.env(CUDA_VISIBLE_DEVICES="0"))
    engine.wait_ready()
    yield engine
    engine.kill_group()


def mock_sse(engine, api, options, max_tokens=24):
    """Raw SSE events of one mock request, split as the server wrote them."""
    body = {"model": "m", "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "temperature": 0}
    if options is not None:
        body["stream_options"] = options
    if api == "chat":
        body["messages"] = [{"role": "user", "content": MOCK.REPETITIVE}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = MOCK.REPETITIVE
        path = "/v1/completions"
    conn = MOCK.http.client.HTTPConnection("127.0.0.1", engine.port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("content-type").startswith("text/event-stream")
        raw = resp.read().decode()
    finally:
        conn.close()
    return [block + "\n\n" for block in raw.split("\n\n") if block]


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_mock_chunks_are_the_engines_chunks(mock_vllm, api, option):
    """Every mock chunk validates against the real protocol model and has the layout (keys, order) of
    the chunk vLLM writes in the same place of the stream."""
    model = CompletionStreamResponse if api == "completions" else ChatCompletionStreamResponse
    mock = _payloads(mock_sse(mock_vllm, api, OPTIONS[option]))
    for obj in mock[:-1]:
        model.model_validate(obj)
    assert mock[-1] == "[DONE]"
    assert _kinds(mock) == _kinds(_payloads(real_sse(api, OPTIONS[option])))
    assert max(MOCK.chunk_tokens([(0, p) for p in mock])) > 1  # speculation: several tokens in one chunk


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_mock_stream_parses_in_spec_bench_like_the_real_one(mock_vllm, api):
    events = mock_sse(mock_vllm, api, OPTIONS["usage+continuous"], max_tokens=30)
    result = _bench.RequestResult()
    assert _bench.parse_stream(_reads(events), 0, result)
    tokens = MOCK.chunk_tokens([(0, p) for p in _payloads(events)])
    assert result.output_tokens == 30 == sum(tokens)
    assert result.chunk_tokens == tokens
    assert result.chunks == len(tokens)
