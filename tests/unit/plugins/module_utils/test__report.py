# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_report: verdict lines, the Markdown report, the chart."""

from __future__ import annotations

import re
import struct

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
    assert "line one line two \\| &lt;b>x&lt;/b> # heading" in why
    assert "\n# heading" not in text and "\nline two" not in text
