# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_bench_stream: one streaming request, its deadline, its byte caps and its SSE parsing.

Streams come from a real HTTP server on 127.0.0.1 (sse_server.py) that writes scripted bytes, so
chunk boundaries, pauses, faults and cuts are exact. No assertion depends on how fast this
machine is: delays are only used as lower bounds ("the first token cannot come before the server
sent it"), to force separate socket reads, or as generous upper bounds of a run that would
otherwise never end.
"""
from __future__ import annotations

import json
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench_stats, _bench_stream, _http
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import (
    DONE, SSEServer, closed_port_url, completion_event, simple_plan, usage_event,
)


TRANSPORTS = {'direct': _http.DirectTransport, 'ansible_urls': _http.AnsibleTransport}


@pytest.fixture(params=sorted(TRANSPORTS))
def kind(request):
    """Every real-HTTP case runs over both transports: http.client and ansible's urls."""
    return request.param


def transport(timeout=5.0, headers=None, kind='direct'):
    return TRANSPORTS[kind](timeout, headers=headers)


def one(srv, kind, api='completions', timeout=5.0, chunk_usage=True, body=None, **kw):
    body = body or _bench_stream.request_body(api, 'm', 'hello', 8, chunk_usage=chunk_usage)
    return _bench_stream.run_request(transport(timeout, kind=kind), _bench_stream.endpoint(srv.url, api), body, **kw)


# ---------------------------------------------------------------- request bodies and URLs

def test_request_body_streams_greedy_with_usage_and_ignore_eos():
    body = json.loads(_bench_stream.request_body('completions', 'm', 'p', 32))
    assert body == {'model': 'm', 'prompt': 'p', 'max_tokens': 32, 'temperature': 0.0, 'stream': True,
                    'stream_options': {'include_usage': True, 'continuous_usage_stats': True},
                    'ignore_eos': True}
    chat = json.loads(_bench_stream.request_body('chat', 'm', 'p', 8, ignore_eos=False, chunk_usage=False))
    assert chat['messages'] == [{'role': 'user', 'content': 'p'}]
    assert 'ignore_eos' not in chat and 'prompt' not in chat
    assert chat['stream_options'] == {'include_usage': True}


@pytest.mark.parametrize('base', ['http://h:1', 'http://h:1/', 'http://h:1/v1', 'http://h:1/v1/'])
def test_endpoint_accepts_base_with_or_without_v1(base):
    assert _bench_stream.endpoint(base, 'chat') == 'http://h:1/v1/chat/completions'
    assert _bench_stream.endpoint(base, 'completions') == 'http://h:1/v1/completions'
    assert _http.server_root(base) == 'http://h:1'


# ---------------------------------------------------------------- parse_stream on given reads

def test_event_time_is_the_read_that_completes_it():
    ev1, ev2 = completion_event(' a', 1), completion_event(' b', 2)
    reads = [(1000, ev1[:10]), (2000, ev1[10:] + ev2[:5]), (3000, ev2[5:] + usage_event(2) + DONE)]
    res = _bench_stream.RequestResult()
    assert _bench_stream.parse_stream(reads, 0, res) is True
    assert res.chunk_times_ns == [2000, 3000]
    assert res.chunk_tokens == [1, 1]
    assert res.output_tokens == 2 and res.tokens_source == 'usage'
    assert res.prompt_tokens == 5


def test_crlf_separators_comments_and_multiline_data():
    ev = json.dumps({'choices': [{'text': ' x'}]}).encode()
    stream = (b': ping\r\n\r\n' + b'data: ' + ev + b'\r\n\r\n'
              + b'event: message\ndata: {"choices": [{"text":\ndata: " y"}]}\n\n' + b'data: [DONE]\r\n\r\n')
    res = _bench_stream.RequestResult()
    assert _bench_stream.parse_stream([(5, stream)], 0, res) is True
    assert res.chunk_times_ns == [5, 5]
    assert res.output_tokens == 2 and res.tokens_source == 'chunks'


def test_chat_role_chunk_is_not_the_first_token():
    role = b'data: ' + json.dumps({'choices': [{'delta': {'role': 'assistant', 'content': ''}}]}).encode() + b'\n\n'
    reads = [(10, role), (50, completion_event(' hi', 1, chat=True)), (60, usage_event(1) + DONE)]
    res = _bench_stream.RequestResult()
    _bench_stream.parse_stream(reads, 0, res)
    assert res.ttft_ns == 50


def test_error_event_in_stream_is_a_server_error():
    reads = [(1, completion_event(' a') + b'data: {"error": {"message": "engine died"}}\n\n')]
    res = _bench_stream.RequestResult()
    _bench_stream.parse_stream(reads, 0, res)
    assert res.error == 'server_error' and 'engine died' in res.detail


# ---------------------------------------------------------------- real HTTP streams

def test_stream_with_usage_counts_server_tokens(kind):
    with SSEServer([simple_plan(6, continuous=True)]) as srv:
        res = one(srv, kind)
        path, headers, body = srv.posts[0]
    assert res.ok, res.detail
    assert path == '/v1/completions' and body['stream'] is True
    assert headers['content-type'] == 'application/json'
    assert res.output_tokens == 6 and res.tokens_source == 'usage'
    assert len(res.chunk_times_ns) == 6 and res.chunk_tokens == [1] * 6
    assert 0 <= res.ttft_ns <= res.last_token_ns <= res.end_ns


def test_event_split_across_http_chunks_and_reads(kind):
    ev = completion_event(' split', 1)
    plan = [('head',), ('chunk', ev[:17]), ('sleep', 0.15), ('chunk', ev[17:]),
            ('chunk', usage_event(1)), ('chunk', DONE), ('end',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind)
    assert res.ok, res.detail
    assert res.chunks == 1 and res.output_tokens == 1
    # the event is complete only with its second half, sent at least 0.15 s after the head
    assert res.ttft_ns >= 150_000_000


def test_multi_token_chunks_give_per_token_latency(kind):
    # 1 token, then 3 chunks of 4 tokens: a speculative engine streaming whole verify steps
    with SSEServer([simple_plan(13, per_chunk=4, continuous=True, gap=0.05)]) as srv:
        res = one(srv, kind)
    assert res.ok, res.detail
    assert res.chunk_tokens == [1, 4, 4, 4]
    lat = _bench_stats.token_latencies_ms(res)
    gaps = _bench_stats.chunk_gaps_ms(res)
    assert len(lat) == 12 and len(gaps) == 3
    for i, gap in enumerate(gaps):
        assert lat[4 * i:4 * i + 4] == [gap / 4] * 4
    assert res.output_tokens == 13


def test_usage_less_server_counts_chunks_and_says_so(kind):
    with SSEServer([simple_plan(5, usage=False)]) as srv:
        res = one(srv, kind, chunk_usage=False)
    assert res.ok, res.detail
    assert res.output_tokens == 5 and res.tokens_source == 'chunks'
    assert res.chunk_tokens is None
    level = _bench_stats.summarise([res], 1, res.end_ns)
    assert level['tokens_source'] == 'chunks'
    assert level['token_latency_source'] == 'mean_per_chunk'


def test_final_usage_only_keeps_usage_count_over_chunk_count(kind):
    # 2 events of 3 tokens each after the first, but only the final usage says so
    plan = [('head',), ('chunk', completion_event(' a')), ('chunk', completion_event(' b c d')),
            ('chunk', completion_event(' e f g')), ('chunk', usage_event(7)), ('chunk', DONE), ('end',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind, chunk_usage=False)
    assert res.ok and res.output_tokens == 7 and res.chunks == 3
    assert res.chunk_tokens is None
    lat = _bench_stats.token_latencies_ms(res)
    gaps = _bench_stats.chunk_gaps_ms(res)
    # 6 tokens after the first spread over 2 later events: each gap counts as 3 tokens
    assert lat == pytest.approx([g / 3 for g in gaps])


def test_http_5xx_is_counted_not_raised(kind):
    with SSEServer([[('status', 503, {'error': 'overloaded'})]]) as srv:
        res = one(srv, kind)
    assert not res.ok and res.error == 'http_5xx'
    assert 'HTTP 503' in res.detail and 'overloaded' in res.detail


def test_http_4xx_is_its_own_kind(kind):
    with SSEServer([[('status', 404, {'detail': 'model not found'})]]) as srv:
        res = one(srv, kind)
    assert res.error == 'http_4xx' and 'model not found' in res.detail


def test_cut_stream_is_counted_as_stream_cut(kind):
    plan = [('head',), ('chunk', completion_event(' a', 1)), ('chunk', completion_event(' b', 2)), ('close',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind)
    assert not res.ok and res.error == 'stream_cut'


def test_clean_close_without_done_is_a_cut(kind):
    plan = [('head',), ('chunk', completion_event(' a', 1)), ('end',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind)
    assert res.error == 'stream_cut' and '[DONE]' in res.detail


def test_slow_first_token_within_timeout_is_measured(kind):
    with SSEServer([simple_plan(3, first_delay=0.3)]) as srv:
        res = one(srv, kind, timeout=5)
    assert res.ok
    assert res.ttft_ns >= 300_000_000


def test_first_token_later_than_timeout_is_a_timeout(kind):
    with SSEServer([simple_plan(3, first_delay=1.5)]) as srv:
        res = one(srv, kind, timeout=0.3)
    assert res.error == 'timeout'


def test_stall_mid_stream_is_a_timeout(kind):
    plan = [('head',), ('chunk', completion_event(' a', 1)), ('sleep', 1.5), ('chunk', DONE), ('end',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=0.3)
    assert res.error == 'timeout'


def test_refused_connection_is_connect_error(kind):
    res = _bench_stream.run_request(transport(kind=kind), closed_port_url() + '/v1/completions', b'{}')
    assert res.error == 'connect'


def test_unexpected_client_side_failure_is_counted_not_raised():
    class Broken:
        def post_stream(self, url, body):
            raise ValueError('response head unparsable')
    res = _bench_stream.run_request(Broken(), 'http://127.0.0.1:9/v1/completions', b'{}')
    assert res.error == 'client_error' and 'ValueError' in res.detail and res.end_ns is not None


def test_empty_stream_has_no_tokens(kind):
    with SSEServer([[('head',), ('chunk', usage_event(0)), ('chunk', DONE), ('end',)]]) as srv:
        res = one(srv, kind)
    assert res.error == 'no_tokens'


def test_api_key_is_sent_as_bearer(kind):
    with SSEServer([simple_plan(2)]) as srv:
        res = _bench_stream.run_request(transport(kind=kind, headers={'Authorization': 'Bearer s3cret'}),
                                        _bench_stream.endpoint(srv.url, 'chat'),
                                        _bench_stream.request_body('chat', 'm', 'x', 2))
        headers = srv.posts[0][1]
    assert res.ok
    assert headers['authorization'] == 'Bearer s3cret'


def test_done_with_crlf_framing_ends_the_request_without_waiting_for_the_close(kind):
    # A server that frames events with CRLF and then keeps the connection open: [DONE] ends the
    # request at once (before, the read waited for the stall timeout and counted a `timeout`).
    plan = [('head',), ('chunk', b'data: {"choices":[{"text":"a"}]}\r\n\r\n'),
            ('chunk', b'data: {"choices":[{"text":"b"}],"usage":{"completion_tokens":2}}\r\n\r\n'),
            ('chunk', b'data: [DONE]\r\n\r\n'), ('sleep', 10), ('end',)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=5)
    assert res.ok, res.detail
    assert res.output_tokens == 2


# ---------------------------------------------------------------- bounds: deadlines and byte caps

@pytest.fixture
def watchdog():
    made = []

    def make(request_timeout_s=60.0, run_timeout_s=None):
        made.append(_bench_stream.Watchdog(request_timeout_s, run_timeout_s))
        return made[-1]

    yield make
    for w in made:
        w.stop()
        assert not w._thread.is_alive()


def test_a_token_every_0_9_s_within_a_2_s_stall_limit_ends_by_request_timeout(kind, watchdog):
    # The review's trickle: every read comes within `timeout`, so only the request's deadline ends it.
    plan = [('head',), ('trickle', completion_event(' x'), 0.9, 60)]
    t0 = time.monotonic()
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=2, watchdog=watchdog(request_timeout_s=2.5))
    assert res.error == 'request_timeout', res.detail
    assert 'request_timeout: not complete 2.5 s after it started' in res.detail
    assert res.kept_bytes > 0          # it was streaming, not stalled
    assert time.monotonic() - t0 < 30  # generous: unbounded, it would run the server's 60 s


def test_heartbeat_comments_alone_end_by_request_timeout(kind, watchdog):
    plan = [('head',), ('trickle', b': ping\n\n', 0.2, 60)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=1, watchdog=watchdog(request_timeout_s=0.6))
    assert res.error == 'request_timeout'


def test_a_slow_response_head_is_bounded_by_request_timeout(kind, watchdog):
    plan = [('sleep', 20)] + simple_plan(2)
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=30, watchdog=watchdog(request_timeout_s=0.6))
    assert res.error == 'request_timeout', res.detail


def test_the_run_deadline_ends_a_running_request_as_deadline(kind, watchdog):
    plan = [('head',), ('trickle', completion_event(' x'), 0.3, 60)]
    with SSEServer([plan]) as srv:
        res = one(srv, kind, timeout=5, watchdog=watchdog(request_timeout_s=60, run_timeout_s=0.6))
    assert res.error == 'deadline'
    assert 'run_timeout of 0.6 s reached while the request ran' in res.detail


def test_a_request_that_ends_before_its_deadline_is_measured(kind, watchdog):
    with SSEServer([simple_plan(4, continuous=True)]) as srv:
        res = one(srv, kind, watchdog=watchdog(request_timeout_s=30, run_timeout_s=60))
    assert res.ok, res.detail
    assert res.output_tokens == 4


def test_an_endless_line_is_abandoned_as_oversize_and_not_kept(kind):
    # The review's flood: one line that never ends grew the module to 1.3 GiB in 2 s.
    cap = 256 * 1024
    with SSEServer([[('head',), ('flood', b'A' * 65536, 30)]]) as srv:
        res = one(srv, kind, timeout=5, max_event_bytes=cap)
    assert res.error == 'oversize'
    assert 'an SSE event grew past 262144 bytes without a blank line' in res.detail
    assert cap < res.kept_bytes <= cap + 2 * _bench_stream.READ_SIZE
    assert res.reads is None and res.chunk_times_ns == []   # nothing of it is kept


def test_a_response_beyond_its_byte_cap_is_oversize(kind):
    with SSEServer([[('head',), ('flood', completion_event(' x') * 200, 30)]]) as srv:
        res = one(srv, kind, timeout=5, max_bytes=200000)
    assert res.error == 'oversize' and 'response larger than 200000 bytes' in res.detail
    assert res.kept_bytes <= 200000 + 2 * _bench_stream.READ_SIZE


def test_the_byte_cap_follows_max_tokens():
    assert _bench_stream.max_request_bytes(256) == 1024 * 1024 + 256 * 4096
    assert _bench_stream.max_request_bytes(0) == _bench_stream.max_request_bytes(1)


def test_an_unexpected_exception_while_streaming_is_a_client_error():
    class Resp:
        def read1(self, n):
            raise RuntimeError('decoder state corrupt')

    class Odd:
        def post_stream(self, url, body):
            return None, Resp(), lambda: None

    res = _bench_stream.run_request(Odd(), 'http://127.0.0.1:9/v1/completions', b'{}')
    assert res.error == 'client_error'
    assert res.detail == 'unexpected RuntimeError: decoder state corrupt'
    assert res.end_ns is not None


def test_a_transport_without_guard_support_still_gets_its_deadline(watchdog):
    class OldStyle:
        """post_stream(url, body) only, as a transport written before deadlines."""

        def __init__(self):
            self.inner = _http.DirectTransport(5)

        def post_stream(self, url, body):
            return self.inner.post_stream(url, body)

    plan = [('head',), ('trickle', completion_event(' x'), 0.3, 60)]
    with SSEServer([plan]) as srv:
        res = _bench_stream.run_request(OldStyle(), _bench_stream.endpoint(srv.url, 'completions'), b'{}',
                                        watchdog=watchdog(request_timeout_s=0.6))
    assert res.error == 'request_timeout'


# ---------------------------------------------------------------- impossible usage (issue 31, item 11)

def _usage_chunk(completion, prompt=5):
    return (b'data: ' + json.dumps({'choices': [{'text': ' a'}], 'usage': {
        'prompt_tokens': prompt, 'completion_tokens': completion}}).encode() + b'\n\n')


@pytest.mark.parametrize('stream, why', [
    (completion_event(' a', 1) + usage_event(-5) + DONE, 'completion_tokens=-5'),
    (_usage_chunk(-1) + DONE, 'completion_tokens=-1'),
    (_usage_chunk(2.5) + DONE, 'completion_tokens=2.5'),
    (_usage_chunk(True) + DONE, 'completion_tokens=True'),
    (_usage_chunk('7') + DONE, "completion_tokens='7'"),
    (_usage_chunk(1e300) + DONE, 'completion_tokens=1e+300'),
    (_usage_chunk(10 ** 12) + DONE, 'completion_tokens=1000000000000'),
    (_usage_chunk(3) + _usage_chunk(1) + DONE, 'completion_tokens=1 after 3'),  # a running count that shrinks
    (_usage_chunk(1, prompt=-3) + DONE, 'prompt_tokens=-3'),
])
def test_impossible_usage_counts_fail_the_request_as_bad_usage(stream, why):
    res = _bench_stream.RequestResult()
    res.reads, res.start_ns = [(10, stream)], 0
    _bench_stream.finish(res)
    assert not res.ok and res.error == 'bad_usage', (res.error, res.detail)
    assert why in res.detail


def test_usage_beyond_the_requests_max_tokens_fails_the_request():
    stream = completion_event(' a', 1) + completion_event(' b', 2) + usage_event(300) + DONE
    res = _bench_stream.RequestResult()
    res.reads, res.start_ns = [(10, stream)], 0
    _bench_stream.finish(res, max_tokens=256)
    assert res.error == 'bad_usage' and '300 output tokens for a request of max_tokens 256' in res.detail
    good = _bench_stream.RequestResult()
    good.reads, good.start_ns = [(10, completion_event(' a', 1) + usage_event(256) + DONE)], 0
    assert _bench_stream.finish(good, max_tokens=256).ok
