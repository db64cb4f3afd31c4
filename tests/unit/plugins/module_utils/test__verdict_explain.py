# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict in words (_verdict_explain): the one verdict line."""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_explain as e


def test_verdict_line_legacy_record_reads_as_before():
    rec = {"host": "gpu1", "outcome": "rolled_back", "label": "ngram k=5", "suite": "reasoning", "speedup": 0.5,
           "reason": "c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05"}
    assert e.verdict_line(rec) == (
        "gpu1: ROLLED BACK ngram k=5 on reasoning (x0.50) - c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05")
    assert e.verdict_line(dict(rec, outcome="failed", speedup=None, reason="candidate failed")).startswith(
        "gpu1: FAILED ngram k=5 on reasoning - candidate failed")


def test_verdict_line_with_interval_word_from_the_verdict_and_drift():
    rec = {"host": "gpu1", "label": "ngram k=5", "suite": "reasoning", "speedup": 0.512, "speedup_ci": [0.49, 0.53],
           "verdict": "inconclusive", "reason": "not shown faster ..."}
    assert e.verdict_line(rec) == "gpu1: INCONCLUSIVE ngram k=5 on reasoning (x0.51 [0.49, 0.53]) - not shown faster ..."
    rec.update(outcome="rolled_back", drift={"unstable": True, "reason": "c=1 output tok/s after/before x0.930"})
    assert e.verdict_line(rec) == ("gpu1: ROLLED BACK ngram k=5 on reasoning (x0.51 [0.49, 0.53]) - not shown faster ...; "
                                   "host unstable: c=1 output tok/s after/before x0.930")
