# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict's statistics (_verdict_stats): summaries of benchmark rounds."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats as vs
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.verdict_inputs import level, marginal_rounds


def test_a_run_where_everything_failed_has_error_rate_one():
    s = vs.summarize({"levels": [level(1, None, None, None, errors=5, completed=0)]})
    assert s["levels"][1]["error_rate"] == 1.0
    assert s["levels"][1]["tpot_ms"] is None
    with pytest.raises(vs.VerdictError, match="no levels"):
        vs.summarize({"levels": []})


def test_summarize_merges_rounds_and_keeps_samples():
    rounds = marginal_rounds(2)
    merged = vs.summarize(rounds)
    lv = merged["levels"][1]
    assert lv["ok"] == 48 and len(lv["samples"]["e2e_ms"]) == 48 and merged["max_tokens"] == 256
    assert lv["duration_s"] == pytest.approx(sum(r["levels"][0]["duration_s"] for r in rounds))
    assert lv["tpot_ms"] == pytest.approx(sorted(lv["samples"]["tpot_ms"])[23:25][0], rel=0.01)
