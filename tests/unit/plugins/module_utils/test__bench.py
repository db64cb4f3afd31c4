# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_bench: the closed loop and whole runs (model discovery, acceptance around levels, the run's bounds).

Streams come from a real HTTP server on 127.0.0.1 (sse_server.py) that writes scripted bytes.
No assertion depends on how fast this machine is beyond generous upper bounds of runs that,
unbounded, would never end.
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _bench_accept, _bench_stats, _bench_stream, _http, _secrets
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import (
    SSEServer, closed_port_url, completion_event, simple_plan,
)


TRANSPORTS = {'direct': _http.DirectTransport, 'ansible_urls': _http.AnsibleTransport}


@pytest.fixture(params=sorted(TRANSPORTS))
def kind(request):
    """Every real-HTTP case runs over both transports: http.client and ansible's urls."""
    return request.param


def transport(timeout=5.0, headers=None, kind='direct'):
    return TRANSPORTS[kind](timeout, headers=headers)


# ---------------------------------------------------------------- closed loop and whole runs

def test_closed_loop_runs_warmup_then_measured_requests(kind):
    with SSEServer([simple_plan(4, continuous=True)]) as srv:
        bodies = [_bench_stream.request_body('completions', 'm', p, 4) for p in ('a', 'b', 'c')]
        results, wall = _bench.run_level(transport(kind=kind), _bench_stream.endpoint(srv.url, 'completions'),
                                         bodies, concurrency=3, requests=7, warmup=2)
        prompts = [post[2]['prompt'] for post in srv.posts]
    assert len(srv.posts) == 9 and len(results) == 7
    assert all(r.ok for r in results)
    assert prompts.count('a') == 3 and prompts.count('b') == 3 and prompts.count('c') == 3
    assert wall >= max(r.end_ns for r in results)


def test_every_result_names_the_prompt_it_sent_warm_up_included(kind):
    """The paired verdict pairs requests by prompt: the index recorded is the body sent, after the warm-up's."""
    with SSEServer([simple_plan(4, continuous=True)]) as srv:
        bodies = [_bench_stream.request_body('completions', 'm', p, 4) for p in ('a', 'b', 'c')]
        results, _wall = _bench.run_level(transport(kind=kind), _bench_stream.endpoint(srv.url, 'completions'),
                                          bodies, concurrency=1, requests=7, warmup=2)
        sent = [post[2]['prompt'] for post in srv.posts]
    assert sent == ['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c']
    # the measured requests are the 3rd to 9th sent: prompts c, a, b, c, a, b, c
    assert [r.prompt for r in results] == [2, 0, 1, 2, 0, 1, 2]
    assert [('a', 'b', 'c')[r.prompt] for r in results] == sent[2:]


def test_two_runs_of_the_same_settings_send_the_same_prompts_in_the_same_order():
    """Both sides of a verdict: the same prompts digest, and per level the same prompt of every sample."""
    runs, prompts = [], [('chat', 'p1'), ('code', 'p2'), ('reasoning', 'p3')]
    for _side in ('baseline', 'candidate'):
        with SSEServer([simple_plan(4, continuous=True)]) as srv:
            runs.append(_bench.run_benchmark(cfg(srv.url, max_tokens=4, concurrency=[1, 2], requests=6, warmup=1,
                                                 prompts=prompts)))
    one, two = runs
    assert one['prompts_sha256'] == two['prompts_sha256'] == _bench.prompts_digest(prompts)
    count = len(prompts)
    for a, b in zip(one['levels'], two['levels']):
        assert sorted(a['samples']['prompt']) == sorted(b['samples']['prompt'])
        # the warm-up runs before the level's measured loop, which starts again at the first prompt
        assert sorted(a['samples']['prompt']) == sorted(j % count for j in range(6))
    assert one['levels'][0]['samples']['prompt'] == two['levels'][0]['samples']['prompt'] == [j % count for j in range(6)]


def test_the_prompts_digest_names_the_prompts_and_their_order():
    prompts = [('chat', 'a'), ('code', 'b')]
    assert _bench.prompts_digest(prompts) != _bench.prompts_digest(prompts[::-1])
    assert _bench.prompts_digest(prompts) != _bench.prompts_digest([('chat', 'a'), ('chat', 'b')])
    assert len(_bench.prompts_digest(prompts)) == 16


def test_closed_loop_counts_faults_among_successes(kind):
    plans = [simple_plan(3), [('status', 500, 'boom')], simple_plan(3),
             [('head',), ('chunk', completion_event(' a')), ('close',)], simple_plan(3)]
    with SSEServer(plans) as srv:
        results, wall = _bench.run_level(transport(kind=kind), _bench_stream.endpoint(srv.url, 'completions'),
                                         [b'{}'], concurrency=1, requests=5)
    level = _bench_stats.summarise(results, 1, wall)
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


# ---------------------------------------------------------------- bounds, errors and secrets of a run

def cfg(url, **kw):
    base = dict(url=url, api='completions', model='m', prompts=[('x', 'p')], max_tokens=3, concurrency=[1],
                requests=1, warmup=0, metrics='none', timeout=5)
    base.update(kw)
    return base


TRICKLE = [('head',), ('trickle', completion_event(' x'), 0.3, 60)]


def test_run_timeout_returns_what_it_has_and_counts_the_rest_as_deadline():
    # Level 1: one request succeeds, the next trickles past run_timeout, the third is never sent;
    # level 2 is never reached. Unbounded, this run would last as long as the server trickles.
    with SSEServer([simple_plan(3), TRICKLE]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, concurrency=[1, 2], requests=3, run_timeout=1.5,
                                         request_timeout=60, per_request=True))
        posted = len(srv.posts)
    assert posted == 2                      # nothing is sent once the run's deadline passed
    assert bench['run_timeout_reached'] is True
    first, second = bench['levels']
    assert first['ok'] == 1 and first['error_kinds'] == {'deadline': 2}
    assert [r['error'] for r in first['per_request']] == [None, 'deadline', 'deadline']
    assert 'while the request ran' in first['per_request'][1]['detail']
    assert first['per_request'][2]['detail'] == 'not started: run_timeout of 1.5 s reached'
    assert first['per_request'][2]['start_ms'] is None
    assert len(first['samples']['e2e_ms']) == 1
    assert second['requests'] == 3 and second['ok'] == 0 and second['error_kinds'] == {'deadline': 3}
    assert bench['ok'] == 1 and bench['errors'] == 5
    assert bench['duration_s'] < 30         # generous; it ends near 1.5 s
    msg = _bench.describe(bench, 1.5)
    assert msg.startswith('run_timeout of 1.5 s reached: 5 request(s) unfinished counted as deadline errors '
                          '(no request finished at concurrency 2); 2 level(s)')


def test_a_run_within_its_bounds_says_so():
    with SSEServer([simple_plan(3)]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, requests=2, run_timeout=60, request_timeout=30))
    assert bench['run_timeout_reached'] is False and bench['ok'] == 2
    assert _bench.describe(bench).startswith('1 level(s) (concurrency 1): 2 request(s) ok, 0 failed, in ')


def test_request_timeout_is_counted_per_request_and_the_run_goes_on():
    with SSEServer([TRICKLE, simple_plan(3)]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, requests=3, request_timeout=1.0))
    level = bench['levels'][0]
    assert level['ok'] == 2 and level['error_kinds'] == {'request_timeout': 1}
    assert bench['run_timeout_reached'] is False


def test_a_run_without_limits_in_cfg_takes_the_argument_spec_defaults():
    assert _bench.limit({}, 'request_timeout') == _bench.LIMIT_OPTIONS['request_timeout']['default']
    assert _bench.limit({'run_timeout': 5}, 'run_timeout') == 5


def test_a_worker_never_dies_of_an_exception(monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) % 2:
            raise RuntimeError('bug in the request code')
        return real(*args, **kwargs)

    real = _bench_stream.run_request
    monkeypatch.setattr(_bench_stream, 'run_request', broken)
    with SSEServer([simple_plan(2)]) as srv:
        results, _wall = _bench.run_level(_http.DirectTransport(5), _bench_stream.endpoint(srv.url, 'completions'),
                                          [b'{}'], concurrency=2, requests=6)
    level = _bench_stats.summarise(results, 2, 1)
    assert level['ok'] == 3 and level['error_kinds'] == {'client_error': 3}
    assert level['first_error'] == 'unexpected RuntimeError: bug in the request code'


def test_an_oversize_stream_is_counted_and_bounded_in_the_result():
    with SSEServer([[('head',), ('flood', b'A' * 65536, 30)], simple_plan(3)]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, requests=2, per_request=True))
    level = bench['levels'][0]
    assert level['error_kinds'] == {'oversize': 1} and level['ok'] == 1
    cap = _bench_stream.max_request_bytes(3)
    assert all(r['bytes'] <= cap + 2 * _bench_stream.READ_SIZE for r in level['per_request'])


@pytest.mark.parametrize('key', ['sk-SECRET123\n', 'sk-secret\r\nX-Injected: 1', 'sk-\x00nul', 'sk-\u2028sep',
                                 'sk-\x7fdel', 'sk-\u00e9t\u00e9'])
def test_an_api_key_that_cannot_be_a_header_is_refused_before_any_request(key):
    with SSEServer([simple_plan(3)]) as srv:
        with pytest.raises(_bench.BenchError, match='^api_key contains ') as exc:
            _bench.run_benchmark(cfg(srv.url, model=None, metrics='auto', api_key=key))
        assert srv.posts == [] and srv.get_paths == []
    assert key.strip() not in str(exc.value) and 'sk-' not in str(exc.value)


def test_the_key_never_reaches_the_result_even_when_the_server_echoes_it():
    key = 'sk-SECRET-123'
    echo = [('status', 401, {'error': 'invalid key Bearer %s (got %r)' % (key, key)})]
    with SSEServer([echo, simple_plan(3)]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, requests=2, api_key=key, per_request=True))
        sent = srv.posts[0][1]['authorization']
    assert sent == 'Bearer ' + key
    text = json.dumps(bench)
    assert key not in text
    assert bench['levels'][0]['first_error'].startswith('HTTP 401: ')
    assert _secrets.MASK in bench['levels'][0]['first_error']


def test_a_discovery_error_that_echoes_the_key_is_scrubbed():
    key = 'sk-SECRET-456'
    gets = {'/v1/models': (403, {'detail': 'key %s is not allowed' % key})}
    with SSEServer([simple_plan(3)], gets) as srv:
        with pytest.raises(_bench.BenchError) as exc:
            _bench.run_benchmark(cfg(srv.url, model=None, api_key=key))
    assert 'HTTP 403' in str(exc.value) and key not in str(exc.value)


def test_samples_come_with_every_level_in_start_order():
    with SSEServer([simple_plan(4, continuous=True)]) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, max_tokens=4, concurrency=[1, 2], requests=5, max_samples=3))
    for level in bench['levels']:
        s = level['samples']
        assert sorted(s) == sorted(_bench_stats.SAMPLE_KEYS)
        assert [len(v) for v in s.values()] == [3] * len(_bench_stats.SAMPLE_KEYS)
        assert level['samples_truncated'] is True
        assert s['start_ms'][0] == 0.0 and s['start_ms'] == sorted(s['start_ms'])
        assert s['output_tokens'] == [4, 4, 4]
        # e2e_ms is rounded to 1 us: on a fast machine a local request takes well under 1 ms, so the rate
        # is checked against the bounds that rounding leaves (plus the rate's own rounding).
        for tok, e2e, rate in zip(s['output_tokens'], s['e2e_ms'], s['output_tok_s']):
            assert tok / ((e2e + 0.0005) / 1000.0) - 0.001 <= rate <= tok / ((e2e - 0.0005) / 1000.0) + 0.001


def test_level_requests_are_at_least_min_waves_waves_of_the_level():
    assert _bench.level_requests({"requests": 24}, 32) == 24
    assert _bench.level_requests({"requests": 24, "min_waves": 3}, 32) == 96
    assert _bench.level_requests({"requests": 24, "min_waves": 3}, 8) == 24
    assert _bench.level_requests({"requests": 4, "min_waves": 3}, 1) == 4


# ---------------------------------------------------------------- levels from the running-request gauge (issue 32)

RUNNING = ('# TYPE vllm:num_requests_running gauge\n'
           'vllm:num_requests_running{{engine="0",model_name="m"}} {a}\nvllm:num_requests_running{{engine="1",model_name="m"}} {b}\n'
           'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} 0\n')


def test_without_named_levels_the_run_takes_them_from_the_gauge_before_its_first_request():
    # two data-parallel engines: the server's batch is their sum (6+6, 7+7, 9+9, ...), read before any POST
    running = iter([(3, 3), (6, 6), (7, 7), (9, 9), (6, 6), (0, 0)] + [(0, 0)] * 50)
    posts_when_read = []

    with SSEServer([simple_plan(3, continuous=True)] * 64, {}) as srv:
        def metrics():
            posts_when_read.append(len(srv.posts))
            a, b = next(running)
            return 200, RUNNING.format(a=a, b=b)
        srv.gets['/metrics'] = metrics
        bench = _bench.run_benchmark(cfg(srv.url, concurrency=[], metrics='vllm', observe_seconds=0.25,
                                         observe_interval=0.05, requests=2))
    choice = bench['level_choice']
    assert choice['source'] == 'observed' and choice['gauge'] == 'vllm:num_requests_running'
    # busy reads 6, 12, 14, 18, 12: median 12 -> 16, p90 16.4 -> 32
    assert choice['median'] == 12.0 and choice['levels'] == [1, 16, 32]
    assert [lv['concurrency'] for lv in bench['levels']] == [1, 16, 32]
    assert posts_when_read[:choice['samples']] == [0] * choice['samples']


def test_an_engine_without_the_gauge_runs_the_default_levels_and_says_why():
    with SSEServer([simple_plan(3, continuous=True)] * 16, {'/metrics': (200, 'other_metric 1\n')}) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, concurrency=[], metrics='vllm', observe_seconds=0.1,
                                         observe_interval=0.05, requests=2))
    choice = bench['level_choice']
    assert choice['source'] == 'fallback' and [lv['concurrency'] for lv in bench['levels']] == [1, 8]
    assert choice['why'].startswith('vllm:num_requests_running could not be read: /metrics has no vllm:num_requests_running')


def test_named_levels_run_as_named_without_reading_the_gauge():
    with SSEServer([simple_plan(3, continuous=True)] * 16, {}) as srv:
        bench = _bench.run_benchmark(cfg(srv.url, concurrency=[4, 1], metrics='vllm', requests=1))
        gets = list(srv.get_paths)
    assert bench['level_choice'] == {'source': 'named', 'levels': [4, 1],
                                     'why': 'the levels the operator named (spec_switch_bench_concurrency)'}
    assert [lv['concurrency'] for lv in bench['levels']] == [4, 1]
    # only the acceptance's and the prefix cache's reads before each level (a 404 here, so none after it): no
    # observation of the gauge
    assert gets == ['/metrics'] * 4


def test_sglang_running_requests_are_the_first_rank_of_each_scheduler():
    text = ('sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"} 5\n'
            'sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="1",pp_rank="0",dp_rank="0"} 5\n'
            'sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="1"} 4\n')
    with SSEServer([], {'/metrics': (200, text)}) as srv:
        value, err = _bench.running_now(transport(), srv.url, _bench._engine.get('sglang'))
    assert (value, err) == (9.0, None)


# ---------------------------------------------------------------- prefix cache (the verdict's guardrail)

PREFIX_METRICS = """# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {q0}
vllm:prefix_cache_queries_total{{engine="1",model_name="m"}} {q1}
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {h0}
vllm:prefix_cache_hits_total{{engine="1",model_name="m"}} {h1}
"""


def test_the_prefix_cache_counters_are_differenced_around_a_level_from_the_acceptance_reads():
    scrapes = iter([dict(q0=100, q1=0, h0=0, h1=0),       # auto-detection
                    dict(q0=100, q1=0, h0=0, h1=0),       # before the level
                    dict(q0=1100, q1=1000, h0=900, h1=700)])  # after it (every data-parallel engine summed)

    def metrics():
        return 200, PREFIX_METRICS.format(**next(scrapes))  # a fourth GET would raise StopIteration: no extra read

    gets = {'/v1/models': (200, {'data': [{'id': 'm'}]}), '/metrics': metrics}
    with SSEServer([simple_plan(3, continuous=True)], gets) as srv:
        bench = _bench.run_benchmark(dict(url=srv.url, api='completions', model=None, prompts=[('x', 'p')],
                                          max_tokens=3, concurrency=[1], requests=2, warmup=0, metrics='auto',
                                          timeout=5))
    want = {'source': 'metrics', 'hits': 1600, 'queries': 2000, 'hit_rate': 0.8, 'error': None}
    assert bench['levels'][0]['prefix_cache'] == want


class _Texts:
    """A transport whose /metrics answers are given in turn."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def get(self, url, timeout=None):
        return self.answers.pop(0)


HIT_LINE = 'sglang:cached_tokens_total{model_name="m",engine_type="unified",cache_source="device"} 96\n'
SGLANG_PREFIX = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m",engine_type="unified",is_streaming="true"}} {q}
{hits}"""


def test_the_prefix_cache_probe_reads_sglangs_counters_and_says_what_is_missing():
    probe = _bench_accept.PrefixCacheProbe(_Texts(
        (200, SGLANG_PREFIX.format(q=50, hits=''), None),  # no cached_tokens series before the first hit
        (200, SGLANG_PREFIX.format(q=450, hits=HIT_LINE), None)), 'http://h:1/v1', 'sglang')
    probe.start()
    assert probe.finish() == {'source': 'metrics', 'hits': 96, 'queries': 400, 'hit_rate': 0.24, 'error': None}
    restarted = _bench_accept.PrefixCacheProbe(_Texts((200, SGLANG_PREFIX.format(q=500, hits=''), None),
                                                      (200, SGLANG_PREFIX.format(q=20, hits=''), None)), 'http://h', 'sglang')
    restarted.start()
    assert restarted.finish()['error'] == 'a prefix-cache counter went down during the level (the server restarted)'
    missing = _bench_accept.PrefixCacheProbe(_Texts((200, '', None)), 'http://h', 'vllm')
    missing.start()
    assert missing.finish(text='')['error'] == 'the server exports no vllm:prefix_cache_queries_total counter'
    assert _bench_accept.PrefixCacheProbe(_Texts(), 'http://h', 'none').finish() is None
