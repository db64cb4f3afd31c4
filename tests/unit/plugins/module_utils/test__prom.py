# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_prom: Prometheus text parsing (prometheus_client and the fallback agree) and counter deltas."""

from __future__ import annotations

import math

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_sglang, _engine_vllm, _prom


# The engines' metric names and readers, from their adapters (moved out of _prom with the engine adapters).
VLLM = _engine_vllm.ACCEPTANCE_METRICS
VLLM_PREFIX, DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = (VLLM[k] for k in ('prefix', 'drafts', 'draft_tokens', 'accepted', 'per_pos'))


def vllm_acceptance(before, after):
    return _prom.counter_acceptance(before, after, VLLM, _engine_vllm.ACCEPTANCE_SOURCE)


def sglang_gauge(samples):
    return _prom.gauge_mean(samples, _engine_sglang.ACCEPTANCE_METRICS['gauge'])


pc_parser = pytest.importorskip('prometheus_client.parser')

# What vLLM exports (two data-parallel engines, per-position series), plus things a parser must survive.
TEXT = r'''# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="llama"} 120.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="llama"} 80.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="llama"} 480.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="llama"} 320.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="llama"} 3.0e+02
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="llama"} 200
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="llama",position="0"} 110
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="llama",position="0"} 70
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="llama",position="1"} 90
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="llama",position="1"} 60
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="odd \"name\"\\x"} 3
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="llama"} 7
vllm:e2e_request_latency_seconds_sum{model_name="llama"} NaN
process_start_time_seconds 1.7e9
'''


def parsers():
    return [
        _prom.parse_text_small,
        lambda text: [(s.name, dict(s.labels), float(s.value)) for fam in pc_parser.text_string_to_metric_families(text) for s in fam.samples],
    ]


def test_fallback_parser_agrees_with_prometheus_client():
    small, real = (sorted(p(TEXT), key=repr) for p in parsers())
    assert len(small) == len(real) == 14
    for (n1, l1, v1), (n2, l2, v2) in zip(small, real):
        assert (n1, l1) == (n2, l2)
        assert v1 == v2 or (math.isnan(v1) and math.isnan(v2))


def test_label_escapes_are_decoded():
    samples = _prom.parse_text_small(TEXT)
    labels = next(s[1] for s in samples if s[0] == 'vllm:num_requests_running')
    assert labels['model_name'] == 'odd "name"\\x'


def test_parse_text_uses_prometheus_client_when_present():
    assert _prom.PARSER.get() is not None and _prom.PARSER.error is None
    assert sorted(_prom.parse_text(TEXT), key=repr)[0][0].startswith('process_start')


@pytest.mark.parametrize('bad', ['metric{a="1" 3\n', 'metric{a=1} 3\n', 'metric\n', 'metric abc\n'])
def test_fallback_rejects_malformed_lines(bad):
    with pytest.raises(_prom.PromParseError):
        _prom.parse_text_small(bad)


def test_counters_sum_engines_and_keep_positions():
    c = _prom.counters(_prom.parse_text_small(TEXT), VLLM_PREFIX)
    assert c[(DRAFTS, None)] == 200
    assert c[(DRAFT_TOKENS, None)] == 800
    assert c[(ACCEPTED, None)] == 500
    assert c[(PER_POS, '0')] == 180 and c[(PER_POS, '1')] == 150
    assert not any(key[0].startswith('vllm:num_requests') for key in c)


def test_acceptance_from_counter_deltas_hand_computed():
    before = {
        (DRAFTS, None): 200.0,
        (DRAFT_TOKENS, None): 800.0,
        (ACCEPTED, None): 500.0,
        (PER_POS, '0'): 180.0,
        (PER_POS, '1'): 150.0,
    }
    after = {
        (DRAFTS, None): 600.0,
        (DRAFT_TOKENS, None): 2400.0,
        (ACCEPTED, None): 1500.0,
        (PER_POS, '0'): 500.0,
        (PER_POS, '1'): 350.0,
    }
    acc = vllm_acceptance(before, after)
    # 400 drafts, 1600 draft tokens, 1000 accepted in the window
    assert (acc['drafts'], acc['draft_tokens'], acc['accepted_tokens']) == (400, 1600, 1000)
    assert acc['acceptance_rate'] == pytest.approx(1000 / 1600)
    assert acc['mean_acceptance_length'] == pytest.approx(1 + 1000 / 400)
    assert acc['per_position'] == pytest.approx([320 / 400, 200 / 400])
    assert acc['counter_reset'] is False and acc['caveat'] is None


def test_counter_reset_counts_from_restart_and_says_so():
    before = {(DRAFTS, None): 1000.0, (DRAFT_TOKENS, None): 4000.0, (ACCEPTED, None): 2000.0}
    # server restarted during the run: every counter starts again from zero
    after = {(DRAFTS, None): 50.0, (DRAFT_TOKENS, None): 200.0, (ACCEPTED, None): 120.0}
    d, resets = _prom.delta(before, after)
    assert d[(DRAFTS, None)] == 50.0 and len(resets) == 3
    acc = vllm_acceptance(before, after)
    assert acc['counter_reset'] is True and 'restarted' in acc['caveat']
    assert acc['mean_acceptance_length'] == pytest.approx(1 + 120 / 50)
    assert acc['acceptance_rate'] == pytest.approx(120 / 200)


def test_new_series_after_first_scrape_counts_from_zero():
    d, resets = _prom.delta({}, {(DRAFTS, None): 5.0})
    assert d == {(DRAFTS, None): 5.0} and resets == []


def test_no_spec_counters_means_no_acceptance():
    assert vllm_acceptance({}, {}) is None
    zero = {(DRAFTS, None): 0.0, (DRAFT_TOKENS, None): 0.0, (ACCEPTED, None): 0.0}
    acc = vllm_acceptance(zero, zero)
    assert acc['mean_acceptance_length'] is None and acc['acceptance_rate'] is None


def test_sglang_gauge_is_read_when_exported():
    assert sglang_gauge(_prom.parse_text_small('sglang:spec_accept_length{m="a"} 2.5\n')) == 2.5
    assert sglang_gauge(_prom.parse_text_small('sglang:num_running_reqs 1\n')) is None


def test_changed_created_timestamp_marks_a_restart_even_when_counts_grew():
    name = DRAFTS[: -len('_total')]
    before = {(DRAFTS, None): 10.0, (name + '_created', None): 1000.0}
    after = {(DRAFTS, None): 40.0, (name + '_created', None): 2000.0}
    d, resets = _prom.delta(before, after)
    assert d == {(DRAFTS, None): 40.0} and resets == [(DRAFTS, None)]
    same = {(DRAFTS, None): 40.0, (name + '_created', None): 1000.0}
    assert _prom.delta(before, same) == ({(DRAFTS, None): 30.0}, [])
