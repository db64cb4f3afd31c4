# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_report: verdict lines, the Markdown report, the chart."""

from __future__ import annotations

import math
import re
import struct

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _report

REC = {
    "host": "gpu1",
    "engine": "vllm",
    "model": "m",
    "suite": "reasoning",
    "label": "ngram k=5",
    "outcome": "rolled_back",
    "decision": "rollback",
    "speedup": 0.5,
    "reason": "c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05",
    "thresholds": {"min_speedup": 1.05},
    "baseline": {"levels": {"1": {"output_tok_s": 82.0, "tpot_ms": 12.2, "ttft_ms": 50.0, "error_rate": 0}}},
    "result": {"levels": {"1": {"output_tok_s": 41.0, "tpot_ms": 24.4, "ttft_ms": 51.0, "error_rate": 0}}},
}


def test_verdict_line_names_outcome_figures_and_reason():
    assert _report.verdict_line(REC) == ("gpu1: ROLLED BACK ngram k=5 on reasoning (x0.50) - c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05")


def test_markdown_table_row_and_reason():
    md = _report.markdown([REC], "2026-11-29T00:00:00Z")
    assert "| gpu1 | vllm | m | reasoning | ngram k=5 | **rolled back** | 1 | 82.0 | 41.0 | x0.50 | 12.20 / 24.40 | 50.0 / 51.0 |" in md
    assert "Thresholds: min_speedup=1.05" in md


def test_failed_candidate_without_figures_still_reports():
    rec = dict(REC, outcome="failed", speedup=None, result=None, reason="candidate failed")
    assert "FAILED" in _report.verdict_line(rec)
    assert "| - | - / - |" not in _report.markdown([rec], "t")  # baseline figures still shown
    assert "| 82.0 | - | - |" in _report.markdown([rec], "t")


def test_chart_is_a_real_png_and_the_same_for_the_same_records():
    png = _report.chart_png([REC])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 300 and height > 200
    assert _report.chart_png([REC]) == png
    assert _report.chart_png([dict(REC, result=None)]) is None


def test_markdown_keeps_hostile_text_inside_its_cell():
    rec = {
        "host": "h1",
        "engine": "vllm",
        "model": "m|x",
        "suite": "reasoning",
        "label": "ngram k=5",
        "outcome": "failed",
        "reason": "candidate failed: line one\nline two | <b>x</b>\u2028# heading",
        "speedup": None,
        "baseline": None,
        "result": None,
    }
    text = _report.markdown([rec], "now")
    row = [line for line in text.splitlines() if line.startswith("| h1 ")][0]
    assert "m\\|x" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 13  # 12 cells: the escaped '|' does not open a 13th
    why = [line for line in text.splitlines() if line.startswith("- h1: FAILED")][0]
    assert "line one line two \\| \\<b>x\\</b> # heading" in why  # issue 31: '<' escaped as '\\<', not '&lt;'
    assert "\n# heading" not in text and "\nline two" not in text


# --------------------------------------------------------------------------- chart: intervals


def _samples(n, tokens, e2e_ms, spread):
    """Per-request samples of one level: e2e times spread around e2e_ms (deterministic)."""
    e2e = [e2e_ms * (1 + spread * ((i * 7) % 11 - 5) / 5.0) for i in range(n)]
    return {"output_tokens": [tokens] * n, "e2e_ms": e2e, "tpot_ms": [t / tokens for t in e2e], "ttft_ms": [20.0] * n}


def _level(tok_s, e2e_ms, spread=0.1):
    return {"output_tok_s": tok_s, "tpot_ms": e2e_ms / 32, "ttft_ms": 20.0, "error_rate": 0, "ok": 24, "errors": 0,
            "samples": _samples(24, 32, e2e_ms, spread)}


REC_CI = {
    "host": "gpu2",
    "engine": "vllm",
    "model": "m",
    "suite": "reasoning",
    "label": "mtp k=1",
    "outcome": "kept",
    "decision": "keep",
    "speedup": 1.17,
    "speedup_ci": [1.12, 1.22],
    "reason": "c=1 output ...",
    "thresholds": {"min_speedup": 1.1},
    "plan": {"confidence": 0.9},
    # as JSON gives them back: level keys are strings
    "baseline": {"levels": {"1": _level(82.0, 390.0), "8": _level(480.0, 530.0)}},
    "result": {"levels": {"1": _level(96.0, 333.0), "8": _level(540.0, 470.0)}},
    "checks": [
        {"level": 1, "figure": "output_tok_s", "ratio": 1.17, "ci": [1.12, 1.22], "status": "pass"},
        {"level": 1, "figure": "tpot_ms", "ratio": 0.85, "ci": [0.8, 0.9], "status": "pass"},
        {"level": 8, "figure": "output_tok_s", "ratio": 1.13, "ci": [1.05, 1.21], "status": "pass"},
        {"level": 8, "figure": "error_rate", "ratio": None, "ci": [0.0, 0.1], "status": "pass"},
    ],
}


def _bars(ax, label):
    """(x, low, high) of the error bars drawn under a container label."""
    from matplotlib.container import ErrorbarContainer

    found = [c for c in ax.containers if isinstance(c, ErrorbarContainer) and c.get_label() == label]
    assert len(found) == 1, [c.get_label() for c in ax.containers]
    _line, _caps, (segments,) = found[0].lines
    return [(seg[0][0], min(seg[0][1], seg[1][1]), max(seg[0][1], seg[1][1])) for seg in segments.get_segments()]


def test_chart_draws_the_speedup_interval_of_every_level_and_the_min_speedup_bar():
    pytest.importorskip("matplotlib")
    fig = _report.chart_figure([REC_CI])
    tok, tpot, speed = fig.get_axes()
    one, eight = _bars(speed, "_c=1 interval"), _bars(speed, "_c=8 interval")
    assert [(lo, hi) for _x, lo, hi in one] == [pytest.approx((1.12, 1.22))]
    assert [(lo, hi) for _x, lo, hi in eight] == [pytest.approx((1.05, 1.21))]
    assert one[0][0] < eight[0][0]  # c=1 left of c=8 within the record's group
    bars = [c for c in speed.collections if c.get_gid() == "min_speedup"]
    assert len(bars) == 1
    (seg,) = bars[0].get_segments()
    assert seg[0][1] == seg[1][1] == pytest.approx(1.1)  # the record's own threshold, not the default
    assert seg[0][0] < one[0][0] < eight[0][0] < seg[1][0]  # across the group
    assert "90%" in speed.get_title()


def test_chart_draws_each_sides_interval_around_the_plotted_figure():
    pytest.importorskip("matplotlib")
    from ansible_collections.llmops.specdec.plugins.module_utils import _stats

    fig = _report.chart_figure([REC_CI])
    tok, tpot, _speed = fig.get_axes()
    ((x_base, lo, hi),) = _bars(tok, "_baseline output_tok_s interval")
    ((x_cand, lo_c, hi_c),) = _bars(tok, "_candidate output_tok_s interval")
    assert x_base < x_cand
    # The verdict's per-side estimator at the lowest level, its relative width applied to the plotted 82 tok/s.
    samples = REC_CI["baseline"]["levels"]["1"]["samples"]
    est = _stats.log_ratio_of_means(samples["output_tokens"], [e / 1000.0 for e in samples["e2e_ms"]], 1)
    low, high = _stats.interval(est, 0.9)
    assert (lo, hi) == pytest.approx((82.0 * math.exp(low - est.value), 82.0 * math.exp(high - est.value)))
    assert lo < 82.0 < hi and lo_c < 96.0 < hi_c
    ((_x, t_lo, t_hi),) = _bars(tpot, "_baseline tpot_ms interval")
    assert t_lo < 390.0 / 32 < t_hi


def test_chart_of_old_records_without_intervals_still_renders():
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer

    # REC: no samples, no checks, no thresholds: point speed-up and the default bar, no error bars at all.
    fig = _report.chart_figure([REC])
    tok, _tpot, speed = fig.get_axes()
    assert not [c for ax in fig.get_axes() for c in ax.containers if isinstance(c, ErrorbarContainer)]
    points = speed.get_lines()
    assert [tuple(line.get_ydata()) for line in points if line.get_label() == "c=1"] == [(0.5,)]
    (min_bar,) = [c for c in speed.collections if c.get_gid() == "min_speedup"]
    assert min_bar.get_segments()[0][0][1] == pytest.approx(1.05)
    # mixed: an old record beside a new one, intervals only where there are some
    png = _report.chart_png([REC, REC_CI])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert _report.chart_png([REC, REC_CI]) == png
    fig = _report.chart_figure([REC, REC_CI])
    assert len(_bars(fig.get_axes()[2], "_c=1 interval")) == 1
    assert len([c for c in fig.get_axes()[2].collections if c.get_gid() == "min_speedup"]) == 2


def test_chart_survives_broken_intervals():
    pytest.importorskip("matplotlib")
    rec = dict(REC_CI, checks=[{"level": 1, "figure": "output_tok_s", "ratio": 1.1, "ci": [None, 1.2]},
                               {"level": 8, "figure": "output_tok_s", "ratio": None, "ci": None}],
               plan={"confidence": "x"}, thresholds={"min_speedup": None})
    rec["baseline"] = {"levels": {"1": dict(_level(82.0, 390.0), samples={"e2e_ms": [1.0], "output_tokens": ["x"]})}}
    assert _report.chart_png([rec])[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- acceptance watch


def _nightly(watch, host="gpu3"):
    return {"host": host, "engine": "vllm", "model": "m", "suite": "reasoning", "status": "ok", "reason": "within the 2% host shift",
            "acceptance_watch": watch, "acceptance_dropped": bool(watch.get("judged") and watch.get("dropped"))}


WATCH_DROP = {
    "judged": True, "dropped": True, "kept_at": "2026-11-30T02:00:00Z", "label": "eagle3 k=3", "method": "per_position",
    "line": "acceptance dropped at position 1: 0.45 -> 0.38 (drafted 12000 kept, 12000 now); mean acceptance length 2.35 -> 2.28",
    "positions": [
        {"position": 0, "kept": 0.6, "now": 0.6, "drop": 0.0, "drafted_kept": 12000, "drafted_now": 12000, "p_value": 0.5,
         "level": 0.005, "dropped": False},
        {"position": 1, "kept": 0.45, "now": 0.38, "drop": 0.07, "drafted_kept": 12000, "drafted_now": 12000, "p_value": 1e-30,
         "level": 0.005, "dropped": True},
    ],
}
WATCH_NOT = {"judged": False, "dropped": False, "positions": [], "kept_at": None, "label": None,
             "line": "acceptance not judged: no acceptance was stored when the configuration was kept"}


def test_markdown_has_an_acceptance_watch_section_for_nightly_records():
    md = _report.markdown([_nightly(WATCH_DROP), _nightly(WATCH_NOT, "gpu4")], "t")
    assert "## Acceptance watch" in md
    assert "## Nightly check" in md and "- gpu3: OK reasoning - within the 2% host shift" in md
    assert "| host | engine |" not in md  # no switch table without switch records
    assert ("- gpu3: **DROPPED** (kept eagle3 k=3, 2026-11-30T02:00:00Z) - acceptance dropped at position 1: 0.45 -> 0.38 "
            "(drafted 12000 kept, 12000 now); mean acceptance length 2.35 -> 2.28") in md
    assert "- gpu4: **not judged** (kept configuration) - acceptance not judged: no acceptance was stored" in md
    assert "| gpu3 | reasoning | 1 | 0.450 | 0.380 | 0.070 | 12000 / 12000 | 1e-30 (0.005) | **yes** |" in md
    assert "| gpu3 | reasoning | 0 | 0.600 | 0.600 | 0.000 | 12000 / 12000 | 0.5 (0.005) | no |" in md


def test_markdown_of_switch_and_nightly_records_together():
    md = _report.markdown([REC, _nightly(dict(WATCH_DROP, dropped=False, line="acceptance within noise"))], "t")
    assert "| gpu1 | vllm | m | reasoning | ngram k=5 | **rolled back** |" in md
    assert "- gpu1: ROLLED BACK ngram k=5" in md
    assert "- gpu3: **ok** (kept eagle3 k=3, 2026-11-30T02:00:00Z) - acceptance within noise" in md
    assert md.index("## Why") < md.index("## Nightly check") < md.index("## Acceptance watch")
    # a report of switch records only is as it was
    assert "Acceptance watch" not in _report.markdown([REC], "t")


# --------------------------------------------------------------------------- Markdown escaping (issue 31, item 8)

def _commonmark_text(md_line):
    """What a CommonMark reader shows of an inline text without markup: the backslash escapes taken."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", md_line)


@pytest.mark.parametrize("draft", [
    "org/head<script>alert(1)</script>",
    "[click](javascript:alert(1))",
    "![pixel](http://tracker.example/p.png)",
    "**bold** _em_ `code` ~~strike~~",
    "&lt;not-an-entity&gt; &amp;",
    "# heading", "- item", "1. item", "> quote",
    "a < b",
])
def test_markdown_values_are_neutralized_and_read_back_as_given(draft):
    cell = _report.md_text(draft)
    # No markup survives: every character that could open HTML, a link, an image, emphasis, code or an
    # entity is escaped, and nothing at the start reads as a block (heading, list, quote).
    assert not re.search(r"(?<!\\)[<\[\]!*_`~&|]", cell), cell
    assert not re.match(r"[-+>#=]|[0-9]+[.)]", cell), cell
    assert "&lt;" not in cell or draft.startswith("&lt;")
    assert _commonmark_text(cell) == draft  # '<' shows as '<', never as '&lt;'


def test_the_report_shows_draft_models_and_reasons_as_given():
    rec = {"host": "h1", "engine": "vllm", "model": "m", "suite": "reasoning", "outcome": "rolled_back",
           "label": "eagle3 k=3 draft=org/<b>head</b>", "reason": "speed-up x0.90 < x1.05 [link](http://x)",
           "speedup": None, "baseline": None, "result": None}
    text = _report.markdown([rec], "now")
    row = [line for line in text.splitlines() if line.startswith("| h1 ")][0]
    assert "&lt;" not in text
    assert r"draft=org/\<b>head\</b>" in row
    assert r"x0.90 \< x1.05 \[link\](http://x)" in text


def test_markdown_says_where_the_candidates_start_went():
    # issue 34: the load's breakdown (engine_ready's) and the prewarm, per switch
    rec = dict(REC, load={"weights": 172.0, "compile": 6.12, "graph_capture": 21.0, "kv_profile": None, "other": 50.9,
                          "total": 250.0, "compile_cache_hit": True},
               prewarm={"read_bytes": 24 * 1024 ** 3, "seconds": 15.2})
    md = _report.markdown([rec], "t")
    assert "## Candidate load" in md
    assert ("250.0 s to ready - weights 172.0 s, compile 6.1 s (from the cache), graph capture 21.0 s, other 50.9 s; "
            "prewarm read 24.00 GiB in 15.2 s") in md
    assert "## Candidate load" not in _report.markdown([REC], "t")
    # A cache the engine found and could not load (vLLM 0.32's CPU build, tests/real): said, not called a hit.
    failed = dict(REC, load={"compile": 17.2, "total": 30.2, "compile_cache": "load_failed", "compile_cache_hit": False})
    assert "compile 17.2 s (its cached graphs not loadable: compiled again)" in _report.markdown([failed], "t")


def test_markdown_says_what_the_verdict_was_judged_on_and_which_check_decided_with_its_figures():
    """Issue 32, items 4 and 5: the levels and where they came from, the speed-up per level, the deciding check
    with its figures, and the prompts (a warning on synthetic ones, counts and a digest for the operator's)."""
    why = "output 41.2 vs 81.0 tok/s = x0.51 [0.47, 0.55], cannot be shown >= x1.02"
    rec = dict(REC, levels={"source": "observed", "levels": [1, 16], "why": "vllm:num_requests_running while busy: median 12",
                            "seconds": 10, "busy": 18, "samples": 21},
               checks=[{"level": 1, "figure": "output_tok_s", "status": "pass", "ratio": 1.17, "ci": [1.12, 1.22], "why": "x1.17"},
                       {"level": 16, "figure": "output_tok_s", "status": "fail", "ratio": 0.51, "ci": [0.47, 0.55], "why": why}],
               decided_by={"level": 16, "figure": "output_tok_s", "status": "fail"},
               prompts={"source": "suite", "name": "reasoning", "prompts": 8, "synthetic": True})
    md = _report.markdown([rec], "2026-12-04T00:00:00Z")
    line = next(ln for ln in md.splitlines() if ln.startswith("- gpu1 ngram k=5: levels"))
    # (Markdown: the underscores of names escaped)
    assert line.startswith("- gpu1 ngram k=5: levels 1,16 from production's batch: vllm:num\\_requests\\_running while busy: "
                           "median 12 in 10 s (18 of 21 reads busy); speed-up c=1 x1.17 [1.12, 1.22] pass, "
                           "c=16 x0.51 [0.47, 0.55] fail; decided at c=16 by output\\_tok\\_s: " + _report._md(why))
    assert "**WARNING: synthetic prompts** (the shipped suite reasoning, 8 prompts)" in line
    ops = dict(rec, levels={"source": "named", "levels": [1, 8]},
               prompts={"source": "request_log", "name": "requests.jsonl", "prompts": 1000, "skipped": 3, "truncated": 20,
                        "sha256": "ab" * 32, "synthetic": False})
    line = next(ln for ln in _report.markdown([ops], "x").splitlines() if ln.startswith("- gpu1 ngram k=5: levels"))
    assert line.startswith("- gpu1 ngram k=5: levels 1,8 named by the operator; ")
    assert line.endswith("on the operator's request log requests.jsonl: 1000 prompts, 3 request(s) without a text prompt "
                         "skipped, 20 beyond the first 1000 left out, sha256 " + "ab" * 32)
    assert "requests.jsonl" in line
    assert "WARNING" not in line and "Levels and prompts" not in _report.markdown([REC], "x")
