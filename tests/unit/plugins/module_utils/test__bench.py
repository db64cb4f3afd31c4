"""_bench: SSE parsing, per-request timings, metric formulas, the closed loop, acceptance probes.

Streams come from a real HTTP server on 127.0.0.1 (sse_server.py) that writes scripted bytes, so
chunk boundaries, pauses, faults and cuts are exact. No assertion depends on how fast this
machine is: delays are only used as lower bounds ("the first token cannot come before the server
sent it") or to force separate socket reads.
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import (
    DONE, SSEServer, closed_port_url, completion_event, simple_plan, usage_event,
)


TRANSPORTS = {'direct': _bench.DirectTransport, 'ansible_urls': _bench.AnsibleTransport}


@pytest.fixture(params=sorted(TRANSPORTS))
def kind(request):
    """Every real-HTTP case runs over both transports: http.client and ansible's urls."""
    return request.param


def transport(timeout=5.0, headers=None, kind='direct'):
    return TRANSPORTS[kind](timeout, headers=headers)


def one(srv, kind, api='completions', timeout=5.0, chunk_usage=True, body=None):
    body = body or _bench.request_body(api, 'm', 'hello', 8, chunk_usage=chunk_usage)
    return _bench.run_request(transport(timeout, kind=kind), _bench.endpoint(srv.url, api), body)


# ---------------------------------------------------------------- request bodies and URLs

def test_request_body_streams_greedy_with_usage_and_ignore_eos():
    body = json.loads(_bench.request_body('completions', 'm', 'p', 32))
    assert body == {'model': 'm', 'prompt': 'p', 'max_tokens': 32, 'temperature': 0.0, 'stream': True,
                    'stream_options': {'include_usage': True, 'continuous_usage_stats': True},
                    'ignore_eos': True}
    chat = json.loads(_bench.request_body('chat', 'm', 'p', 8, ignore_eos=False, chunk_usage=False))
    assert chat['messages'] == [{'role': 'user', 'content': 'p'}]
    assert 'ignore_eos' not in chat and 'prompt' not in chat
    assert chat['stream_options'] == {'include_usage': True}


@pytest.mark.parametrize('base', ['http://h:1', 'http://h:1/', 'http://h:1/v1', 'http://h:1/v1/'])
def test_endpoint_accepts_base_with_or_without_v1(base):
    assert _bench.endpoint(base, 'chat') == 'http://h:1/v1/chat/completions'
    assert _bench.endpoint(base, 'completions') == 'http://h:1/v1/completions'
    assert _bench.server_root(base) == 'http://h:1'


# ---------------------------------------------------------------- parse_stream on given reads

def test_event_time_is_the_read_that_completes_it():
    ev1, ev2 = completion_event(' a', 1), completion_event(' b', 2)
    reads = [(1000, ev1[:10]), (2000, ev1[10:] + ev2[:5]), (3000, ev2[5:] + usage_event(2) + DONE)]
    res = _bench.RequestResult()
    assert _bench.parse_stream(reads, 0, res) is True
    assert res.chunk_times_ns == [2000, 3000]
    assert res.chunk_tokens == [1, 1]
    assert res.output_tokens == 2 and res.tokens_source == 'usage'
    assert res.prompt_tokens == 5


def test_crlf_separators_comments_and_multiline_data():
    ev = json.dumps({'choices': [{'text': ' x'}]}).encode()
    stream = (b': ping\r\n\r\n' + b'data: ' + ev + b'\r\n\r\n'
              + b'event: message\ndata: {"choices": [{"text":\ndata: " y"}]}\n\n' + b'data: [DONE]\r\n\r\n')
    res = _bench.RequestResult()
    assert _bench.parse_stream([(5, stream)], 0, res) is True
    assert res.chunk_times_ns == [5, 5]
    assert res.output_tokens == 2 and res.tokens_source == 'chunks'


def test_chat_role_chunk_is_not_the_first_token():
    role = b'data: ' + json.dumps({'choices': [{'delta': {'role': 'assistant', 'content': ''}}]}).encode() + b'\n\n'
    reads = [(10, role), (50, completion_event(' hi', 1, chat=True)), (60, usage_event(1) + DONE)]
    res = _bench.RequestResult()
    _bench.parse_stream(reads, 0, res)
    assert res.ttft_ns == 50


def test_error_event_in_stream_is_a_server_error():
    reads = [(1, completion_event(' a') + b'data: {"error": {"message": "engine died"}}\n\n')]
    res = _bench.RequestResult()
    _bench.parse_stream(reads, 0, res)
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
    lat = _bench.token_latencies_ms(res)
    gaps = _bench.chunk_gaps_ms(res)
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
    level = _bench.summarise([res], 1, res.end_ns)
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
    lat = _bench.token_latencies_ms(res)
    gaps = _bench.chunk_gaps_ms(res)
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
    res = _bench.run_request(transport(kind=kind), closed_port_url() + '/v1/completions', b'{}')
    assert res.error == 'connect'


def test_unexpected_client_side_failure_is_counted_not_raised():
    class Broken:
        def post_stream(self, url, body):
            raise ValueError('response head unparsable')
    res = _bench.run_request(Broken(), 'http://127.0.0.1:9/v1/completions', b'{}')
    assert res.error == 'bad_response' and 'ValueError' in res.detail and res.end_ns is not None


def test_empty_stream_has_no_tokens(kind):
    with SSEServer([[('head',), ('chunk', usage_event(0)), ('chunk', DONE), ('end',)]]) as srv:
        res = one(srv, kind)
    assert res.error == 'no_tokens'


def test_api_key_is_sent_as_bearer(kind):
    with SSEServer([simple_plan(2)]) as srv:
        res = _bench.run_request(transport(kind=kind, headers={'Authorization': 'Bearer s3cret'}),
                                 _bench.endpoint(srv.url, 'chat'),
                                 _bench.request_body('chat', 'm', 'x', 2))
        headers = srv.posts[0][1]
    assert res.ok
    assert headers['authorization'] == 'Bearer s3cret'


# ---------------------------------------------------------------- formulas, hand-computed

def made(times_ms, tokens, chunk_tokens=None):
    r = _bench.RequestResult()
    r.chunk_times_ns = [int(t * 1e6) for t in times_ms]
    r.ttft_ns, r.last_token_ns, r.end_ns = r.chunk_times_ns[0], r.chunk_times_ns[-1], r.chunk_times_ns[-1]
    r.output_tokens, r.chunk_tokens, r.chunks = tokens, chunk_tokens, len(times_ms)
    r.tokens_source, r.ok = 'usage', True
    return r


def test_tpot_is_decode_time_over_tokens_after_the_first():
    # first token at 50 ms, last (the 11th) at 170 ms: (170 - 50) / (11 - 1) = 12 ms
    r = made([50, 80, 110, 140, 170], 11, [1, 3, 2, 3, 2])
    assert _bench.tpot_ms(r) == pytest.approx(12.0)
    assert _bench.chunk_gaps_ms(r) == pytest.approx([30, 30, 30, 30])
    assert _bench.token_latencies_ms(r) == pytest.approx([10, 10, 10, 15, 15, 10, 10, 10, 15, 15])
    assert _bench.tpot_ms(made([50], 1)) is None


def test_percentiles_interpolate_linearly():
    vals = [1.0, 2.0, 3.0, 4.0]
    assert _bench.percentile(vals, 50) == 2.5
    assert _bench.percentile(vals, 90) == pytest.approx(3.7)
    assert _bench.percentile(vals, 99) == pytest.approx(3.97)
    assert _bench.percentile([7.0], 99) == 7.0
    assert _bench.percentile([], 50) is None
    s = _bench.stats([4, None, 1, 3, 2])
    assert s == {'mean': 2.5, 'median': 2.5, 'p90': pytest.approx(3.7), 'p99': pytest.approx(3.97),
                 'min': 1, 'max': 4, 'count': 4}
    assert _bench.stats([]) is None


def test_summarise_rates_and_errors():
    a = made([50, 170], 11, [1, 10])
    b = made([60, 200], 11, [1, 10])
    bad = _bench.RequestResult().fail('http_5xx', 'HTTP 500: x')
    level = _bench.summarise([a, b, bad], 2, 2_000_000_000)
    assert level['ok'] == 2 and level['errors'] == 1 and level['error_kinds'] == {'http_5xx': 1}
    assert level['first_error'] == 'HTTP 500: x'
    assert level['output_tokens'] == 22
    assert level['output_tok_s'] == pytest.approx(11.0)      # 22 tokens in 2 s
    assert level['request_s'] == pytest.approx(1.0)
    assert level['ttft_ms']['mean'] == pytest.approx(55.0)
    assert level['tpot_ms']['mean'] == pytest.approx((12.0 + 14.0) / 2)
    assert level['tokens_per_chunk'] == pytest.approx(22 / 4)
    assert level['token_latency_source'] == 'usage_per_chunk'
    assert level['stream_tok_s']['mean'] == pytest.approx((11 / 0.170 + 11 / 0.200) / 2)


def test_summarise_without_success_has_null_figures():
    level = _bench.summarise([_bench.RequestResult().fail('timeout', 't')], 1, 10)
    assert level['ok'] == 0 and level['output_tok_s'] is None and level['ttft_ms'] is None


# ---------------------------------------------------------------- closed loop and whole runs

def test_closed_loop_runs_warmup_then_measured_requests(kind):
    with SSEServer([simple_plan(4, continuous=True)]) as srv:
        bodies = [_bench.request_body('completions', 'm', p, 4) for p in ('a', 'b', 'c')]
        results, wall = _bench.run_level(transport(kind=kind), _bench.endpoint(srv.url, 'completions'),
                                         bodies, concurrency=3, requests=7, warmup=2)
        prompts = [post[2]['prompt'] for post in srv.posts]
    assert len(srv.posts) == 9 and len(results) == 7
    assert all(r.ok for r in results)
    assert prompts.count('a') == 3 and prompts.count('b') == 3 and prompts.count('c') == 3
    assert wall >= max(r.end_ns for r in results)


def test_closed_loop_counts_faults_among_successes(kind):
    plans = [simple_plan(3), [('status', 500, 'boom')], simple_plan(3),
             [('head',), ('chunk', completion_event(' a')), ('close',)], simple_plan(3)]
    with SSEServer(plans) as srv:
        results, wall = _bench.run_level(transport(kind=kind), _bench.endpoint(srv.url, 'completions'),
                                         [b'{}'], concurrency=1, requests=5)
    level = _bench.summarise(results, 1, wall)
    assert level['ok'] == 3
    assert level['error_kinds'] == {'http_5xx': 1, 'stream_cut': 1}


VLLM_METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {d}
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {dt}
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {a}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
"""


def test_run_benchmark_discovers_model_and_differences_vllm_counters():
    scrapes = iter([dict(d=10, dt=20, a=5, p0=4, p1=1),        # auto-detection
                    dict(d=10, dt=20, a=5, p0=4, p1=1),        # before the level
                    dict(d=110, dt=220, a=155, p0=90, p1=65)])  # after it

    def metrics():
        return 200, VLLM_METRICS.format(**next(scrapes))

    gets = {'/v1/models': (200, {'data': [{'id': 'served-model'}]}), '/metrics': metrics}
    with SSEServer([simple_plan(5, continuous=True)], gets) as srv:
        cfg = dict(url=srv.url + '/v1', api='completions', model=None, prompts=[('x', 'p')],
                   max_tokens=5, concurrency=[2], requests=4, warmup=1, metrics='auto', timeout=5)
        bench = _bench.run_benchmark(cfg)
        models = {post[2]['model'] for post in srv.posts}
    assert models == {'served-model'} and bench['model'] == 'served-model'
    assert bench['metrics_source'] == 'vllm'
    acc = bench['levels'][0]['acceptance']
    assert acc['drafts'] == 100 and acc['draft_tokens'] == 200 and acc['accepted_tokens'] == 150
    assert acc['acceptance_rate'] == pytest.approx(0.75)
    assert acc['mean_acceptance_length'] == pytest.approx(2.5)
    assert acc['per_position'] == pytest.approx([0.86, 0.64])
    assert acc['counter_reset'] is False and acc['error'] is None
    assert bench['levels'][0]['ok'] == 4 and bench['ok'] == 4 and bench['single_stream_tok_s'] is None


def test_run_benchmark_reports_sglang_since_start_caveat():
    info = {'internal_states': [{'avg_spec_accept_length': 2.75, 'last_gen_throughput': 10.0}]}
    gets = {'/get_server_info': (200, info), '/metrics': (200, 'sglang:spec_accept_length{model_name="m"} 3.0\n')}
    with SSEServer([simple_plan(3)], gets) as srv:
        cfg = dict(url=srv.url, api='chat', model='m', prompts=[('x', 'p')], max_tokens=3,
                   concurrency=[1], requests=2, warmup=0, metrics='auto', timeout=5)
        bench = _bench.run_benchmark(cfg)
    acc = bench['levels'][0]['acceptance']
    assert bench['metrics_source'] == 'sglang'
    assert acc['mean_acceptance_length'] == 2.75 and acc['since_server_start'] is True
    assert 'since the server started' in acc['caveat']
    assert acc['last_batch_accept_length'] == 3.0
    assert bench['single_stream_tok_s'] == bench['levels'][0]['output_tok_s']


def test_run_benchmark_without_metrics_or_model_list_fails_clearly():
    with SSEServer([simple_plan(3)]) as srv:
        with pytest.raises(_bench.BenchError, match='cannot discover the model'):
            _bench.run_benchmark(dict(url=srv.url, api='completions', model=None, prompts=[('x', 'p')],
                                      max_tokens=3, concurrency=[1], requests=1, warmup=0,
                                      metrics='none', timeout=5))
    with pytest.raises(_bench.BenchError, match='GET /v1/models failed'):
        _bench.run_benchmark(dict(url=closed_port_url(), api='completions', model=None,
                                  prompts=[('x', 'p')], max_tokens=3, concurrency=[1], requests=1,
                                  warmup=0, metrics='none', timeout=5))
