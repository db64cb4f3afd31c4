"""verdict_* filters through Jinja2 as playbooks call them (summary keys as strings, errors wrapped)."""
from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from jinja2 import Environment

from ansible_collections.llmops.specdec.plugins.filter.verdict import FilterModule

BENCH_BASE = {"levels": [{"concurrency": 1, "ok": 8, "errors": 0, "output_tok_s": 80.0,
                          "tpot_ms": {"median": 12.0}, "ttft_ms": {"median": 20.0}}]}
BENCH_FAST = {"levels": [{"concurrency": 1, "ok": 8, "errors": 0, "output_tok_s": 120.0,
                          "tpot_ms": {"median": 8.0}, "ttft_ms": {"median": 21.0}}]}


@pytest.fixture(name="env")
def env_fixture():
    env = Environment()
    env.filters.update({k.rsplit(".", maxsplit=1)[-1]: v for k, v in FilterModule().filters().items()})
    return env


def render(env, template, **kw):
    return env.from_string(template).render(**kw)


def test_summary_keys_survive_json_and_decide_keeps_a_clear_win(env):
    base = json.loads(render(env, "{{ b | verdict_summary | tojson }}", b=BENCH_BASE))
    assert list(base["levels"]) == ["1"]
    out = render(env, "{% set v = (c | verdict_summary) | verdict_decide(b, {}) %}{{ v.decision }} {{ '%.2f' % v.speedup }}",
                 c=BENCH_FAST, b=base)
    assert out == "keep 1.50"


def test_decide_rolls_back_and_explains(env):
    out = render(env, "{{ ((b | verdict_summary) | verdict_decide(c | verdict_summary)).reason }}",
                 b=BENCH_BASE, c=BENCH_FAST)
    assert out == "c=1 output 80.0 vs 120.0 tok/s = x0.67, needs >= x1.05; c=1 TPOT 12.0 vs 8.0 ms = x1.50, allowed <= x1.05"


def test_thresholds_merge_and_bad_names_raise_filter_errors(env):
    assert render(env, "{{ {'min_speedup': '1.2'} | verdict_thresholds }}").startswith("{'min_speedup': 1.2")
    with pytest.raises(AnsibleFilterError, match="verdict_thresholds: unknown threshold 'speedup'"):
        render(env, "{{ {'speedup': 2} | verdict_thresholds }}")
    with pytest.raises(AnsibleFilterError, match="verdict_summary: benchmark result has no levels"):
        render(env, "{{ {'levels': []} | verdict_summary }}")
