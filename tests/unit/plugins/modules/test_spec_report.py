# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_report main(): files written, history appended per run, changed, check mode, bad records."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic

from ansible_collections.llmops.specdec.plugins.module_utils import _optional, _report
from ansible_collections.llmops.specdec.plugins.modules import spec_report
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module

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


def run(args, expect=ExitJson):
    return run_module(spec_report.main, args, expect)


def test_writes_json_markdown_history_and_lines(tmp_path):
    dest = tmp_path / "deep" / "report"
    kept = dict(REC, host="gpu2", outcome="kept", decision="keep", speedup=1.6, label="ngram k=2")
    res = run({"records": [REC, kept], "dest": str(dest), "chart": False})
    assert res["changed"] is True
    assert res["lines"][0].startswith("gpu1: ROLLED BACK ngram k=5 on reasoning (x0.50)")
    assert res["lines"][1].startswith("gpu2: KEPT ngram k=2 on reasoning (x1.60)")
    assert json.loads((dest / "results.json").read_text()) == [REC, kept]
    assert "| gpu2 |" in (dest / "report.md").read_text()
    assert res["markdown"] == str(dest / "report.md") and res["png"] is None
    history = (dest / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["host"] for line in history] == ["gpu1", "gpu2"]


def test_history_grows_every_run_other_files_only_when_content_changes(tmp_path):
    run({"records": [REC], "dest": str(tmp_path), "chart": False})
    before = (tmp_path / "results.json").stat().st_mtime_ns
    run({"records": [REC], "dest": str(tmp_path), "chart": False})
    assert (tmp_path / "results.json").stat().st_mtime_ns == before
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 2


def test_check_mode_writes_nothing_but_returns_lines(tmp_path):
    res = run({"records": [REC], "dest": str(tmp_path / "r"), "_ansible_check_mode": True})
    assert res["changed"] is False
    assert res["lines"] and not (tmp_path / "r").exists()


def test_chart_png_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    res = run({"records": [REC], "dest": str(tmp_path)})
    assert res["png"] == str(tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The same records draw the same chart: the file is left alone.
    before = (tmp_path / "chart.png").stat().st_mtime_ns
    assert run({"records": [REC], "dest": str(tmp_path)})["png"] == str(tmp_path / "chart.png")
    assert (tmp_path / "chart.png").stat().st_mtime_ns == before


def test_chart_skipped_with_a_warning_without_matplotlib(tmp_path, monkeypatch):
    warned = []
    monkeypatch.setattr(_report, "FIGURE", _optional.Optional("matplotlib_absent_in_this_test"))
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    res = run({"records": [REC], "dest": str(tmp_path)})
    assert res["png"] is None and not (tmp_path / "chart.png").exists()
    assert len(warned) == 1 and "matplotlib" in warned[0] and warned[0].endswith("The chart was skipped.")


def test_changed_only_when_a_file_changed(tmp_path):
    # No record: results.json and report.md are written once; history.jsonl is not even created.
    assert run({"records": [], "dest": str(tmp_path), "chart": False})["changed"] is True
    assert not (tmp_path / "history.jsonl").exists()
    md = (tmp_path / "report.md").read_text()
    (tmp_path / "report.md").write_text(md)
    res = run({"records": [], "dest": str(tmp_path), "chart": False})
    assert res["changed"] is ((tmp_path / "report.md").read_text() != md)


def test_a_file_that_cannot_be_written_fails_naming_the_directory(tmp_path):
    (tmp_path / "report.md").mkdir()
    res = run({"records": [REC], "dest": str(tmp_path), "chart": False}, expect=FailJson)
    assert res["msg"].startswith("cannot write the report into %s: " % tmp_path)


def test_record_without_a_required_key_fails_naming_it(tmp_path):
    rec = dict(REC)
    del rec["outcome"]
    res = run({"records": [rec], "dest": str(tmp_path)}, expect=FailJson)
    assert "outcome" in res["msg"] and "spec_switch_record" in res["msg"]
    assert not (tmp_path / "results.json").exists()


TUNE = {"method": "eagle3", "levels": [1, 8], "schedule_text": "1-2:3,3+:1", "loads": 3, "max_loads": 5, "restarts": 3,
        "grid": {"1": {"1": {"ratio": 1.3, "ci": [1.25, 1.35]}, "8": {"ratio": 1.1, "ci": [1.05, 1.15]}},
                 "3": {"1": {"ratio": 1.45, "ci": [1.4, 1.5]}, "8": {"ratio": 0.95, "ci": [0.9, 1.0]}}},
        "choice": {"1": {"k": 3, "ratio": 1.45, "ci": [1.4, 1.5], "best_k": 3},
                   "8": {"k": 1, "ratio": 1.1, "ci": [1.05, 1.15], "best_k": 1}}}


def test_a_tuning_record_adds_its_grid_and_a_heat_map(tmp_path):
    pytest.importorskip("matplotlib")
    tuned = dict(REC, host="../gpu3", outcome="kept", decision="keep", speedup=1.3, label="eagle3 schedule", tune=TUNE)
    res = run({"records": [REC, tuned], "dest": str(tmp_path)})
    # The host name cannot leave dest.
    assert res["tune_png"] == [str(tmp_path / "tune-_gpu3.png")]
    assert (tmp_path / "tune-_gpu3.png").read_bytes().startswith(b"\x89PNG")
    text = (tmp_path / "report.md").read_text()
    assert "## Tuning eagle3 on ../gpu3" in text and "| 3 | x1.45 [1.40, 1.50] | x0.95 [0.90, 1.00] |" in text
    again = run({"records": [REC, tuned], "dest": str(tmp_path)})
    assert again["tune_png"] == res["tune_png"]
