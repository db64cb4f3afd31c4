# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_bench main(): options, result shape against RETURN, output file, check mode, failures.

The module talks real HTTP to a scripted SSE server on 127.0.0.1.
"""
from __future__ import annotations

import json
import time

import pytest
import yaml

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _suites
from ansible_collections.llmops.specdec.plugins.modules import spec_bench
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import (
    SSEServer, completion_event, simple_plan,
)


def run(args, expect=ExitJson):
    return run_module(spec_bench.main, args, expect)


SGLANG_GETS = {'/get_server_info': (200, {'internal_states': [{'avg_spec_accept_length': 2.0}]}),
               '/metrics': (200, 'sglang:spec_accept_length 2.0\n'),
               '/v1/models': (200, {'data': [{'id': 'sg'}]})}


def documented(node):
    """RETURN's `contains` tree as nested dicts of key -> subtree (None for leaves)."""
    return {k: documented(v['contains']) if 'contains' in v else None for k, v in node.items()}


def assert_documented(value, doc, where):
    if doc is None or value is None:
        return
    if isinstance(value, list):
        for item in value:
            assert_documented(item, doc, where + '[]')
        return
    assert set(value) == set(doc), '%s: undocumented %s, missing %s' % (
        where, sorted(set(value) - set(doc)), sorted(set(doc) - set(value)))
    for k, v in value.items():
        assert_documented(v, doc[k], where + '.' + k)


def test_every_returned_key_is_documented_and_nothing_more(tmp_path):
    out = tmp_path / 'bench.json'
    with SSEServer([simple_plan(6, per_chunk=2, continuous=True)], SGLANG_GETS) as srv:
        res = run({'url': srv.url, 'suite': 'repetitive', 'max_tokens': 6, 'concurrency': [1, 2],
                   'requests': 3, 'warmup': 1, 'output': str(out), 'per_request': True})
    ret = yaml.safe_load(spec_bench.RETURN)
    assert set(res) - {'invocation', '_no_log_values'} <= set(ret)
    assert res['changed'] is True  # output written
    bench = res['bench']
    # SGLang acceptance has its own keys; vLLM's are checked in the next test
    acc_doc = documented(ret['bench']['contains'])
    acc_keys = set(bench['levels'][0]['acceptance'])
    assert acc_keys <= set(acc_doc['levels']['acceptance'])
    for level in bench['levels']:
        level = dict(level, acceptance=None)
        assert_documented(level, acc_doc['levels'], 'bench.levels[]')
    assert_documented(dict(bench, levels=None), acc_doc, 'bench')
    assert bench['model'] == 'sg' and bench['metrics_source'] == 'sglang'
    assert [lv['concurrency'] for lv in bench['levels']] == [1, 2]
    assert bench['ok'] == 6 and bench['errors'] == 0
    assert bench['categories'] == {'repetitive': len(_suites.SUITES['repetitive'])}
    assert bench['levels'][0]['tokens_per_chunk'] == pytest.approx(6 / 4)
    rows = bench['levels'][1]['per_request']
    assert len(rows) == 3 and all(r['ok'] and r['output_tokens'] == 6 and r['chunks'] == 4 for r in rows)
    assert min(r['start_ms'] for r in rows) == 0.0 and all(r['error'] is None for r in rows)
    assert json.loads(out.read_text()) == bench
    assert oct(out.stat().st_mode & 0o777) == '0o644'


def test_vllm_acceptance_keys_are_documented():
    metrics = ('vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_draft_tokens_total 40\n'
               'vllm:spec_decode_num_accepted_tokens_total 20\n'
               'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 8\n')
    with SSEServer([simple_plan(3)], {'/metrics': (200, metrics)}) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 3, 'requests': 1,
                   'warmup': 0})
    ret = yaml.safe_load(spec_bench.RETURN)
    acc_doc = documented(ret['bench']['contains'])['levels']['acceptance']
    acc = res['bench']['levels'][0]['acceptance']
    assert set(acc) <= set(acc_doc)
    assert acc['source'] == 'vllm_counters' and acc['drafts'] == 0


def test_check_mode_runs_but_does_not_write_output(tmp_path):
    out = tmp_path / 'bench.json'
    with SSEServer([simple_plan(3)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a', 'b'], 'max_tokens': 3, 'requests': 2,
                   'warmup': 0, 'metrics': 'none', 'output': str(out), '_ansible_check_mode': True})
        posted = len(srv.posts)
    assert res['bench']['ok'] == 2 and posted == 2
    assert not out.exists() and res['changed'] is False


def test_output_changed_only_when_its_content_changes(tmp_path, monkeypatch):
    out = tmp_path / 'bench.json'
    args = {'url': 'http://127.0.0.1:9', 'model': 'm', 'prompts': ['a'], 'max_tokens': 3, 'requests': 1,
            'warmup': 0, 'metrics': 'none', 'output': str(out)}
    bench = {'ok': 1, 'levels': [], 'run_timeout_reached': False}
    monkeypatch.setattr(_bench, 'run_benchmark', lambda cfg: dict(bench))
    monkeypatch.setattr(_bench, 'describe', lambda b, t=None: 'one level')
    assert run(args)['changed'] is True
    assert run(args)['changed'] is False
    assert json.loads(out.read_text()) == bench
    bench['ok'] = 2
    assert run(args)['changed'] is True


def test_output_that_cannot_be_written_fails_with_the_figures(tmp_path):
    with SSEServer([simple_plan(3)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 3, 'requests': 1,
                   'warmup': 0, 'metrics': 'none', 'output': str(tmp_path / 'no' / 'bench.json')}, expect=FailJson)
    assert res['msg'].startswith('cannot write output %s: ' % (tmp_path / 'no' / 'bench.json'))
    assert res['bench']['ok'] == 1 and res['changed'] is False


def test_prompts_file_jsonl_and_chat_api(tmp_path):
    pf = tmp_path / 'prompts.jsonl'
    pf.write_text('{"prompt": "first", "category": "coding"}\n{"prompt": "second"}\n')
    with SSEServer([simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'api': 'chat', 'prompts_file': str(pf), 'max_tokens': 2,
                   'requests': 2, 'warmup': 0, 'metrics': 'none', 'api_key': 'k3y'})
        sent = [(p, h.get('authorization'), b['messages'][0]['content']) for p, h, b in srv.posts]
    assert res['bench']['categories'] == {'coding': 1, 'file': 1}
    assert sent == [('/v1/chat/completions', 'Bearer k3y', 'first'), ('/v1/chat/completions', 'Bearer k3y', 'second')]
    assert 'k3y' not in json.dumps(res['bench'])


def test_api_key_is_no_log():
    with SSEServer([simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 1,
                   'warmup': 0, 'metrics': 'none', 'api_key': 'sekrit-value'})
    # AnsibleModule masks no_log values in every output, including invocation
    assert 'sekrit-value' in res['_no_log_values']


def test_nothing_succeeded_is_a_clear_failure_with_the_figures():
    with SSEServer([[('status', 500, 'engine exploded')]]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 3,
                   'warmup': 1, 'metrics': 'none'}, expect=FailJson)
    assert 'no request succeeded (3 http_5xx)' in res['msg']
    assert 'engine exploded' in res['msg']
    assert res['bench']['levels'][0]['error_kinds'] == {'http_5xx': 3}


def test_some_failures_are_counted_not_fatal():
    plans = [simple_plan(2), [('status', 502, 'bad gateway')]]
    with SSEServer(plans) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 3,
                   'warmup': 0, 'metrics': 'none'})
    level = res['bench']['levels'][0]
    assert level['ok'] == 1 and level['errors'] == 2 and level['error_kinds'] == {'http_5xx': 2}
    assert 'per_request' not in level


def test_unreachable_server_fails_without_traceback():
    res = run({'url': 'http://127.0.0.1:9', 'prompts': ['a']}, expect=FailJson)
    assert res['msg'].startswith('spec_bench against http://127.0.0.1:9: cannot discover the model')


@pytest.mark.parametrize('args, msg', [
    ({'concurrency': [0]}, 'concurrency must list levels'),
    ({'max_tokens': 0}, 'max_tokens must be at least 1'),
    ({'requests': 0}, 'requests must be at least 1'),
    ({'prompts_file': '/nonexistent/prompts.txt'}, 'cannot read prompts_file'),
    ({'timeout': 0}, 'timeout must be positive, got 0.0'),
    ({'request_timeout': 0}, 'request_timeout must be positive, got 0.0'),
    ({'run_timeout': -1}, 'run_timeout must be positive, got -1.0'),
    ({'max_samples': -1}, 'max_samples must be at least 0, got -1'),
    ({'api_key': 'sk-abc\n'}, 'api_key contains a line feed (U+000A) at its end'),
])
def test_bad_options_fail_before_sending(args, msg):
    res = run(dict({'url': 'http://127.0.0.1:9', 'model': 'm'}, **args), expect=FailJson)
    assert msg in res['msg']


def test_suites_have_each_category_and_parse_plain_files():
    assert set(_suites.CATEGORIES) == {'reasoning', 'coding', 'chat', 'summarise', 'repetitive'}
    every = _suites.suite_prompts('all')
    assert len(every) == sum(len(v) for v in _suites.SUITES.values())
    assert [p[0] for p in every[:5]] == list(_suites.CATEGORIES)
    assert _suites.parse_prompts_file('# c\none\n\ntwo\\nlines\n') == [('file', 'one'), ('file', 'two\nlines')]
    with pytest.raises(ValueError, match='line 2'):
        _suites.parse_prompts_file('{"prompt": "a"}\n{"nope": 1}\n')


def test_samples_are_returned_per_level_and_bounded_by_max_samples():
    with SSEServer([simple_plan(3, continuous=True)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 3, 'requests': 4,
                   'warmup': 0, 'metrics': 'none', 'concurrency': [1, 2], 'max_samples': 2})
    for level in res['bench']['levels']:
        assert [len(v) for v in level['samples'].values()] == [2] * 6
        assert level['samples_truncated'] is True
        assert level['samples']['output_tokens'] == [3, 3]
    assert res['msg'].startswith('2 level(s) (concurrency 1, 2): 8 request(s) ok, 0 failed, in ')


def test_run_timeout_returns_what_was_measured_with_a_clear_msg():
    trickle = [('head',), ('trickle', completion_event(' x'), 0.3, 60)]
    with SSEServer([simple_plan(2), trickle]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 3,
                   'warmup': 0, 'metrics': 'none', 'run_timeout': 1.5})
    bench = res['bench']
    assert res['changed'] is False
    assert bench['run_timeout_reached'] is True
    assert bench['levels'][0]['ok'] == 1 and bench['levels'][0]['error_kinds'] == {'deadline': 2}
    assert res['msg'].startswith('run_timeout of 1.5 s reached: 2 request(s) unfinished counted as deadline errors')


def test_a_key_with_a_trailing_newline_is_refused_before_any_request():
    with SSEServer([simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'prompts': ['a'], 'api_key': 'sk-SECRET123\n'}, expect=FailJson)
        assert srv.posts == [] and srv.get_paths == []
    assert res['msg'].startswith('api_key contains a line feed (U+000A) at its end')
    assert 'SECRET' not in json.dumps(res)


def test_the_key_is_in_no_output_even_when_the_server_echoes_it():
    key = 'sk-ECHOED-789'
    echo = [('status', 401, 'bad token Bearer %s' % key)]
    with SSEServer([echo, simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 2,
                   'warmup': 0, 'metrics': 'none', 'api_key': key, 'per_request': True})
    out = dict(res)
    out.pop('_no_log_values')   # what Ansible masks with, not output
    assert key not in json.dumps(out, default=str)
    assert res['bench']['levels'][0]['error_kinds'] == {'http_4xx': 1}


def _guard_state(tmp_path, deadline_in, run_id='run-a'):
    from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state
    path = tmp_path / 'guard' / 'vllm-server.service.json'
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(json.dumps({'version': _guard_state.STATE_VERSION, 'run_id': run_id, 'unit': 'vllm-server.service',
                                'phase': _guard_state.PHASE_ARMED, 'deadline': time.time() + deadline_in, 'renewals': 0}))
    return path


def test_the_benchmark_never_renews_the_lease_and_stops_when_it_runs_out(tmp_path):
    """Issue 31: only the controller renews the lease; a benchmark that would run for a minute stops once
    the guard's deadline passes, with lease_lost and the figures it had."""
    statefile = _guard_state(tmp_path, 1.5)
    before = json.loads(statefile.read_text())
    trickle = [('head',), ('trickle', completion_event(' x'), 0.3, 60)]
    with SSEServer([trickle]) as srv:
        t0 = time.monotonic()
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 1, 'warmup': 0,
                   'metrics': 'none', 'run_timeout': 20,
                   'lease': {'statefile': str(statefile), 'run_id': 'run-a', 'ttl': 600}}, expect=FailJson)
        took = time.monotonic() - t0
    assert json.loads(statefile.read_text()) == before  # not renewed, not even once
    assert 1.4 < took < 5
    assert 'deadline' in res['lease_lost'] and 'without a renewal from the controller' in res['lease_lost']
    assert res['msg'].startswith("spec_bench against %s: the lease on the host's guard ran out" % srv.url)
    level = res['bench']['levels'][0]
    assert level['error_kinds'] == {'deadline': 1}
    assert "the lease on the host's guard ran out while the request ran" in level['first_error']


@pytest.mark.parametrize('change, why', [('gone', 'no guard is armed'), ('other', 'belongs to run run-b'),
                                         ('late', 'passed')])
def test_a_lease_already_lost_measures_nothing(tmp_path, change, why):
    statefile = _guard_state(tmp_path, -1 if change == 'late' else 60, run_id='run-b' if change == 'other' else 'run-a')
    if change == 'gone':
        statefile.unlink()
    with SSEServer([simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 1, 'warmup': 0,
                   'metrics': 'none', 'lease': {'statefile': str(statefile), 'run_id': 'run-a', 'ttl': 60}},
                  expect=FailJson)
        assert srv.posts == []
    assert why in res['lease_lost'] and 'bench' not in res
    assert res['msg'].endswith('; nothing was measured')


def test_a_lease_held_by_the_controller_lets_the_benchmark_finish(tmp_path):
    statefile = _guard_state(tmp_path, 60)
    with SSEServer([simple_plan(2)]) as srv:
        res = run({'url': srv.url, 'model': 'm', 'prompts': ['a'], 'max_tokens': 2, 'requests': 1, 'warmup': 0,
                   'metrics': 'none', 'lease': {'statefile': str(statefile), 'run_id': 'run-a', 'ttl': 60}})
    assert 'lease_lost' not in res and res['bench']['ok'] == 1


def test_the_lease_option_is_documented_as_watched_with_the_shared_suboptions():
    from ansible_collections.llmops.specdec.plugins.module_utils import _lease
    doc = yaml.safe_load(spec_bench.DOCUMENTATION)
    assert 'llmops.specdec.lease' not in doc['extends_documentation_fragment']  # that one renews
    lease = doc['options']['lease']
    assert lease['type'] == 'dict' and 'never renews' in ' '.join(lease['description'])
    assert {k: (v['type'], v.get('required', False)) for k, v in lease['suboptions'].items()} == {
        k: (v['type'], v.get('required', False)) for k, v in _lease.LEASE_ARGSPEC['options'].items()}
