# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_record.write: what a switch leaves on the host (history, textfile, a kept baseline), and its textfile lines."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _prom, _record, _unitfile

UNIT = "vllm-server.service"
KEY = "vllm-kimi-reasoning"


def record(**more):
    rec = {"host": "gpu1", "suite": "reasoning", "candidate": {"method": "ngram"}, "outcome": "rolled_back",
           "decision": "rollback", "speedup": 0.51, "speedup_ci": [0.49, 0.53], "host_unstable": False,
           "result": {"levels": {"1": {"output_tok_s": 41.0}}}, "baseline": {"levels": {"1": {"output_tok_s": 82.0}}},
           "drift": None}
    rec.update(more)
    return rec


def series(text):
    """{(name, frozenset(labels)): value}, by the fallback parser and prometheus_client's when installed."""
    small = {(n, frozenset(lb.items())): v for n, lb, v in _prom.parse_text_small(text)}
    if _prom.PARSER.get() is not None:
        assert {(n, frozenset(lb.items())): v for n, lb, v in _prom.parse_text(text)} == small
    return small


@pytest.fixture
def state(tmp_path):
    root = tmp_path / "state"
    for sub in ("snapshot", "baselines", "previous"):
        (root / sub).mkdir(parents=True)
    return root


def test_a_rollback_appends_its_record_and_exports_its_figures(state, tmp_path):
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    first = _record.write(str(state), record(), str(textfile), now=lambda: 1764547200.4)
    second = _record.write(str(state), record(outcome="failed"), str(textfile), now=lambda: 1764547260.0)
    lines = (state / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in lines] == ["rolled_back", "failed"]
    assert (os.stat(state / "history.jsonl").st_mode & 0o777) == 0o600
    assert first["textfile"] == str(textfile / _record.TEXTFILE) and first["changed"] and second["changed"]
    assert first["kept"] is None and os.listdir(state / "baselines") == []
    parsed = series((textfile / _record.TEXTFILE).read_text())
    ngram = frozenset({"method": "ngram", "suite": "reasoning"}.items())
    assert parsed[("llmops_specdec_switch_timestamp_seconds", frozenset())] == 1764547260
    assert parsed[("llmops_specdec_switch_kept", ngram)] == 0
    assert parsed[("llmops_specdec_switch_speedup", ngram)] == pytest.approx(0.51)
    assert parsed[("llmops_specdec_switch_speedup_ci", ngram | {("bound", "upper")})] == pytest.approx(0.53)
    assert parsed[("llmops_specdec_output_tokens_per_second", frozenset({"role": "baseline", "concurrency": "1"}.items()))] == 82
    assert parsed[("llmops_specdec_switch_host_unstable", frozenset({"suite": "reasoning"}.items()))] == 0


def test_no_textfile_without_node_exporters_directory(state, tmp_path):
    out = _record.write(str(state), record(), str(tmp_path / "absent"))
    assert out["textfile"] is None and not (tmp_path / "absent").exists()
    assert out["written"] == [str(state / "history.jsonl")]


def test_textfile_of_a_kept_candidate_and_of_a_drifting_host():
    kept = series(_prom.switch_textfile(record(outcome="kept", decision="keep", speedup=None, speedup_ci=None), 0))
    assert kept[("llmops_specdec_switch_kept", frozenset({"method": "ngram", "suite": "reasoning"}.items()))] == 1
    assert not any(name == "llmops_specdec_switch_speedup" for name, _labels in kept)
    drift = {"levels": [{"level": 1, "figure": "output_tok_s", "ratio": 0.93}, {"level": 1, "figure": "ttft", "ratio": 2.0},
                        {"level": 8, "figure": "output_tok_s", "ratio": None}]}
    text = _prom.switch_textfile(record(host_unstable=True, drift=drift, candidate={}, suite='a"b'), 0)
    parsed = series(text)
    assert parsed[("llmops_specdec_switch_drift_ratio", frozenset({"suite": 'a"b', "concurrency": "1"}.items()))] == 0.93
    assert parsed[("llmops_specdec_switch_host_unstable", frozenset({"suite": 'a"b'}.items()))] == 1
    assert parsed[("llmops_specdec_switch_kept", frozenset({"method": "none", "suite": 'a"b'}.items()))] == 0
    assert len([name for name, _labels in parsed if name == "llmops_specdec_switch_drift_ratio"]) == 1


def kept_args(tmp_path, replaced=True):
    unit_path = tmp_path / UNIT
    unit_path.write_text("[Service]\nExecStart=/usr/bin/candidate\n")
    return {"unit": UNIT, "unit_path": str(unit_path), "replaced_unit": replaced, "baseline_key": KEY,
            "baseline": {"summary": {"levels": {}}, "settings": {"stale": True}, "label": "ngram k=5"},
            "settings": {"engine": "vllm"}, "acceptance": {"kept_at": "2026-12-02T00:00:00Z", "acceptance": {"mean": 2.1}},
            "archive_keep": 2}


def test_a_kept_candidate_becomes_the_baseline_with_what_it_replaced(state, tmp_path):
    (state / "snapshot" / UNIT).write_text("[Service]\nExecStart=/usr/bin/production\n")
    (state / "baselines" / (KEY + ".json")).write_text('{"old": true}\n')
    kept = kept_args(tmp_path)
    out = _record.write(str(state), record(outcome="kept", decision="keep"), "", kept)
    sha = _files.sha256_file(kept["unit_path"])
    assert out["kept"]["unit_sha256"] == sha
    assert (state / "previous" / UNIT).read_text().endswith("production\n")
    assert json.loads((state / "previous" / (KEY + ".json")).read_text()) == {"old": True}
    stored = json.loads((state / "baselines" / (KEY + ".json")).read_text())
    assert stored["settings"] == {"engine": "vllm", "unit_sha256": sha} and stored["label"] == "ngram k=5"
    acceptance = json.loads((state / "acceptance" / (KEY + ".json")).read_text())
    assert acceptance["unit_sha256"] == sha and acceptance["acceptance"] == {"mean": 2.1}
    for path in out["written"]:
        if "textfile" not in path:
            assert (os.stat(path).st_mode & 0o077) == 0, path  # private to root
    newest = _unitfile.newest_archived(str(state / "kept"))
    assert newest["sha256"] == _files.sha256_file(str(state / "snapshot" / UNIT))
    assert out["written"][-1] == str(state / "history.jsonl")


def test_a_first_unit_kept_has_nothing_to_archive(state, tmp_path):
    (state / "snapshot" / UNIT).write_text("stale, from a run before the unit was removed\n")
    out = _record.write(str(state), record(outcome="kept", decision="keep"), "", kept_args(tmp_path, replaced=False))
    assert out["kept"]["archived"] is None and not (state / "kept").exists()
    assert not (state / "previous" / UNIT).exists() and (state / "baselines" / (KEY + ".json")).exists()


def test_a_failure_part_way_keeps_the_old_baseline_and_says_what_was_written(state, tmp_path):
    (state / "baselines" / (KEY + ".json")).write_text('{"old": true}\n')
    (state / "acceptance" / (KEY + ".json")).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(_record.RecordError, match="failed after .*previous/%s.json" % KEY):
        _record.write(str(state), record(outcome="kept", decision="keep"), "", kept_args(tmp_path, replaced=False))
    assert json.loads((state / "baselines" / (KEY + ".json")).read_text()) == {"old": True}


def test_textfile_has_the_candidates_load_per_phase():
    load = {"weights": 172.0, "compile": None, "graph_capture": 21.0, "kv_profile": 11.1, "other": 45.9, "total": 250.0,
            "compile_cache_hit": False}
    parsed = series(_prom.switch_textfile(record(load=load), 0))
    ngram = {"method": "ngram", "suite": "reasoning"}
    got = {dict(labels)["phase"]: value for (name, labels), value in parsed.items()
           if name == "llmops_specdec_switch_load_seconds"}
    assert got == {"weights": 172.0, "graph_capture": 21.0, "kv_profile": 11.1, "other": 45.9, "total": 250.0}
    assert all(dict(labels).items() >= ngram.items() for (name, labels) in parsed if name == "llmops_specdec_switch_load_seconds")
    assert not any(name == "llmops_specdec_switch_load_seconds" for name, _labels in series(_prom.switch_textfile(record(), 0)))


def test_textfile_says_which_levels_were_judged_which_decided_and_whether_the_prompts_were_synthetic():
    """Issue 32, items 4 and 5: the Prometheus side of the verdict line."""
    levels = {"source": "observed", "levels": [1, 16, 32], "median": 12.0, "p90": 19.1}
    rec = record(levels=levels, decided_by={"level": 32, "figure": "output_tok_s", "status": "fail"},
                 prompts={"source": "suite", "name": "reasoning", "synthetic": True})
    parsed = series(_prom.switch_textfile(rec, 0))
    ngram = {"method": "ngram", "suite": "reasoning"}
    got = {dict(labels)["concurrency"]: (dict(labels)["source"], value) for (name, labels), value in parsed.items()
           if name == "llmops_specdec_switch_level"}
    assert got == {"1": ("observed", 1), "16": ("observed", 16), "32": ("observed", 32)}
    assert parsed[("llmops_specdec_switch_observed_running", frozenset({"suite": "reasoning", "quantile": "0.9"}.items()))] == 19.1
    assert parsed[("llmops_specdec_switch_decided_level", frozenset(dict(ngram, figure="output_tok_s").items()))] == 32
    assert parsed[("llmops_specdec_switch_synthetic_prompts", frozenset({"suite": "reasoning", "source": "suite"}.items()))] == 1
    ops = series(_prom.switch_textfile(record(prompts={"source": "request_log", "synthetic": False, "sha256": "ab" * 32}), 0))
    assert ops[("llmops_specdec_switch_synthetic_prompts", frozenset({"suite": "reasoning", "source": "request_log"}.items()))] == 0
    # a record from before issue 32 has none of them
    assert not any(name.startswith(("llmops_specdec_switch_level", "llmops_specdec_switch_decided", "llmops_specdec_switch_synth"))
                   for name, _labels in series(_prom.switch_textfile(record(), 0)))
