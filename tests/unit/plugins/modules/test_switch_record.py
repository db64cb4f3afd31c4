# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""switch_record main(): its options, check mode and refusals (what it writes: test__record.py)."""
from __future__ import annotations

import json

import yaml

from ansible_collections.llmops.specdec.plugins.module_utils import _lock
from ansible_collections.llmops.specdec.plugins.modules import switch_record
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import FailJson, run_module

RECORD = {"host": "gpu1", "suite": "reasoning", "outcome": "rolled_back", "decision": "rollback"}


def test_check_mode_writes_nothing_then_the_record_is_appended(tmp_path):
    args = {"state_dir": str(tmp_path), "record": RECORD, "textfile_dir": str(tmp_path)}
    check = run_module(switch_record.main, dict(args, _ansible_check_mode=True))
    assert check["changed"] and check["written"] == [] and list(tmp_path.iterdir()) == []
    done = run_module(switch_record.main, args)
    assert done["changed"] and done["textfile"] == str(tmp_path / "llmops_specdec.prom")
    assert json.loads((tmp_path / "history.jsonl").read_text()) == RECORD


def test_refusals_before_anything_is_written(tmp_path):
    missing = run_module(switch_record.main, {"state_dir": str(tmp_path / "absent"), "record": RECORD}, FailJson)
    assert "does not exist; nothing was written" in missing["msg"]
    kept = {"unit": "u.service", "unit_path": str(tmp_path / "u.service"), "replaced_unit": False, "baseline_key": "k",
            "baseline": {}, "settings": {}, "archive_keep": 0}
    bad = run_module(switch_record.main, {"state_dir": str(tmp_path), "record": RECORD, "kept": kept}, FailJson)
    assert bad["msg"] == "kept.archive_keep must be at least 1; nothing was written"
    assert list(tmp_path.iterdir()) == []


def test_documentation_parses_and_names_every_option():
    doc = yaml.safe_load(switch_record.DOCUMENTATION)
    assert set(doc["options"]) == {"state_dir", "record", "textfile_dir", "kept", "release_lock"}
    yaml.safe_load(switch_record.EXAMPLES)
    assert {"written", "textfile", "kept", "lock"} <= set(yaml.safe_load(switch_record.RETURN))


def test_the_lock_is_released_after_the_record_and_only_this_runs(tmp_path):
    lock = str(tmp_path / "switch.lock")
    _lock.acquire(lock, "run-a", {"user": "ops"})
    args = {"state_dir": str(tmp_path), "record": RECORD, "release_lock": {"path": lock, "run_id": "run-b"}}
    other = run_module(switch_record.main, args)
    # Another run's lock is left alone, and the record is written all the same.
    assert other["lock"]["foreign"] and _lock.read_owner(lock)["run_id"] == "run-a"
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 1
    done = run_module(switch_record.main, dict(args, release_lock={"path": lock, "run_id": "run-a"}))
    assert done["lock"]["changed"] and _lock.read_owner(lock) is None
    assert run_module(switch_record.main, {"state_dir": str(tmp_path), "record": RECORD})["lock"] is None


def test_a_record_that_cannot_be_written_leaves_the_lock_held(tmp_path):
    lock = str(tmp_path / "switch.lock")
    _lock.acquire(lock, "run-a", {"user": "ops"})
    (tmp_path / "history.jsonl").mkdir()  # appending to it fails
    args = {"state_dir": str(tmp_path), "record": RECORD, "release_lock": {"path": lock, "run_id": "run-a"}}
    failed = run_module(switch_record.main, args, FailJson)
    assert failed["lock"] is None and _lock.read_owner(lock)["run_id"] == "run-a"
