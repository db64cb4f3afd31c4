# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats as vs
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.verdict_inputs import level, marginal_rounds, run_of, sampled


BASE = vs.summarize({"levels": [level(1, 82.0, 12.2, 50.0), level(8, 500.0, 15.0, 60.0)]})


def test_seed_story_ngram_slower_is_rolled_back_with_the_figures():
    cand = vs.summarize({"levels": [level(1, 41.0, 24.4, 52.0), level(8, 300.0, 26.0, 61.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "rollback"
    assert out["speedup"] == pytest.approx(0.5)
    assert "c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05" in out["reason"]
    assert "TPOT 24.4 vs 12.2 ms = x2.00" in out["reason"]


def test_clear_win_on_every_level_is_kept():
    cand = vs.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 600.0, 12.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "keep"
    assert out["speedup"] == pytest.approx(130 / 82)
    assert all(c["ok"] for c in out["checks"])


def test_win_single_stream_but_loss_under_load_rolls_back():
    cand = vs.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 450.0, 16.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "rollback"
    assert out["reason"].startswith("c=8 output 450.0 vs 500.0")


def test_errors_above_the_limit_make_the_candidate_invalid_and_roll_back_even_when_faster():
    cand = vs.summarize({"levels": [level(1, 130.0, 7.6, 55.0, errors=1, completed=9),
                                    level(8, 600.0, 12.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert (out["decision"], out["verdict"]) == ("rollback", "invalid")
    assert out["invalid"] == [{"side": "candidate", "level": 1, "why": "errors 10.0% [1.8%, 40.4%] above the limit 1.0%"}]
    assert out["reason"] == "candidate c=1 invalid: errors 10.0% [1.8%, 40.4%] above the limit 1.0%"


def test_thresholds_are_overridable_and_only_known_keys():
    cand = vs.summarize({"levels": [level(1, 84.0, 11.9, 50.0), level(8, 510.0, 14.9, 60.0)]})
    assert v.decide(BASE, cand)["decision"] == "rollback"  # x1.02 < x1.05
    assert v.decide(BASE, cand, {"min_speedup": 1.01})["decision"] == "keep"
    with pytest.raises(v.VerdictError, match="unknown threshold 'speedup'; allowed: max_error_rate"):
        v.thresholds({"speedup": 1})
    with pytest.raises(v.VerdictError, match="must be a number"):
        v.thresholds({"min_speedup": "fast"})
    with pytest.raises(v.VerdictError, match="must be >= 0"):
        v.thresholds({"max_error_rate": -1})
    assert v.thresholds({"min_speedup": "1.2", "max_error_rate": None})["min_speedup"] == 1.2  # survey strings


def test_levels_must_overlap():
    cand = vs.summarize({"levels": [level(4, 90.0, 11.0, 50.0)]})
    with pytest.raises(v.VerdictError, match="share no concurrency"):
        v.decide(BASE, cand)


def test_a_baseline_read_back_from_json_compares_like_the_original():
    stored = json.loads(json.dumps(BASE))
    assert set(stored["levels"]) == {"1", "8"}
    cand = vs.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 600.0, 12.0, 65.0)]})
    assert v.decide(stored, cand) == v.decide(BASE, cand)


# --------------------------------------------------------------------------- settings

@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_thresholds(value):
    with pytest.raises(v.VerdictError, match="threshold min_speedup must be a number, not a boolean"):
        v.thresholds({"min_speedup": value})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "-inf", "nan"])
def test_thresholds_must_be_finite(value):
    with pytest.raises(v.VerdictError, match="threshold max_tpot_regression must be a finite number"):
        v.thresholds({"max_tpot_regression": value})


def test_thresholds_error_rate_is_a_share_and_must_be_a_mapping():
    with pytest.raises(v.VerdictError, match="must be <= 1"):
        v.thresholds({"max_error_rate": 2})
    with pytest.raises(v.VerdictError, match="thresholds must be a mapping"):
        v.thresholds(["min_speedup"])


def test_plan_defaults_rounds_and_validation():
    plan = v.plan()
    assert plan["rounds"] == [24, 48, 72]
    assert v.plan({"first_round": 8, "round_requests": 16, "max_requests": 40})["rounds"] == [8, 24, 40]
    assert v.plan({"first_round": 100})["rounds"] == [72]
    assert v.plan(dict(plan))["rounds"] == plan["rounds"]  # a plan read back from a verdict is accepted
    with pytest.raises(v.VerdictError, match="unknown plan setting 'budget'"):
        v.plan({"budget": 3})
    with pytest.raises(v.VerdictError, match="plan setting alpha must be a number, not a boolean"):
        v.plan({"alpha": True})
    with pytest.raises(v.VerdictError, match="plan setting max_requests must be a whole number >= 1"):
        v.plan({"max_requests": 2.5})
    with pytest.raises(v.VerdictError, match="plan setting alpha must be < 0.5"):
        v.plan({"alpha": 0.5})
    with pytest.raises(v.VerdictError, match="plan setting max_seconds must be > 0"):
        v.plan({"max_seconds": 0})
    assert v.plan({"host_shift": 0})["host_shift"] == 0.0


# --------------------------------------------------------------------------- broken inputs (issue 12, item 7)

SAMPLED_BASE = run_of(sampled(1, 72), sampled(8, 72, e2e_ms=3500.0))


def test_a_baseline_whose_requests_all_failed_is_invalid_not_an_infinite_speedup():
    # issue 12: such a baseline was stored as 0 tok/s and a 900 ms/token candidate was kept with speed-up inf
    broken = run_of({"concurrency": 1, "ok": 0, "errors": 8, "error_kinds": {"http_5xx": 8}, "output_tok_s": 0.0,
                     "tpot_ms": {"median": None}, "ttft_ms": {"median": None}})
    slow = run_of(dict(sampled(1, 8, e2e_ms=230000.0, tpot=900.0)))
    for out in (v.decide(broken, slow), v.decide(vs.summarize(broken), vs.summarize(slow))):
        assert (out["decision"], out["verdict"]) == ("rollback", "invalid")
        assert out["invalid"] == [{"side": "baseline", "level": 1, "why": "every request failed (8 error(s): http_5xx=8)"}]
        assert out["speedup"] is None and out["speedup_ci"] is None
        assert out["reason"] == "baseline c=1 invalid: every request failed (8 error(s): http_5xx=8) - re-measure the baseline"
        json.dumps(out, allow_nan=False)


def test_a_legacy_summary_at_0_tok_s_is_invalid():
    base = vs.summarize({"levels": [level(1, 0.0, 12.0, 50.0)]})
    out = v.decide(base, vs.summarize({"levels": [level(1, 80.0, 12.0, 50.0)]}))
    assert out["verdict"] == "invalid" and out["invalid"][0]["why"] == "0 tok/s"
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("tokens, why", [
    (10 ** 6, "1 request(s) report more output tokens than max_tokens 256 (1e+06)"),
    (-1000, "1 negative output_tokens sample(s) (-1000)"),
])
def test_usage_counts_beyond_max_tokens_or_negative_are_invalid(tokens, why):
    cand = sampled(1, 24)
    cand["samples"]["output_tokens"][3] = tokens
    out = v.decide(SAMPLED_BASE, run_of(cand))
    assert out["verdict"] == "invalid"
    assert out["invalid"] == [{"side": "candidate", "level": 1, "why": why}]
    # max_tokens passed by the caller wins over the one in the result
    assert v.decide(SAMPLED_BASE, run_of(sampled(1, 24), max_tokens=None), max_tokens=100)["verdict"] == "invalid"


@pytest.mark.parametrize("mutate, why", [
    (lambda lv: lv.update(output_tok_s=float("inf")), "output tok/s is not a finite number (inf)"),
    (lambda lv: lv.update(output_tok_s=float("nan")), "output tok/s is not a finite number (nan)"),
    (lambda lv: lv.update(tpot_ms={"median": float("inf")}), "median tpot_ms is inf"),
    (lambda lv: lv["samples"]["e2e_ms"].__setitem__(0, float("nan")), "1 non-finite e2e_ms sample(s) (nan)"),
    (lambda lv: lv["samples"]["ttft_ms"].__setitem__(0, -5.0), "1 negative ttft_ms sample(s) (-5.0)"),
    (lambda lv: lv["samples"]["tpot_ms"].pop(), "samples of unequal length (e2e_ms 24, output_tokens 24, tpot_ms 23, ttft_ms 24)"),
    (lambda lv: lv["samples"]["e2e_ms"].__setitem__(0, 0.0), "end-to-end time of 0 ms in samples"),
])
def test_non_finite_or_impossible_figures_are_invalid(mutate, why):
    cand = sampled(1, 24)
    mutate(cand)
    out = v.decide(SAMPLED_BASE, run_of(cand))
    assert out["verdict"] == "invalid" and out["invalid"][0]["why"] == why
    json.dumps(out, allow_nan=False)


def test_errors_above_the_limit_on_the_baseline_are_named_and_problems_lists_them():
    base = sampled(1, 72)
    base["errors"], base["error_kinds"] = 2, {"timeout": 2}
    assert v.problems(run_of(base)) == [
        {"side": "baseline", "level": 1, "why": "errors 2.7% [0.7%, 9.3%] above the limit 1.0% (timeout=2)"}]
    assert v.problems(SAMPLED_BASE) == []
    out = v.decide(run_of(base), run_of(sampled(1, 24, e2e_ms=2000.0)))
    assert out["verdict"] == "invalid" and out["reason"].endswith("re-measure the baseline")


# --------------------------------------------------------------------------- sequential verdict

def test_a_clear_win_from_samples_is_kept_in_the_first_round_with_its_interval():
    cand = run_of(sampled(1, 24, e2e_ms=2000.0, tpot=7.7, seed=1), sampled(8, 24, e2e_ms=2300.0, tpot=7.7, seed=1))
    out = v.decide(SAMPLED_BASE, [cand], final=False)
    assert (out["decision"], out["verdict"], out["round"], out["method"]) == ("keep", "keep", 1, "samples")
    low, high = out["speedup_ci"]
    assert low < out["speedup"] < high and out["speedup"] == pytest.approx(1.5, rel=0.03)
    assert out["reason"].startswith("c=1 output ")
    assert "shown >= x1.02 with a 2% host shift (bound x" in out["reason"]
    assert all(c["status"] == "pass" for c in out["checks"])
    assert out["next"] is None
    json.dumps(out, allow_nan=False)


def test_a_clear_loss_is_rolled_back_after_one_round_naming_the_failing_checks():
    cand = run_of(sampled(1, 24, e2e_ms=6000.0, tpot=23.0, seed=2))
    out = v.decide(SAMPLED_BASE, [cand], final=False)
    assert (out["decision"], out["verdict"], out["round"]) == ("rollback", "rollback", 1)
    assert out["reason"].startswith("c=1 output ")
    assert "cannot be shown >= x1.02" in out["reason"] and "c=1 TPOT 23.0 vs 11.5 ms" in out["reason"]
    assert out["speedup"] == pytest.approx(0.5, rel=0.03)


def test_an_undecided_round_asks_for_the_next_one_and_calling_per_round_equals_one_call():
    rounds = marginal_rounds(3)
    first = v.decide(SAMPLED_BASE, rounds[:1], final=False)
    assert (first["decision"], first["verdict"]) == ("continue", "continue")
    assert first["next"]["requests"] == 24 and first["next"]["final"] is False
    assert first["reason"].startswith("round 1, 24 request(s) at c=1 c=8; next round 24 request(s) at ")
    # what the role does: after each round, all rounds so far; it stops at the first decision
    answers = []
    for k in range(1, 4):
        answers.append(v.decide(SAMPLED_BASE, rounds[:k], final=False))
        if answers[-1]["decision"] != "continue":
            break
    once = v.decide(SAMPLED_BASE, rounds, final=False)
    assert once == answers[-1]
    # rounds sent after a decision do not change it
    assert v.decide(SAMPLED_BASE, rounds + marginal_rounds(1, seed=40), final=False)["round"] == once["round"]


def test_the_last_planned_round_is_announced_and_ends_inconclusive_or_decided():
    rounds = marginal_rounds(3)
    second = v.decide(SAMPLED_BASE, rounds[:2], final=False)
    assert second["next"] == {"requests": 24, "concurrency": [1, 8], "final": True}
    last = v.decide(SAMPLED_BASE, rounds, final=False)
    assert (last["decision"], last["verdict"], last["round"]) == ("rollback", "inconclusive", 3)
    assert last["reason"].startswith("not shown faster after 72 request(s) at c=1 c=8: c=1 output ")


def test_a_level_whose_checks_all_passed_is_not_measured_again():
    cand = run_of(sampled(1, 24, e2e_ms=2000.0, tpot=7.7, seed=5), sampled(8, 24, e2e_ms=3500.0 / 1.05, tpot=11.0, seed=5))
    out = v.decide(SAMPLED_BASE, [cand], final=False)
    assert out["next"]["concurrency"] == [8]
    # the next round only measures c=8; c=1 stays passed
    again = v.decide(SAMPLED_BASE, [cand, run_of(sampled(8, 24, e2e_ms=3500.0 / 1.05, tpot=11.0, seed=6))], final=False)
    assert [c for c in again["checks"] if c["level"] == 1 and c["figure"] == "output_tok_s"][0]["status"] == "pass"
    assert again["requests"] == {1: 24, 8: 48}


def test_the_seconds_budget_ends_the_rounds():
    rounds = marginal_rounds(1)
    # one round took 24 * 3 s at c=1 plus 3 waves at c=8 (about 82 s): a second one does not fit in 100 s
    out = v.decide(SAMPLED_BASE, rounds, plan_overrides={"max_seconds": 100}, final=False)
    assert (out["decision"], out["verdict"], out.get("budget")) == ("rollback", "inconclusive", "seconds")
    assert "(seconds budget 100 s)" in out["reason"]
    # room for exactly one more round: it is announced as the last one (and so spends the alpha left)
    out = v.decide(SAMPLED_BASE, rounds, plan_overrides={"max_seconds": 200}, final=False)
    assert out["next"] == {"requests": 24, "concurrency": [1, 8], "final": True}


def test_final_judges_what_it_has_inconclusive_when_undecided():
    out = v.decide(SAMPLED_BASE, marginal_rounds(1), final=True)
    assert (out["decision"], out["verdict"], out["next"]) == ("rollback", "inconclusive", None)
    assert out["reason"].startswith("not shown faster after 24 request(s) at c=1 c=8: c=1 output ")


def test_same_inputs_same_verdict_and_json_round_trip():
    rounds = marginal_rounds(2)
    one = v.decide(SAMPLED_BASE, rounds, final=False)
    stored = json.loads(json.dumps(vs.summarize(SAMPLED_BASE)))
    assert v.decide(stored, [json.loads(json.dumps(vs.summarize(r))) for r in rounds], final=False) == one


def test_min_speedup_zero_keeps_anything_that_is_valid():
    keep_any = {"min_speedup": 0.0, "max_tpot_regression": 100.0, "max_ttft_regression": 100.0, "max_error_rate": 1.0}
    out = v.decide(SAMPLED_BASE, run_of(sampled(1, 24, e2e_ms=6000.0, tpot=23.0)), keep_any)
    assert out["decision"] == "keep"


# --------------------------------------------------------------------------- drift

def test_drift_flags_a_host_that_moved_beyond_the_allowed_shift():
    same = run_of(sampled(1, 72, seed=9), sampled(8, 72, e2e_ms=3500.0, seed=9))
    steady = v.drift(SAMPLED_BASE, same)
    assert steady["unstable"] is False and steady["reason"].startswith("within the 2% host shift: c=1 output tok/s x")
    slower = run_of(sampled(1, 72, e2e_ms=3000.0 / 0.92, tpot=11.5 / 0.92, seed=9), sampled(8, 72, e2e_ms=3500.0, seed=9))
    moved = v.drift(SAMPLED_BASE, slower)
    assert moved["unstable"] is True
    assert moved["reason"].startswith("c=1 output tok/s after/before x0.9")
    assert "beyond the 2% host shift allowed" in moved["reason"]
    assert {(r["level"], r["figure"]) for r in moved["levels"] if r["beyond"]} == {(1, "output_tok_s"), (1, "tpot_ms")}
    # without samples: the point ratio against the same band
    assert v.drift(BASE, vs.summarize({"levels": [level(1, 70.0, 12.2, 50.0), level(8, 500.0, 15.0, 60.0)]}))["unstable"]


def test_drift_says_whether_the_host_moved_to_the_slow_side():
    slower = run_of(sampled(1, 72, e2e_ms=3000.0 / 0.92, tpot=11.5 / 0.92, seed=9), sampled(8, 72, e2e_ms=3500.0, seed=9))
    faster = run_of(sampled(1, 72, e2e_ms=3000.0 * 0.92, tpot=11.5 * 0.92, seed=9), sampled(8, 72, e2e_ms=3500.0, seed=9))
    down, up = v.drift(SAMPLED_BASE, slower), v.drift(SAMPLED_BASE, faster)
    assert down["unstable"] and down["regressed"]
    assert {(r["level"], r["figure"]) for r in down["levels"] if r["worse"]} == {(1, "output_tok_s"), (1, "tpot_ms")}
    assert up["unstable"] and not up["regressed"] and not any(r["worse"] for r in up["levels"])
    assert v.drift(SAMPLED_BASE, run_of(sampled(1, 72, seed=9), sampled(8, 72, e2e_ms=3500.0, seed=9)))["regressed"] is False


SETTINGS = {"host": "gpu1", "engine": "vllm", "model": "m", "suite": "reasoning", "api": "completions",
            "concurrency": [1, 8], "max_tokens": 256, "warmup": 1, "ignore_eos": True, "unit_sha256": "ab12"}


def stored_baseline(**over):
    out = {"measured_epoch": 1000.0, "settings": dict(SETTINGS), "summary": vs.summarize(SAMPLED_BASE)}
    out.update(over)
    return json.loads(json.dumps(out))  # as read back from the host


def test_a_fresh_stored_baseline_with_the_same_settings_is_used():
    out = v.baseline_check(stored_baseline(), dict(SETTINGS, concurrency=["8", 1]), 4 * 3600, now=1000.0 + 1800,
                           min_requests=72)
    assert out == {"usable": True, "age_s": 1800.0, "why": "stored baseline, 0.5 h old, same settings"}
    # any age when no limit is given (the nightly comparison)
    assert v.baseline_check(stored_baseline(), SETTINGS, None, now=1e9)["usable"] is True


@pytest.mark.parametrize("stored, settings, why", [
    (None, SETTINGS, "no stored baseline"),
    ({"summary": {"levels": {}}}, SETTINGS, "no stored baseline"),
    (stored_baseline(settings=None), SETTINGS, "has no benchmark settings (stored by an older version)"),
    (stored_baseline(), dict(SETTINGS, max_tokens=128), "other settings (max_tokens 256, now 128)"),
    (stored_baseline(), dict(SETTINGS, concurrency=[1]), "other settings (concurrency [1, 8], now [1])"),
    (stored_baseline(), dict(SETTINGS, unit_sha256="cd34"), "other settings (unit_sha256 ab12, now cd34)"),
    (stored_baseline(), dict(SETTINGS, host="gpu2", suite="coding"), "(host gpu1, now gpu2; suite reasoning, now coding)"),
    (stored_baseline(measured_epoch=1000.0 - 5 * 3600), SETTINGS, "is 5.0 h old (at most 4.0 h)"),
    (stored_baseline(measured_epoch=None), SETTINGS, "has no measurement time"),
    (stored_baseline(measured_epoch=5000.0), SETTINGS, "measured 1.1 h in the future (clock skew)"),
])
def test_a_stored_baseline_is_refused_when_it_is_not_comparable(stored, settings, why):
    out = v.baseline_check(stored, settings, 4 * 3600, now=1000.0)
    assert out["usable"] is False
    assert why in out["why"]


NAMES = {"key": "vllm__m__reasoning", "state_dir": "/var/lib/llmops-specdec"}


def test_what_a_switch_does_with_a_stored_baseline_use_measure_or_fail():
    fresh, old = stored_baseline(), stored_baseline(measured_epoch=1000.0 - 5 * 3600)
    used = v.baseline_check(fresh, SETTINGS, 4 * 3600, now=1000.0, missing="measure", **NAMES)
    assert (used["usable"], used["action"], used["msg"]) == (True, "use", None)
    measured = v.baseline_check(old, SETTINGS, 4 * 3600, now=1000.0, missing="measure", **NAMES)
    assert (measured["usable"], measured["action"], measured["msg"]) == (False, "measure", None)
    assert measured["why"] == "the stored baseline is 5.0 h old (at most 4.0 h)"
    # fail means "use what is stored": any age stands (max_age is not applied) ...
    kept = v.baseline_check(old, SETTINGS, 4 * 3600, now=1000.0, missing="fail", **NAMES)
    assert (kept["usable"], kept["action"], kept["msg"]) == (True, "use", None)
    assert kept["why"] == "stored baseline, 5.0 h old, same settings"
    # ... and without missing the result is what it always was
    assert set(v.baseline_check(fresh, SETTINGS, 4 * 3600, now=1000.0)) == {"usable", "age_s", "why"}


def test_with_missing_baseline_fail_the_refusal_names_the_baseline_the_host_and_what_to_run():
    none = v.baseline_check(None, SETTINGS, 4 * 3600, now=1000.0, missing="fail", **NAMES)
    assert (none["usable"], none["action"]) == (False, "fail")
    assert none["msg"] == (
        "no baseline for vllm__m__reasoning in /var/lib/llmops-specdec/baselines on gpu1; run playbooks/baseline.yml first,"
        " or set spec_switch_missing_baseline=measure. Nothing was changed.")
    other = v.baseline_check(stored_baseline(), dict(SETTINGS, unit_sha256="cd34"), 4 * 3600, now=1000.0, missing="fail",
                             host="gpu1.example", **NAMES)
    assert other["action"] == "fail" and other["msg"] == (
        "vllm__m__reasoning on gpu1.example: the stored baseline was measured with other settings (unit_sha256 ab12, now cd34);"
        " run playbooks/baseline.yml, or set spec_switch_missing_baseline=measure. Nothing was changed.")
    # A file that holds no baseline is not "no baseline": the refusal says why it cannot be used.
    empty = v.baseline_check({}, SETTINGS, None, now=1000.0, missing="fail", **NAMES)
    assert empty["msg"].startswith("vllm__m__reasoning on gpu1: no stored baseline; run playbooks/baseline.yml, or set")
    # measure never refuses: nothing stored is measured now
    assert v.baseline_check(None, SETTINGS, 4 * 3600, missing="measure")["action"] == "measure"


def test_missing_baseline_is_measure_or_fail_and_fail_needs_the_names_for_its_message():
    with pytest.raises(v.VerdictError, match="missing_baseline must be one of measure, fail, got 'skip'"):
        v.baseline_check(None, SETTINGS, missing="skip")
    with pytest.raises(v.VerdictError, match="missing_baseline=fail needs key and state_dir for its message"):
        v.baseline_check(None, SETTINGS, missing="fail")
    with pytest.raises(v.VerdictError, match="missing_baseline=fail needs host for its message"):
        v.baseline_check(None, dict(SETTINGS, host=""), missing="fail", **NAMES)


def test_a_stored_baseline_needs_samples_enough_requests_and_no_problems():
    legacy = stored_baseline(summary=BASE)
    assert v.baseline_check(legacy, SETTINGS, now=1000.0)["why"] == "the stored baseline has no per-request samples at c=1"
    few = stored_baseline(summary=vs.summarize(run_of(sampled(1, 24), sampled(8, 24))))
    assert v.baseline_check(few, SETTINGS, now=1000.0, min_requests=72)["why"] == (
        "the stored baseline has 24 request(s) at c=1, the plan measures 72")
    # min_waves (not compared as a setting): at least that many waves of each level.
    assert v.baseline_check(few, dict(SETTINGS, min_waves=3), now=1000.0, min_requests=24)["usable"] is True
    assert v.baseline_check(few, dict(SETTINGS, min_waves=8), now=1000.0, min_requests=24)["why"] == (
        "the stored baseline has 24 request(s) at c=8, the plan measures 64")
    erroring = vs.summarize(SAMPLED_BASE)
    erroring["levels"][8] = dict(erroring["levels"][8], errors=8, error_rate=0.1)
    out = v.baseline_check(stored_baseline(summary=erroring), SETTINGS, now=1000.0)
    assert out["usable"] is False and out["why"].startswith("the stored baseline cannot be judged: c=8 errors 10.0%")
    with pytest.raises(v.VerdictError, match="baseline max_age must be a number, not a boolean"):
        v.baseline_check(stored_baseline(), SETTINGS, True)


def test_a_single_request_with_impossible_usage_makes_the_level_invalid():
    # issue 31, item 11: spec_bench fails such a request as bad_usage; one is enough, whatever the error limit
    cand = sampled(1, 199)
    cand.update(errors=1, error_kinds={"bad_usage": 1})
    out = v.decide(SAMPLED_BASE, run_of(cand))
    assert (out["decision"], out["verdict"]) == ("rollback", "invalid")
    assert out["invalid"] == [{"side": "candidate", "level": 1,
                               "why": "1 request(s) with impossible token counts in the server's usage (bad_usage)"}]
    assert v.decide(SAMPLED_BASE, run_of(sampled(1, 199)))["verdict"] != "invalid"


def test_a_probe_beside_a_short_plan_spends_alpha_over_the_lowest_levels_probe_and_rounds():
    # molecule/fleet's plan (3 + 3 requests) with the default probe of 4: the last look had no alpha left (the
    # probe's requests were counted against max_requests alone), its bound was infinite and the reason failed to
    # format. The lowest level's planned requests include the probe's; every look spends, and all add to alpha.
    base = run_of(sampled(1, 3, seed=1, tokens=32), max_tokens=32)
    rounds = [dict(run_of(sampled(1, 4, seed=2, e2e_ms=2500, tokens=32), max_tokens=32), probe=True),
              run_of(sampled(1, 3, seed=3, e2e_ms=2500, tokens=32), max_tokens=32),
              run_of(sampled(1, 3, seed=4, e2e_ms=2500, tokens=32), max_tokens=32)]
    plan = {"first_round": 3, "round_requests": 3, "max_requests": 6}
    spent = [v.decide(base, rounds[:k], plan_overrides=plan, max_tokens=32, final=False)["alpha_spent"]
             for k in (1, 2, 3)]
    assert 0 < spent[0] < spent[1] < spent[2] == pytest.approx(0.05)
    last = v.decide(base, rounds, plan_overrides=plan, max_tokens=32, final=False)
    assert last["verdict"] == "inconclusive" and "(bound x" in last["reason"]
