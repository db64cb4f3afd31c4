# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_watch: the nightly acceptance watch (drop beyond noise per draft position, never a flag from missing data)."""

from __future__ import annotations

import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _watch

UNIT = "a" * 64


def level(conc, drafts, rates, **extra):
    """One spec_bench level's acceptance as _prom.vllm_acceptance gives it (rates = accepted_i / drafts)."""
    accepted = [int(round(r * drafts)) for r in rates]
    acc = {"source": "vllm_counters", "error": None, "drafts": drafts, "draft_tokens": drafts * len(rates),
           "accepted_tokens": sum(accepted), "acceptance_rate": sum(accepted) / float(drafts * len(rates)) if drafts else None,
           "mean_acceptance_length": 1 + sum(accepted) / float(drafts) if drafts else None,
           "per_position": [a / float(drafts) for a in accepted] if drafts else [], "counter_reset": False, "caveat": None}
    acc.update(extra)
    return {"concurrency": conc, "ok": 24, "errors": 0, "acceptance": acc}


def bench(*levels):
    return {"levels": list(levels)}


def stored(acceptance, unit=UNIT):
    return {"kept_at": "2026-11-30T02:00:00Z", "label": "eagle3 k=3", "unit_sha256": unit, "acceptance": acceptance}


KEPT = _watch.summarize([bench(level(1, 6000, [0.6, 0.45, 0.3]), level(8, 6000, [0.6, 0.45, 0.3]))])


# --------------------------------------------------------------------------- summaries

def test_summary_pools_levels_and_rounds_with_counts():
    assert KEPT["drafts"] == 12000 and KEPT["levels"] == 2
    assert KEPT["accepted_per_position"] == [7200, 5400, 3600]
    assert KEPT["drafts_per_position"] == [12000, 12000, 12000]
    assert KEPT["per_position"] == pytest.approx([0.6, 0.45, 0.3])
    assert KEPT["mean_acceptance_length"] == pytest.approx(1 + 0.6 + 0.45 + 0.3)
    assert KEPT["acceptance_rate"] == pytest.approx(1.35 / 3)
    # rounds are a list of benches; a stored measurement holds them under "bench"
    assert _watch.summarize({"bench": [bench(level(1, 100, [0.5])), bench(level(1, 300, [0.7]))]})["accepted_per_position"] == [260]


def test_summary_leaves_out_levels_it_cannot_count_and_says_why():
    out = _watch.summarize(bench(level(1, 1000, [0.5]), level(8, 500, [0.9], counter_reset=True),
                                 {"concurrency": 32, "acceptance": {"source": "vllm_counters", "error": "GET /metrics failed"}}))
    assert out["drafts"] == 1000 and out["accepted_per_position"] == [500]
    assert out["skipped"] == ["c=8: counters reset during the level", "c=32: GET /metrics failed"]


# --------------------------------------------------------------------------- the test

def test_a_clear_drop_is_flagged_with_one_line():
    now = bench(level(1, 6000, [0.6, 0.38, 0.3]), level(8, 6000, [0.6, 0.38, 0.3]))
    out = _watch.watch(stored(KEPT), now, UNIT)
    assert out["judged"] and out["dropped"] and out["method"] == "per_position"
    assert [r["dropped"] for r in out["positions"]] == [False, True, False]
    assert out["line"] == ("acceptance dropped at position 1: 0.45 -> 0.38 (drafted 12000 kept, 12000 now); "
                           "mean acceptance length 2.35 -> 2.28")
    row = out["positions"][1]
    assert row["kept"] == pytest.approx(0.45) and row["now"] == pytest.approx(0.38) and row["drop"] == pytest.approx(0.07)
    assert row["p_value"] < 1e-9 and row["level"] == pytest.approx(0.01 / 3)
    assert out["kept_at"] == "2026-11-30T02:00:00Z" and out["label"] == "eagle3 k=3"
    assert out["now_acceptance"]["accepted_per_position"][1] == 4560


def test_min_drop_is_inclusive_and_configurable():
    now = bench(level(1, 12000, [0.6, 0.40, 0.3]))
    assert _watch.watch(stored(KEPT), now, UNIT)["dropped"]  # 0.05 exactly
    assert not _watch.watch(stored(KEPT), now, UNIT, {"min_drop": 0.06})["dropped"]


def test_noise_at_small_counts_is_not_flagged():
    kept = _watch.summarize(bench(level(1, 100, [0.6])))
    now = bench(level(1, 100, [0.52]))  # 8 points lower, z ~ 1.1
    out = _watch.judge(kept, now)
    assert out["judged"] and not out["dropped"]
    assert out["positions"][0]["why"] == "within noise" and out["positions"][0]["p_value"] > 0.1
    assert out["line"].startswith("acceptance within noise at 1 position(s): 0.60 -> 0.52")


def test_a_trivial_drop_with_huge_counts_is_not_flagged():
    kept = _watch.summarize(bench(level(1, 2000000, [0.6, 0.4])))
    now = bench(level(1, 2000000, [0.58, 0.39]))
    out = _watch.judge(kept, now)
    assert not out["dropped"]
    assert all(r["p_value"] < 1e-12 for r in out["positions"])  # shown lower, but not by enough
    assert out["positions"][0]["why"] == "lower by 0.020, below the 0.05 worth flagging"


def test_a_rise_is_not_a_drop():
    out = _watch.judge(_watch.summarize(bench(level(1, 5000, [0.3]))), bench(level(1, 5000, [0.9])))
    assert out["judged"] and not out["dropped"] and out["positions"][0]["why"] == "not lower"


def test_the_level_is_split_over_the_positions():
    # p ~ 0.005: below alpha = 0.01 with one position, above alpha / 4 with four
    one = _watch.judge(_watch.summarize(bench(level(1, 900, [0.5]))), bench(level(1, 900, [0.44])))
    assert 0.0025 < one["positions"][0]["p_value"] < 0.01 and one["dropped"]
    four = _watch.judge(_watch.summarize(bench(level(1, 900, [0.5, 0.4, 0.3, 0.2]))),
                        bench(level(1, 900, [0.44, 0.4, 0.3, 0.2])))
    assert not four["dropped"] and four["positions"][0]["why"] == "within noise"


def _draw(rng, n, p):
    return sum(1 for _i in range(n) if rng.random() < p)


def test_false_flags_stay_below_alpha_and_real_drops_are_found():
    rng = random.Random(15)
    flags = 0
    for _run in range(600):
        kept = _watch.summarize(bench(level(1, 400, [_draw(rng, 400, 0.6) / 400.0, _draw(rng, 400, 0.35) / 400.0])))
        now = bench(level(1, 400, [_draw(rng, 400, 0.6) / 400.0, _draw(rng, 400, 0.35) / 400.0]))
        flags += _watch.judge(kept, now)["dropped"]
    assert flags <= 12  # alpha 1 %: about 3 expected of 600
    found = 0
    for _run in range(50):
        kept = _watch.summarize(bench(level(1, 2000, [_draw(rng, 2000, 0.6) / 2000.0])))
        now = bench(level(1, 2000, [_draw(rng, 2000, 0.5) / 2000.0]))
        found += _watch.judge(kept, now)["dropped"]
    assert found >= 49


def test_without_per_position_counters_the_overall_rate_is_compared():
    def flat(drafts, k, rate):
        lv = level(1, drafts, [rate] * k)
        lv["acceptance"]["per_position"] = []
        return lv
    kept = _watch.summarize(bench(flat(5000, 3, 0.5)))
    out = _watch.judge(kept, bench(flat(5000, 3, 0.4)))
    assert out["method"] == "overall" and out["dropped"]
    assert out["positions"][0]["position"] == "all" and out["positions"][0]["drafted_now"] == 5000  # steps, not tokens
    assert "at position all: 0.50 -> 0.40" in out["line"]
    changed = _watch.judge(kept, bench(flat(5000, 5, 0.4)))
    assert not changed["judged"] and "tokens drafted per step changed" in changed["reason"]


# --------------------------------------------------------------------------- not judged, never flagged

SGLANG = {"concurrency": 1, "acceptance": {"source": "sglang_server_info", "error": None, "mean_acceptance_length": 2.4,
                                           "since_server_start": True}}


@pytest.mark.parametrize("kept_store, now, unit, reason", [
    (None, bench(level(1, 1000, [0.1])), UNIT, "no acceptance was stored when the configuration was kept"),
    ({"kept_at": "x"}, bench(level(1, 1000, [0.1])), UNIT, "no acceptance was stored when the configuration was kept"),
    (stored(KEPT, unit="b" * 64), bench(level(1, 1000, [0.1])), UNIT,
     "the unit running now is not the one kept (bbbbbbbbbbbb kept, aaaaaaaaaaaa now)"),
    (stored(KEPT), bench(SGLANG), UNIT,
     "the engine exposes no acceptance counts tonight (sglang_server_info reports only a running mean acceptance length)"),
    (stored(_watch.summarize(bench(SGLANG))), bench(level(1, 1000, [0.1])), UNIT,
     "the engine exposes no acceptance counts when kept (sglang_server_info reports only a running mean acceptance length)"),
    (stored(KEPT), bench({"concurrency": 1, "acceptance": None}), UNIT,
     "no acceptance was measured tonight (speculative decoding off, or no metrics read)"),
    (stored(KEPT), bench({"concurrency": 1, "acceptance": {"source": "vllm_counters", "error": None,
                                                           "caveat": "the server exports no vllm:spec_decode_* counters"}}), UNIT,
     "no drafts were counted tonight (c=1: the server exports no vllm:spec_decode_* counters)"),
    (stored(KEPT), bench(level(1, 0, [0.5, 0.5])), UNIT, "no drafts were counted tonight"),
    (stored(KEPT), bench(level(1, 1000, [0.1]), level(8, 900, [0.1], counter_reset=True)), UNIT,
     "the number of draft positions changed (3 when kept, 1 tonight): another configuration"),
    (stored(KEPT), bench(level(1, 49, [0.1, 0.1, 0.1])), UNIT, "too few drafts to judge (49 draft(s) tonight; at least 50 needed)"),
])
def test_missing_data_is_not_judged_with_the_reason(kept_store, now, unit, reason):
    out = _watch.watch(kept_store, now, unit)
    assert out["judged"] is False and out["dropped"] is False
    assert out["reason"] == reason
    assert out["line"] == "acceptance not judged: " + reason
    assert out["positions"] == []


def test_a_unit_unknown_on_either_side_does_not_stop_the_comparison():
    now = bench(level(1, 12000, [0.6, 0.45, 0.3]))
    assert _watch.watch(stored(KEPT, unit=None), now, UNIT)["judged"]
    assert _watch.watch(stored(KEPT), now, None)["judged"]


@pytest.mark.parametrize("overrides, message", [
    ({"alpha": 0}, "alpha out of range"),
    ({"alpha": True}, "must be a number, not a boolean"),
    ({"min_drop": 1}, "min_drop out of range"),
    ({"min_drafts": 2.5}, "min_drafts out of range"),
    ({"min_drafts": "x"}, "must be a number"),
    ({"beta": 1}, "unknown acceptance watch setting 'beta'"),
    ([], "must be a mapping"),
])
def test_bad_settings_are_refused(overrides, message):
    with pytest.raises(_watch.WatchError, match=message):
        _watch.settings(overrides)


def test_settings_defaults_and_none():
    assert _watch.settings({"alpha": None, "min_drafts": 10.0}) == {"alpha": 0.01, "min_drop": 0.05, "min_drafts": 10}
