from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v


def level(c, tok_s, tpot, ttft, errors=0, completed=10):
    # The shape of one entry of spec_bench's bench.levels (RETURN documents it).
    return {"concurrency": c, "output_tok_s": tok_s, "tpot_ms": {"median": tpot},
            "ttft_ms": {"median": ttft}, "errors": errors, "ok": completed}


BASE = v.summarize({"levels": [level(1, 82.0, 12.2, 50.0), level(8, 500.0, 15.0, 60.0)]})


def test_seed_story_ngram_slower_is_rolled_back_with_the_figures():
    cand = v.summarize({"levels": [level(1, 41.0, 24.4, 52.0), level(8, 300.0, 26.0, 61.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "rollback"
    assert out["speedup"] == pytest.approx(0.5)
    assert "c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05" in out["reason"]
    assert "TPOT 24.4 vs 12.2 ms = x2.00" in out["reason"]


def test_clear_win_on_every_level_is_kept():
    cand = v.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 600.0, 12.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "keep"
    assert out["speedup"] == pytest.approx(130 / 82)
    assert all(c["ok"] for c in out["checks"])


def test_win_single_stream_but_loss_under_load_rolls_back():
    cand = v.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 450.0, 16.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "rollback"
    assert out["reason"].startswith("c=8 output 450.0 vs 500.0")


def test_errors_above_the_limit_roll_back_even_when_faster():
    cand = v.summarize({"levels": [level(1, 130.0, 7.6, 55.0, errors=1, completed=9),
                                   level(8, 600.0, 12.0, 65.0)]})
    out = v.decide(BASE, cand)
    assert out["decision"] == "rollback"
    assert "errors 10.0%, allowed <= 1.0%" in out["reason"]


def test_thresholds_are_overridable_and_only_known_keys():
    cand = v.summarize({"levels": [level(1, 84.0, 11.9, 50.0), level(8, 510.0, 14.9, 60.0)]})
    assert v.decide(BASE, cand)["decision"] == "rollback"  # x1.02 < x1.05
    assert v.decide(BASE, cand, {"min_speedup": 1.01})["decision"] == "keep"
    with pytest.raises(v.VerdictError, match="unknown threshold 'speedup'; allowed: max_error_rate"):
        v.thresholds({"speedup": 1})
    with pytest.raises(v.VerdictError, match="must be a number"):
        v.thresholds({"min_speedup": "fast"})
    with pytest.raises(v.VerdictError, match="must be >= 0"):
        v.thresholds({"max_error_rate": -1})


def test_levels_must_overlap():
    cand = v.summarize({"levels": [level(4, 90.0, 11.0, 50.0)]})
    with pytest.raises(v.VerdictError, match="share no concurrency"):
        v.decide(BASE, cand)


def test_a_run_where_everything_failed_has_error_rate_one():
    s = v.summarize({"levels": [level(1, None, None, None, errors=5, completed=0)]})
    assert s["levels"][1]["error_rate"] == 1.0
    assert s["levels"][1]["tpot_ms"] is None
    with pytest.raises(v.VerdictError, match="no levels"):
        v.summarize({"levels": []})


def test_a_baseline_read_back_from_json_compares_like_the_original():
    import json
    stored = json.loads(json.dumps(BASE))
    assert set(stored["levels"]) == {"1", "8"}
    cand = v.summarize({"levels": [level(1, 130.0, 7.6, 55.0), level(8, 600.0, 12.0, 65.0)]})
    assert v.decide(stored, cand) == v.decide(BASE, cand)
