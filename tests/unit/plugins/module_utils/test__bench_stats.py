# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_bench_stats: the per-request formulas, per-level statistics and samples, on hand-made results."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench_stats, _bench_stream


# ---------------------------------------------------------------- formulas, hand-computed

def made(times_ms, tokens, chunk_tokens=None):
    r = _bench_stream.RequestResult()
    r.chunk_times_ns = [int(t * 1e6) for t in times_ms]
    r.ttft_ns, r.last_token_ns, r.end_ns = r.chunk_times_ns[0], r.chunk_times_ns[-1], r.chunk_times_ns[-1]
    r.output_tokens, r.chunk_tokens, r.chunks = tokens, chunk_tokens, len(times_ms)
    r.tokens_source, r.ok = 'usage', True
    return r


def test_tpot_is_decode_time_over_tokens_after_the_first():
    # first token at 50 ms, last (the 11th) at 170 ms: (170 - 50) / (11 - 1) = 12 ms
    r = made([50, 80, 110, 140, 170], 11, [1, 3, 2, 3, 2])
    assert _bench_stats.tpot_ms(r) == pytest.approx(12.0)
    assert _bench_stats.chunk_gaps_ms(r) == pytest.approx([30, 30, 30, 30])
    assert _bench_stats.token_latencies_ms(r) == pytest.approx([10, 10, 10, 15, 15, 10, 10, 10, 15, 15])
    assert _bench_stats.tpot_ms(made([50], 1)) is None


def test_percentiles_interpolate_linearly():
    vals = [1.0, 2.0, 3.0, 4.0]
    assert _bench_stats.percentile(vals, 50) == 2.5
    assert _bench_stats.percentile(vals, 90) == pytest.approx(3.7)
    assert _bench_stats.percentile(vals, 99) == pytest.approx(3.97)
    assert _bench_stats.percentile([7.0], 99) == 7.0
    assert _bench_stats.percentile([], 50) is None
    s = _bench_stats.stats([4, None, 1, 3, 2])
    assert s == {'mean': 2.5, 'median': 2.5, 'p90': pytest.approx(3.7), 'p99': pytest.approx(3.97),
                 'min': 1, 'max': 4, 'count': 4}
    assert _bench_stats.stats([]) is None


def test_the_first_error_reported_is_the_first_with_the_servers_words():
    """A crashed engine times most requests out and fails one with its error: that one is reported."""
    timeout = _bench_stream.RequestResult().fail('timeout', 'no data within the timeout (stalled): timed out')
    crash = _bench_stream.RequestResult().fail('server_error', 'server error in stream: EngineCore encountered an issue')
    assert _bench_stats.first_error([made([50], 11, [1]), timeout, crash, timeout]) == crash.detail
    assert _bench_stats.first_error([timeout, made([50], 11, [1])]) == timeout.detail
    assert _bench_stats.first_error([made([50], 11, [1])]) is None


def test_summarise_rates_and_errors():
    a = made([50, 170], 11, [1, 10])
    b = made([60, 200], 11, [1, 10])
    bad = _bench_stream.RequestResult().fail('http_5xx', 'HTTP 500: x')
    level = _bench_stats.summarise([a, b, bad], 2, 2_000_000_000)
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
    level = _bench_stats.summarise([_bench_stream.RequestResult().fail('timeout', 't')], 1, 10)
    assert level['ok'] == 0 and level['output_tok_s'] is None and level['ttft_ms'] is None


def test_samples_are_equal_lists_of_the_successful_requests_in_start_order():
    a = made([50, 170], 11, [1, 10])
    b = made([60, 260], 21, [1, 20])
    c = made([40], 1)
    a.start_ns, b.start_ns, c.start_ns = 2_000_000_000, 1_000_000_000, 3_500_000_000
    bad = _bench_stream.RequestResult().fail('http_5xx', 'HTTP 500: x')
    bad.start_ns = 500_000_000
    never = _bench_stream.not_started('not started')
    level = _bench_stats.summarise([a, bad, b, never, c], 2, 4_000_000_000)
    s = level['samples']
    assert set(s) == set(_bench_stats.SAMPLE_KEYS)
    assert len({len(v) for v in s.values()}) == 1
    # b started first, then a, then c; the level starts with the failed request's send
    assert s['start_ms'] == [500.0, 1500.0, 3000.0]
    assert s['ttft_ms'] == [60.0, 50.0, 40.0]
    assert s['e2e_ms'] == [260.0, 170.0, 40.0]
    assert s['output_tokens'] == [21, 11, 1]
    assert s['tpot_ms'] == [pytest.approx(10.0), pytest.approx(12.0), None]
    assert s['output_tok_s'] == [pytest.approx(21 / 0.26, abs=1e-3), pytest.approx(11 / 0.17, abs=1e-3),
                                 pytest.approx(25.0)]
    assert level['samples_truncated'] is False


def test_samples_keep_the_first_max_samples():
    rs = []
    for i in range(5):
        r = made([10, 20], 2, [1, 1])
        r.start_ns = i * 1_000_000
        rs.append(r)
    level = _bench_stats.summarise(rs, 1, 10_000_000, max_samples=3)
    assert level['samples']['start_ms'] == [0.0, 1.0, 2.0]
    assert level['samples_truncated'] is True
    assert level['ttft_ms']['count'] == 5   # the summaries still use every request
    level = _bench_stats.summarise(rs, 1, 10_000_000, max_samples=5)
    assert level['samples_truncated'] is False and len(level['samples']['e2e_ms']) == 5


def test_a_level_without_success_has_empty_samples():
    level = _bench_stats.summarise([_bench_stream.not_started('not started')], 1, 0)
    assert level['samples'] == dict((k, []) for k in _bench_stats.SAMPLE_KEYS)
    assert level['samples_truncated'] is False
    assert level['error_kinds'] == {'deadline': 1}
