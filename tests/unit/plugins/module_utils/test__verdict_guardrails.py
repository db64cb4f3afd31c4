# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _prom, _report
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_guardrails as g
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.verdict_inputs import run_of, sampled

LIMITS = {"max_error_rate": 0.01, "max_ttft_tail_regression": 0.5, "max_prefix_cache_drop": 0.5}


def test_the_mixture_martingale_matches_a_direct_integral():
    # B(k+1, n-k+1) (1 - I_p0) / ((1-p0) p0^k (1-p0)^(n-k)) against a midpoint rule over [p0, 1]
    for k, n, p0 in ((3, 24, 0.01), (0, 24, 0.01), (10, 48, 0.1), (1, 5, 0.3)):
        steps = 20000
        width = (1.0 - p0) / steps
        total = sum(((p0 + (i + 0.5) * width) / p0) ** k * ((1 - p0 - (i + 0.5) * width) / (1 - p0)) ** (n - k)
                    for i in range(steps)) * width / (1.0 - p0)
        assert g.log_mixture(k, n, p0) == pytest.approx(math.log(total), rel=1e-4, abs=1e-6)


def test_no_data_is_no_evidence_and_a_zero_limit_fires_on_the_first_error():
    assert g.log_mixture(0, 0, 0.01) == 0.0
    assert not g.fires(0, 0, 0.01, 0.01)
    assert g.fires(1, 24, 0.0, 0.01) and not g.fires(0, 24, 0.0, 0.01)
    assert not g.fires(24, 24, 1.0, 0.01)


def test_the_lower_bound_is_below_the_rate_and_the_boundary_of_firing():
    for k, n in ((5, 24), (12, 48), (3, 72)):
        low = g.lower_bound(k, n, 0.01)
        assert 0.0 < low < k / float(n)
        assert g.fires(k, n, low * 0.99, 0.01) and not g.fires(k, n, low * 1.01 + 1e-9, 0.01)
    assert g.lower_bound(0, 24, 0.01) == 0.0


def test_looking_after_every_request_does_not_inflate_the_false_stop_rate():
    # A candidate exactly at the limit (2 % errors, limit 2 %) checked after each of 200 requests: the
    # always-valid test stops at most alpha of the runs; a fixed 99 % Wilson bound looked at as often stops far more.
    from ansible_collections.llmops.specdec.plugins.module_utils import _stats
    rng = random.Random(32)
    runs, alpha, limit = 2000, 0.01, 0.02
    mixture_stops = wilson_stops = 0
    for _run in range(runs):
        errors, stopped_m, stopped_w = 0, False, False
        for n in range(1, 201):
            errors += rng.random() < limit
            if not stopped_m and g.fires(errors, n, limit, alpha):
                stopped_m = True
            if not stopped_w and _stats.wilson(errors, n, 1 - 2 * alpha)[0] > limit:
                stopped_w = True
        mixture_stops += stopped_m
        wilson_stops += stopped_w
    assert mixture_stops / float(runs) <= alpha
    assert wilson_stops / float(runs) > 3 * alpha


def test_a_clearly_erroring_candidate_fires_in_its_first_round():
    row = g.error_check(1, 6, 24, 0.01, 0.01)
    assert row["status"] == "fail" and row["figure"] == "guardrail_error_rate"
    assert row["why"].startswith("guardrail error rate: 6/24 errors (25.0%), always-valid lower bound ")
    assert "> the limit 1.0%" in row["why"] and row["bound"] > 0.01
    assert [k for k in range(25) if g.fires(k, 24, 0.01, 0.01)][0] == 4  # 4/24 errors stop it at a 1 % limit
    above = g.error_check(1, 1, 24, 0.01, 0.01)  # 4.2 % > 1 %, not shown: the candidate is measured on
    assert above["status"] == "open" and above["why"].endswith("<= the limit 1.0%, above it but not shown yet")
    assert g.error_check(1, 0, 24, 0.01, 0.01)["status"] == "pass"


def test_the_baseline_quantile_bound_has_its_binomial_coverage():
    values = list(range(1, 73))
    value, exact = g.quantile_upper(values, 0.9, 0.99)
    assert exact and value == 71  # P(Bin(72, 0.9) <= 70) = 0.9954 >= 0.99; <= 69 is 0.979
    assert g.quantile_upper(list(range(1, 25)), 0.9, 0.99) == (24, False)


def ttfts(n, ms, seed, jitter=0.05):
    rng = random.Random(seed)
    return [ms * math.exp(rng.gauss(0, jitter)) for _i in range(n)]


def test_the_ttft_tail_guardrail_fires_on_a_slow_tail_and_holds_on_a_median_shift():
    base = ttfts(72, 50.0, 1)
    # 10 of the candidate's 24 requests wait 4x longer (a draft's prefill stuck behind others); with 24
    # requests the always-valid test needs 9 above the bar to reject "at most 10 %" at alpha 0.01
    tail = ttfts(14, 50.0, 2) + ttfts(10, 200.0, 3)
    row = g.ttft_tail_check(1, base, tail, 0.5, 0.01)
    assert row["status"] == "fail"
    assert row["why"].startswith("guardrail TTFT p90: 10/24 requests above ")
    assert row["events"] == 10 and row["ratio"] > 3
    # 20 % slower everywhere: not a tail blow-up (the median TTFT check's business)
    assert g.ttft_tail_check(1, base, ttfts(24, 60.0, 4), 0.5, 0.01)["status"] == "pass"
    few = g.ttft_tail_check(1, base, ttfts(4, 200.0, 5), 0.5, 0.01)
    assert few["status"] == "pass" and "too few samples" in few["why"]


def test_the_prefix_cache_guardrail_fires_on_a_collapse():
    base = {"hits": 9000, "queries": 10000, "hit_rate": 0.9}
    collapsed = {"hits": 40, "queries": 10000, "hit_rate": 0.004}
    row = g.prefix_check(1, base, collapsed, 0.5, 24)
    assert row["status"] == "fail"
    assert row["why"] == ("guardrail prefix-cache hit rate: 0.4% vs the baseline's 90.0% over 10000 queried tokens, "
                          "below 45.0% (50% of the baseline's)")
    assert g.prefix_check(1, base, {"hits": 8000, "queries": 10000, "hit_rate": 0.8}, 0.5, 24)["status"] == "pass"
    # too few requests, a baseline with nothing to lose, or no figures: not fired / no row
    few = g.prefix_check(1, base, {"hits": 0, "queries": 500, "hit_rate": 0.0}, 0.5, 8)
    assert few["status"] == "pass" and few["why"].endswith("; not judged before 16 requests")
    assert g.prefix_check(1, {"hits": 5, "queries": 10000, "hit_rate": 0.0005}, collapsed, 0.5, 24)["status"] == "pass"
    assert g.prefix_check(1, None, collapsed, 0.5, 24) is None
    assert g.prefix_check(1, base, {"error": "GET /metrics failed"}, 0.5, 24) is None


def test_prefix_cache_rounds_are_merged_by_their_counters():
    merged = g.merge_prefix([{"hits": 10, "queries": 100, "hit_rate": 0.1}, {"error": "x"},
                             {"hits": 90, "queries": 100, "hit_rate": 0.9}])
    assert (merged["hits"], merged["queries"], merged["hit_rate"]) == (100, 200, 0.5)
    assert g.merge_prefix([{"hit_rate": 0.3}, {"hit_rate": 0.2}])["hit_rate"] == 0.2  # a gauge: the latest
    assert g.merge_prefix([None, {"error": "x"}]) is None


def test_check_lists_every_guardrail_and_those_that_fired():
    levels = {1: {"errors": 0, "requests": 24, "base_ttft": ttfts(72, 50.0, 1), "cand_ttft": ttfts(24, 50.0, 2),
                  "base_prefix": {"hits": 900, "queries": 1000, "hit_rate": 0.9},
                  "cand_prefix": {"hits": 0, "queries": 1200, "hit_rate": 0.0}},
              8: {"errors": 0, "requests": 24, "base_ttft": ttfts(72, 60.0, 3), "cand_ttft": ttfts(24, 60.0, 4)}}
    out = g.check(levels, lambda level: LIMITS, 0.01)
    assert [(r["level"], r["figure"]) for r in out["checks"]] == [
        (1, "guardrail_error_rate"), (1, "guardrail_ttft_tail"), (1, "guardrail_prefix_cache"),
        (8, "guardrail_error_rate"), (8, "guardrail_ttft_tail")]
    assert [(r["level"], r["figure"]) for r in out["fired"]] == [(1, "guardrail_prefix_cache")]
    assert g.summary_line(out).startswith("c=1 guardrail prefix-cache hit rate: 0.0% vs the baseline's 90.0%")
    levels[1]["cand_prefix"] = {"hits": 1000, "queries": 1200, "hit_rate": 0.83}
    held = g.check(levels, lambda level: LIMITS, 0.01)
    assert held["fired"] == [] and g.summary_line(held) == "5 guardrail check(s) held (always-valid, alpha 0.01 each)"


# ---------------------------------------------------------------- consulted by the verdict (_verdict.decide)

BASE = run_of(sampled(1, 72), sampled(8, 72, e2e_ms=3500.0))


BASE_PREFIX = {"source": "metrics", "hits": 9000, "queries": 10000, "hit_rate": 0.9, "error": None}


def faster(**overrides):
    """A first round of a candidate x1.15 faster at both levels (kept on speed alone)."""
    one = sampled(1, 24, e2e_ms=3000.0 / 1.15, tpot=11.5 / 1.15, seed=7)
    eight = sampled(8, 24, e2e_ms=3500.0 / 1.15, tpot=11.5 / 1.15, seed=8)
    one.update(overrides)
    return run_of(one, eight)


def test_a_faster_candidate_within_every_guardrail_is_kept_and_the_guardrails_say_so():
    out = v.decide(BASE, [faster()], final=False)
    assert out["decision"] == "keep"
    assert [r["status"] for r in out["guardrails"]["checks"]] == ["pass"] * 4
    assert "guardrail" not in out


def test_errors_shown_above_the_limit_stop_the_candidate_in_its_first_round():
    cand = faster(ok=18, errors=6, error_kinds={"http_5xx": 6})
    out = v.decide(BASE, [cand], final=False)  # verdict_round, round 1 of 3
    assert (out["decision"], out["verdict"], out["guardrail"]) == ("rollback", "rollback", "guardrail_error_rate")
    assert out["reason"].startswith("c=1 guardrail error rate: 6/24 errors (25.0%), always-valid lower bound ")
    assert out["round"] == 1 and out["speedup"] is not None


def test_errors_above_the_limit_but_not_shown_are_measured_on_and_judged_by_the_point_rule_at_the_end():
    cand = faster(ok=23, errors=1, error_kinds={"http_5xx": 1})
    early = v.decide(BASE, [cand], final=False)
    assert early["decision"] == "continue"  # before: invalid at once (a point rate of 4.2 % after 24 requests)
    assert "c=1 guardrail error rate: 1/24 errors (4.2%)" in early["reason"]
    assert early["next"]["concurrency"] == [1]
    last = v.decide(BASE, [cand])  # verdict_decide: the last look, the point rule as before
    assert last["verdict"] == "invalid" and last["invalid"][0]["why"].startswith("errors 4.2% ")


def test_a_ttft_tail_blow_up_stops_a_candidate_that_is_faster():
    cand = faster()
    ttft = cand["levels"][0]["samples"]["ttft_ms"]
    cand["levels"][0]["samples"]["ttft_ms"] = ttft[:12] + [t * 5 for t in ttft[12:]]  # half wait 5x
    out = v.decide(BASE, [cand], final=False)
    assert (out["decision"], out["guardrail"]) == ("rollback", "guardrail_ttft_tail")
    assert out["reason"].startswith("c=1 guardrail TTFT p90: 12/24 requests above ")


def test_a_prefix_cache_collapse_stops_a_candidate_that_is_faster():
    base = run_of(dict(sampled(1, 72), prefix_cache=BASE_PREFIX),
                  sampled(8, 72, e2e_ms=3500.0))
    cand = faster(prefix_cache={"source": "metrics", "hits": 0, "queries": 3400, "hit_rate": 0.0, "error": None})
    out = v.decide(base, [cand], final=False)
    assert (out["decision"], out["guardrail"]) == ("rollback", "guardrail_prefix_cache")
    assert out["reason"] == ("c=1 guardrail prefix-cache hit rate: 0.0% vs the baseline's 90.0% over 3400 queried tokens, "
                             "below 45.0% (50% of the baseline's)")
    # the stored baseline (a summary) keeps its counters
    stored = _verdict_stats.summarize([base, base])  # two rounds merged: their counters summed
    assert stored["levels"][1]["prefix_cache"]["queries"] == 20000
    assert stored["levels"][1]["prefix_cache"]["hit_rate"] == 0.9
    assert v.decide(stored, [cand], final=False)["guardrail"] == "guardrail_prefix_cache"
    assert v.decide(base, [faster()], final=False)["decision"] == "keep"  # the candidate without figures: not judged


def test_guardrail_settings_are_thresholds_and_a_plan_setting():
    assert v.thresholds()["max_ttft_tail_regression"] == 0.5 and v.thresholds()["max_prefix_cache_drop"] == 0.5
    with pytest.raises(v.VerdictError, match="threshold max_prefix_cache_drop is a share and must be <= 1"):
        v.thresholds({"max_prefix_cache_drop": 2})
    assert v.plan({"guardrail_alpha": "0.05"})["guardrail_alpha"] == 0.05
    with pytest.raises(v.VerdictError, match="plan setting guardrail_alpha must be < 0.5"):
        v.plan({"guardrail_alpha": 0.5})
    # a tail allowed to grow 10x: the blow-up above is not stopped by it
    cand = faster()
    ttft = cand["levels"][0]["samples"]["ttft_ms"]
    cand["levels"][0]["samples"]["ttft_ms"] = ttft[:12] + [t * 5 for t in ttft[12:]]
    assert "guardrail" not in v.decide(BASE, [cand], {"max_ttft_tail_regression": 9}, final=False)


def test_the_verdict_line_report_and_textfile_say_which_guardrail_decided_with_its_figures():
    base = run_of(dict(sampled(1, 72), prefix_cache=BASE_PREFIX),
                  sampled(8, 72, e2e_ms=3500.0))
    cand = faster(prefix_cache={"source": "metrics", "hits": 34, "queries": 3400, "hit_rate": 0.01, "error": None})
    verdict = v.decide(base, [cand], final=False)
    rec = {"host": "gpu1", "suite": "reasoning", "label": "mtp k=1", "candidate": {"method": "mtp"},
           "outcome": "rolled_back", "decision": "rollback", "reason": verdict["reason"], "speedup": verdict["speedup"],
           "guardrails": verdict["guardrails"], "guardrail": verdict["guardrail"], "baseline": None, "result": None}
    assert _report.verdict_line(rec).startswith("gpu1: ROLLED BACK mtp k=1 on reasoning (x1.1")
    tail = (" - c=1 guardrail prefix-cache hit rate: 1.0% vs the baseline's 90.0% over 3400 queried tokens, below 45.0% "
            "(50% of the baseline's)")
    assert _report.verdict_line(rec).endswith(tail)
    md = _report.markdown([rec], "now")
    assert "## Guardrails" in md
    assert "- gpu1 mtp k=1: STOPPED - c=1 guardrail prefix-cache hit rate: 1.0% vs the baseline's 90.0%" in md
    text = _prom.switch_textfile(rec, 0)
    assert 'llmops_specdec_switch_guardrail_fired{method="mtp",suite="reasoning",concurrency="1",guardrail="prefix_cache"} 1' in text
    assert 'llmops_specdec_switch_guardrail_fired{method="mtp",suite="reasoning",concurrency="8",guardrail="error_rate"} 0' in text
    assert ('llmops_specdec_switch_prefix_cache_hit_ratio{method="mtp",suite="reasoning",concurrency="1",role="candidate"} 0.01'
            in text)
    held = dict(rec, guardrails=v.decide(BASE, [faster()], final=False)["guardrails"], guardrail=None)
    line = [row for row in _report.markdown([held], "now").splitlines() if row.startswith("- gpu1 mtp k=1: held")]
    assert line and "c=1 guardrail error rate: 0/24 errors (0.0%)" in line[0] and "c=8 guardrail TTFT p90: 0/24" in line[0]
    held_text = _prom.switch_textfile(held, 0)
    fired_lines = [row for row in held_text.splitlines() if row.startswith("llmops_specdec_switch_guardrail_fired{")]
    assert fired_lines and all(row.endswith("} 0") for row in fired_lines)


# ---------------------------------------------------------------- acceptance per position against the method's past

def counted(drafts, per_position):
    """A level's acceptance as spec_bench reads vLLM's counters."""
    accepted = sum(int(round(r * drafts)) for r in per_position)
    return {"source": "vllm_counters", "error": None, "drafts": drafts, "draft_tokens": drafts * len(per_position),
            "accepted_tokens": accepted, "per_position": per_position, "counter_reset": False,
            "acceptance_rate": accepted / float(drafts * len(per_position)), "mean_acceptance_length": 1 + accepted / float(drafts)}


SPEC = {"method": "mtp", "num_speculative_tokens": 2}
KEPT_ACCEPTANCE = {"source": "vllm_counters", "drafts": 600, "accepted_per_position": [480, 330], "per_position": [0.8, 0.55],
                   "drafts_per_position": [600, 600], "draft_tokens": 1200, "accepted_tokens": 810,
                   "mean_acceptance_length": 2.35}
HISTORY = [
    {"engine": "vllm", "model": "m", "suite": "reasoning", "candidate": SPEC, "at": "2026-12-01T00:00:00Z",
     "label": "mtp k=2", "outcome": "kept", "acceptance": KEPT_ACCEPTANCE},
    {"engine": "vllm", "model": "m", "suite": "coding", "candidate": SPEC, "at": "2026-12-02T00:00:00Z",
     "label": "mtp k=2", "outcome": "kept", "acceptance": {"source": "vllm_counters", "drafts": 10}},
    {"engine": "vllm", "model": "m", "suite": "reasoning", "candidate": {"method": "ngram", "num_speculative_tokens": 2},
     "at": "2026-12-03T00:00:00Z", "label": "ngram k=2", "outcome": "rolled_back",
     "acceptance": {"source": "vllm_counters", "drafts": 900}},
]


def test_the_prior_acceptance_is_the_latest_record_of_the_same_method_engine_model_and_suite():
    prior = g.prior_acceptance(HISTORY, "vllm", "m", "reasoning", dict(SPEC, draft_model=None))
    assert (prior["at"], prior["label"], prior["acceptance"]["drafts"]) == ("2026-12-01T00:00:00Z", "mtp k=2", 600)
    assert g.prior_acceptance(HISTORY, "sglang", "m", "reasoning", SPEC) is None
    assert g.prior_acceptance(HISTORY, "vllm", "m", "reasoning", dict(SPEC, num_speculative_tokens=3)) is None
    assert g.prior_acceptance(None, "vllm", "m", "reasoning", SPEC) is None


def test_an_acceptance_drop_against_the_same_methods_past_stops_the_candidate():
    prior = g.prior_acceptance(HISTORY, "vllm", "m", "reasoning", SPEC)
    broken = faster()
    for lv in broken["levels"]:
        lv["acceptance"] = counted(300, [0.3, 0.1])  # a draft head that stopped matching the target
    out = v.decide(BASE, [broken], final=False, prior_acceptance=prior)
    assert (out["decision"], out["guardrail"]) == ("rollback", "guardrail_acceptance")
    assert out["reason"].startswith("c=1 guardrail acceptance: below what mtp k=2 showed on 2026-12-01T00:00:00Z (kept), "
                                    "over all levels: at position 0: 0.80 -> 0.30 (drafted 600 kept, 600 now)")
    same = faster()
    for lv in same["levels"]:
        lv["acceptance"] = counted(300, [0.78, 0.56])
    held = v.decide(BASE, [same], final=False, prior_acceptance=prior)
    assert held["decision"] == "keep"
    row = [r for r in held["guardrails"]["checks"] if r["figure"] == "guardrail_acceptance"][0]
    assert row["status"] == "pass" and row["why"].startswith("guardrail acceptance: as what mtp k=2 showed")
    # no prior record, or a candidate without counts: no row, nothing stopped
    assert "guardrail_acceptance" not in [r["figure"] for r in v.decide(BASE, [broken], final=False)["guardrails"]["checks"]]
    few = faster()
    few["levels"][0]["acceptance"] = counted(20, [0.0, 0.0])
    row = [r for r in v.decide(BASE, [few], final=False, prior_acceptance=prior)["guardrails"]["checks"]
           if r["figure"] == "guardrail_acceptance"][0]
    assert row["status"] == "pass" and "too few drafts" in row["why"]
