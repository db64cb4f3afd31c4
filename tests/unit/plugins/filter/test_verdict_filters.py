# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
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


def _sampled(tok_s, n=24, c=1):
    e2e = [256 / tok_s * 1000.0 * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(n)]
    return {"concurrency": c, "ok": n, "errors": 0, "output_tok_s": tok_s, "duration_s": sum(e2e) / 1000.0,
            "tpot_ms": {"median": 1000.0 / tok_s}, "ttft_ms": {"median": 20.0},
            "samples": {"e2e_ms": e2e, "output_tokens": [256] * n, "tpot_ms": [x / 256 for x in e2e],
                        "ttft_ms": [20.0 + (i % 3) for i in range(n)]}}


def test_booleans_are_refused_as_thresholds_through_jinja(env):
    with pytest.raises(AnsibleFilterError, match="verdict_thresholds: threshold min_speedup must be a number, not a boolean"):
        render(env, "{{ {'min_speedup': true} | verdict_thresholds }}")
    with pytest.raises(AnsibleFilterError, match="verdict_plan: plan setting alpha must be a number, not a boolean"):
        render(env, "{{ {'alpha': false} | verdict_plan }}")


def test_rounds_plan_problems_and_the_line_as_the_role_calls_them(env):
    base = {"max_tokens": 256, "levels": [_sampled(80.0, n=72)]}
    fast = {"max_tokens": 256, "levels": [_sampled(120.0)]}
    plan = json.loads(render(env, "{{ {} | verdict_plan | tojson }}"))
    assert plan["rounds"] == [24, 48, 72]
    assert render(env, "{{ b | verdict_summary(256) | verdict_problems | length }}", b=base) == "0"
    verdict = json.loads(render(env, "{{ [c | verdict_summary] | verdict_round(b | verdict_summary, {}, {}, 256) | tojson }}",
                                c=fast, b=base))
    assert (verdict["decision"], verdict["verdict"], verdict["requests"]) == ("keep", "keep", {"1": 24})
    line = render(env, "{{ v | verdict_line }}", v=dict(verdict, host="h1", label="ngram k=2", suite="chat", outcome="kept"))
    assert line.startswith("h1: KEPT ngram k=2 on chat (x1.50 [")
    drift = json.loads(render(env, "{{ b | verdict_drift(b) | tojson }}", b=base))
    assert drift["unstable"] is False


def test_an_all_failed_baseline_is_invalid_through_the_filters(env):
    broken = {"levels": [{"concurrency": 1, "ok": 0, "errors": 8, "output_tok_s": 0.0, "error_kinds": {"http_5xx": 8}}]}
    out = render(env, "{{ (c | verdict_summary) | verdict_decide(b | verdict_summary) | tojson }}", c=BENCH_FAST, b=broken)
    verdict = json.loads(out)
    assert (verdict["decision"], verdict["verdict"], verdict["speedup"]) == ("rollback", "invalid", None)
    assert "Infinity" not in out and "NaN" not in out
    problems = json.loads(render(env, "{{ b | verdict_summary | verdict_problems | tojson }}", b=broken))
    assert problems == [{"side": "baseline", "level": 1, "why": "every request failed (8 error(s): http_5xx=8)"}]


def test_verdict_baseline_through_jinja(env):
    settings = {"host": "h", "engine": "vllm", "model": "m", "suite": "reasoning", "api": "completions",
                "concurrency": [1], "max_tokens": 256, "warmup": 1, "ignore_eos": True, "unit_sha256": "ab"}
    summary = json.loads(render(env, "{{ b | verdict_summary | tojson }}", b={"levels": [_sampled(80.0, n=72)]}))
    stored = {"measured_epoch": 100.0, "settings": settings, "summary": summary}
    out = render(env, "{% set c = s | verdict_baseline(k, 3600, {}, 72, 200.0) %}{{ c.usable }} {{ c.why }}", s=stored, k=settings)
    assert out == "True stored baseline, 100 s old, same settings"
    out = render(env, "{{ (s | verdict_baseline(k, 3600, {}, 72, 5000.0)).why }}", s=stored, k=settings)
    assert out == "the stored baseline is 1.4 h old (at most 1.0 h)"
    with pytest.raises(AnsibleFilterError, match="verdict_baseline: baseline settings must be a mapping"):
        render(env, "{{ s | verdict_baseline(none) }}", s=stored)


def test_verdict_baseline_says_what_a_switch_does_and_words_the_refusal(env):
    settings = {"host": "h", "engine": "vllm", "model": "m", "suite": "coding", "api": "completions",
                "concurrency": [1], "max_tokens": 256, "warmup": 1, "ignore_eos": True, "unit_sha256": "ab"}
    # As roles/spec_switch/tasks/baseline.yml calls it: keyword arguments after the positional ones.
    template = ("{% set c = s | verdict_baseline(k, 3600, {}, 72, missing=m, key='vllm__m__coding', state_dir='/var/lib/x',"
                " host='gpu1') %}{{ c.action }}|{{ c.msg }}")
    assert render(env, template, s=None, k=settings, m="measure") == "measure|None"
    assert render(env, template, s=None, k=settings, m="fail") == (
        "fail|no baseline for vllm__m__coding in /var/lib/x/baselines on gpu1; run playbooks/baseline.yml first,"
        " or set spec_switch_missing_baseline=measure. Nothing was changed.")
    with pytest.raises(AnsibleFilterError, match="verdict_baseline: missing_baseline must be one of measure, fail"):
        render(env, template, s=None, k=settings, m="Fail")


def test_verdict_decided_by_names_the_highest_failing_level():
    from ansible_collections.llmops.specdec.plugins.filter.levels import FilterModule as LevelFilters
    decided = LevelFilters().filters()["verdict_decided_by"]
    verdict = {"verdict": "rollback", "checks": [{"level": 1, "figure": "output_tok_s", "status": "pass", "ratio": 1.2},
                                                 {"level": 16, "figure": "output_tok_s", "status": "fail", "ratio": 0.7}]}
    assert decided(verdict) == {"level": 16, "figure": "output_tok_s", "status": "fail"}
