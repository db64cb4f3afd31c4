# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_levels: the concurrency levels a switch is judged at (issue 32, item 4), and the level that decided."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _levels


@pytest.mark.parametrize("value, cap, want", [
    (0, None, 1), (0.4, None, 1), (1, None, 1), (1.2, None, 2), (5, None, 8), (8, None, 8), (8.5, None, 16),
    (300, None, 256), (40, 32, 32), (3, 1, 1),
])
def test_ladder_rounds_up_to_a_power_of_two_within_the_cap(value, cap, want):
    assert _levels.ladder_up(value, cap) == want


def test_busy_samples_give_one_and_their_median_and_p90_rounded_up():
    # production: mostly 10-13 running, bursts to 20, idle gaps that say nothing about batch sizes
    samples = [0, 0, 10, 11, 12, 12, 13, 12, 11, 20, 19, 0, 12]
    out = _levels.from_running(samples, "vllm:num_requests_running")
    assert out["source"] == "observed" and out["levels"] == [1, 16, 32]
    assert out["samples"] == 13 and out["busy"] == 10 and out["median"] == 12.0 and out["max"] == 20
    assert out["p90"] == pytest.approx(19.1)
    assert out["why"].startswith("vllm:num_requests_running while busy: median 12, p90 19.1 running request(s) over 10")


def test_the_cap_bounds_the_levels_and_says_so():
    out = _levels.from_running([100, 120, 140, 150], "g", max_level=64)
    assert out["levels"] == [1, 64] and "(capped at 64)" in out["why"]


def test_a_single_stream_service_is_judged_at_one_only():
    out = _levels.from_running([1, 1, 1, 0, 1], "g")
    assert out["source"] == "observed" and out["levels"] == [1]


@pytest.mark.parametrize("samples, gauge, error, why", [
    ([], None, "no engine metrics (none)", "the engine exports no running-request gauge: no engine metrics (none)"),
    ([None, None], "g", "GET /metrics returned 404: x", "g could not be read: GET /metrics returned 404: x"),
    ([0, 0, 0, 0], "g", None, "the engine was busy in 0 of 4 sample(s) of g (fewer than 3)"),
    ([0, 5, 0, 6], "g", None, "the engine was busy in 2 of 4 sample(s) of g (fewer than 3)"),
])
def test_without_enough_busy_samples_the_default_levels_are_used_and_why(samples, gauge, error, why):
    out = _levels.from_running(samples, gauge, error=error)
    assert out["source"] == "fallback" and out["levels"] == [1, 8]
    assert out["why"] == why + ": the default levels"


def test_the_fallback_is_bounded_too():
    assert _levels.from_running([], None, max_level=4)["levels"] == [1, 4]


def test_named_levels_stay_as_named():
    assert _levels.named([8, 1]) == {"source": "named", "levels": [8, 1],
                                     "why": "the levels the operator named (spec_switch_bench_concurrency)"}


def _check(level, figure, status, ratio=None):
    return {"level": level, "figure": figure, "status": status, "ratio": ratio}


def test_the_highest_failing_level_decided_a_rollback():
    verdict = {"verdict": "rollback", "checks": [
        _check(1, "output_tok_s", "pass", 1.17), _check(8, "output_tok_s", "pass", 1.1),
        _check(16, "tpot_ms", "fail"), _check(32, "output_tok_s", "fail", 0.6), _check(32, "tpot_ms", "fail")]}
    assert _levels.deciding(verdict) == {"level": 32, "figure": "output_tok_s", "status": "fail"}


def test_the_smallest_speed_up_decided_a_keep():
    verdict = {"verdict": "keep", "checks": [_check(1, "output_tok_s", "pass", 1.17), _check(16, "output_tok_s", "pass", 1.08),
                                             _check(16, "ttft_ms", "pass", 0.9)]}
    assert _levels.deciding(verdict) == {"level": 16, "figure": "output_tok_s", "status": "pass"}


def test_the_highest_open_level_decided_an_inconclusive_one_and_the_first_invalid_an_invalid_one():
    verdict = {"verdict": "inconclusive", "checks": [_check(1, "output_tok_s", "open", 1.03), _check(8, "ttft_ms", "open"),
                                                     _check(8, "output_tok_s", "pass", 1.2)]}
    assert _levels.deciding(verdict) == {"level": 8, "figure": "ttft_ms", "status": "open"}
    invalid = {"verdict": "invalid", "checks": [], "invalid": [{"side": "candidate", "level": 16, "why": "x"}]}
    assert _levels.deciding(invalid) == {"level": 16, "figure": "invalid", "status": "invalid"}


@pytest.mark.parametrize("verdict", [None, {}, {"verdict": "rollback", "checks": []}, {"verdict": "keep", "checks": []}])
def test_nothing_decided_without_checks(verdict):
    assert _levels.deciding(verdict) is None


# ---------------------------------------------------------------- in the verdict line (issue 32)

from ansible_collections.llmops.specdec.plugins.module_utils import _suites, _verdict_explain  # noqa: E402

OBSERVED = _levels.from_running([10, 11, 12, 12, 13, 12, 11, 20, 19, 12], "vllm:num_requests_running")
COLLAPSE = {"host": "gpu1", "outcome": "rolled_back", "label": "mtp k=1", "suite": "reasoning", "speedup": 1.17,
            "speedup_ci": [1.12, 1.22], "verdict": "rollback",
            "reason": "c=32 output 41.2 vs 81.0 tok/s = x0.51 [0.47, 0.55], cannot be shown >= x1.02",
            "checks": [_check(1, "output_tok_s", "pass", 1.17), _check(32, "output_tok_s", "fail", 0.51)],
            "levels": OBSERVED, "prompts": _suites.shipped_source("reasoning")}


def test_the_line_says_where_the_levels_came_from_which_decided_and_warns_on_synthetic_prompts():
    assert _verdict_explain.verdict_line(COLLAPSE) == (
        "gpu1: ROLLED BACK mtp k=1 on reasoning (x1.17 [1.12, 1.22]) - c=32 output 41.2 vs 81.0 tok/s = x0.51 [0.47, 0.55], "
        "cannot be shown >= x1.02; levels 1,16,32 from production's batch (busy median 12, p90 19.1 running), c=32 decided; "
        "WARNING synthetic prompts (shipped suite reasoning): set spec_switch_prompts_file to judge on your traffic")


def test_the_line_names_the_operators_prompts_by_digest_and_default_or_named_levels():
    source = {"source": "request_log", "name": "requests.jsonl", "sha256": "ab" * 32, "prompts": 120, "synthetic": False}
    rec = dict(COLLAPSE, levels=_levels.from_running([0, 0, 0], "g"), prompts=source,
               checks=[_check(1, "output_tok_s", "pass", 1.17), _check(8, "output_tok_s", "fail", 0.51)])
    assert _verdict_explain.verdict_line(rec).endswith(
        "; levels 1,8 by default (the engine was busy in 0 of 3 sample(s) of g (fewer than 3)), c=8 decided; "
        "on the operator's request log requests.jsonl (120 prompts, sha256 abababababab)")
    named = dict(rec, levels=_levels.named([1]), prompts=None)
    assert _verdict_explain.verdict_line(named).endswith("cannot be shown >= x1.02; levels 1 named")


def test_a_record_from_before_reads_as_before():
    old = {k: v for k, v in COLLAPSE.items() if k not in ("levels", "prompts")}
    assert _verdict_explain.verdict_line(old).endswith("cannot be shown >= x1.02")
