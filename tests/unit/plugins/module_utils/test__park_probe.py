# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _park_probe


def probe(drafts, per_position, source="vllm_counters"):
    """A spec_bench result of the probe: one level, the engine's counter deltas."""
    accepted = sum(int(round(r * drafts)) for r in per_position)
    acc = {"source": source, "error": None, "drafts": drafts, "draft_tokens": drafts * len(per_position),
           "accepted_tokens": accepted, "per_position": per_position, "counter_reset": False,
           "acceptance_rate": accepted / float(drafts * len(per_position)), "mean_acceptance_length": 1 + accepted / float(drafts)}
    return {"levels": [{"concurrency": 1, "acceptance": acc}]}


def test_acceptance_zero_after_the_wake_up_is_a_collapse():
    out = _park_probe.compare(probe(150, [0.7, 0.5, 0.3]), probe(255, [0.0, 0.0, 0.0]))
    assert out["judged"] and out["collapsed"]
    assert out["before"] == 1 + (105 + 75 + 45) / 150.0 and out["after"] == 1.0
    assert out["line"].startswith("acceptance collapsed after the wake-up: at position 0: 0.70 -> 0.00")


def test_the_same_acceptance_within_noise_is_not_a_collapse():
    out = _park_probe.compare(probe(150, [0.7, 0.5, 0.3]), probe(160, [0.66, 0.47, 0.31]))
    assert out["judged"] and not out["collapsed"]
    assert out["line"].startswith("acceptance after the wake-up as before: within noise at 3 position(s)")
    # a drift of 0.1 is the nightly watch's business, not a collapse that restarts production
    assert not _park_probe.compare(probe(2000, [0.7]), probe(2000, [0.6]))["collapsed"]


def test_missing_data_is_never_a_collapse():
    none = {"source": "vllm_counters", "error": None, "drafts": 0, "caveat": "the server exports no vllm:spec_decode_* counters"}
    off = {"levels": [{"concurrency": 1, "acceptance": none}]}
    out = _park_probe.compare(off, off)
    assert not out["judged"] and not out["collapsed"] and out["reason"].startswith("the baseline drafted nothing")
    running = {"source": "sglang_server_info", "error": None, "mean_acceptance_length": 2.5}
    sglang = {"levels": [{"concurrency": 1, "acceptance": running}]}
    assert "running mean acceptance length" in _park_probe.compare(sglang, sglang)["reason"]
    few = _park_probe.compare(probe(10, [0.7]), probe(10, [0.0]))
    assert not few["collapsed"] and few["reason"].startswith("too few drafts to judge (10 draft(s) before parking")
    assert _park_probe.compare(None, probe(150, [0.0]))["reason"] == "no probe before the engine was parked"
    assert _park_probe.compare(probe(150, [0.7]), None)["line"] == "wake probe not judged: no probe after the wake-up"


def test_a_collapse_is_in_the_verdict_line_report_and_textfile():
    from ansible_collections.llmops.specdec.plugins.module_utils import _prom, _report
    probe_out = _park_probe.compare(probe(150, [0.7, 0.5, 0.3]), probe(255, [0.0, 0.0, 0.0]))
    rec = {"host": "gpu1", "suite": "repetitive", "label": "ngram k=1", "candidate": {"method": "ngram"},
           "outcome": "rolled_back", "decision": "rollback", "reason": "c=1 output ...", "speedup": 0.6,
           "park": {"parked": True, "woke": False, "restarted": True, "wake_error": probe_out["line"], "wake_probe": probe_out},
           "baseline": None, "result": None}
    line = _report.verdict_line(rec)
    assert line.startswith("gpu1: ROLLED BACK ngram k=1 on repetitive (x0.60) - c=1 output ...; production restarted, "
                           "not woken: acceptance collapsed after the wake-up: at position 0: 0.70 -> 0.00")
    assert line in _report.markdown([rec], "now")
    assert 'llmops_specdec_switch_wake_probe_collapsed{suite="repetitive"} 1' in _prom.switch_textfile(rec, 0)
    held = dict(rec, park=dict(rec["park"], wake_probe=_park_probe.compare(probe(150, [0.7]), probe(150, [0.69]))))
    assert "restarted" not in _report.verdict_line(held)
    assert 'wake_probe_collapsed{suite="repetitive"} 0' in _prom.switch_textfile(held, 0)
    unjudged = dict(rec, park=dict(rec["park"], wake_probe=_park_probe.compare(None, None)))
    assert "wake_probe_collapsed" not in _prom.switch_textfile(unjudged, 0)
