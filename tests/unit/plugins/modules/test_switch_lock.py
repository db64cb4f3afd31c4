# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""switch_lock main(): check mode, take, refuse, renew, release, takeover and waiting, on a real lock directory."""
from __future__ import annotations

import json
import os
import threading

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _lock
from ansible_collections.llmops.specdec.plugins.modules import switch_lock
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module

OWNER = {"controller": "awx-task-7f9c", "user": "ops", "pid": 31337, "awx_job_id": "1234", "label": "switch ngram"}


def run(args, outcome=ExitJson):
    return run_module(switch_lock.main, args, outcome)


@pytest.fixture
def path(tmp_path):
    (tmp_path / "run").mkdir()
    return str(tmp_path / "run" / "llmops-specdec.lock")


def test_check_take_idempotent_refuse_renew_release(path, tmp_path):
    dirs = [str(tmp_path / "state" / d) for d in ("baselines", "previous", "snapshot")]
    args = {"path": path, "run_id": "run-a", "owner": OWNER, "ttl": 600, "directories": dirs, "_ansible_diff": True}

    check = run(dict(args, _ansible_check_mode=True))
    assert check["changed"] and check["lock"]["run_id"] == "run-a" and not os.path.exists(path)
    assert not (tmp_path / "state").exists()

    took = run(args)
    assert took["changed"] and took["diff"]["before"] == {} and took["diff"]["after"]["awx_job_id"] == "1234"
    assert all(os.path.isdir(d) for d in dirs)
    with open(os.path.join(path, "owner")) as handle:
        owner = json.load(handle)
    assert {k: owner[k] for k in OWNER} == OWNER and owner["deadline"] > owner["started_epoch"]

    again = run(args)
    assert again["changed"] is False and again["lock"]["run_id"] == "run-a"

    refused = run({"path": path, "run_id": "run-b", "owner": {"controller": "laptop"}}, FailJson)
    assert "another run holds" in refused["msg"] and "AWX job 1234" in refused["msg"]
    assert refused["holder"]["run_id"] == "run-a" and refused["dead"] is None

    renewed = run({"path": path, "run_id": "run-a", "state": "renewed", "ttl": 7200})
    assert renewed["changed"] and renewed["lock"]["deadline"] > owner["deadline"] + 6000
    assert "another run" in run({"path": path, "run_id": "run-b", "state": "renewed"}, FailJson)["msg"]

    foreign = run({"path": path, "run_id": "run-b", "state": "unlocked"})
    assert foreign["changed"] is False and os.path.isdir(path)
    # Said as a warning too (module.warn); the global warning list is shared with other tests' modules.
    assert "is held by another run" in foreign["msg"] and "left alone" in foreign["msg"]
    assert run({"path": path, "run_id": "run-a", "state": "unlocked", "_ansible_check_mode": True})["changed"]
    assert os.path.isdir(path)
    released = run({"path": path, "run_id": "run-a", "state": "unlocked"})
    assert released["changed"] and released["lock"] is None and not os.path.exists(path)
    assert run({"path": path, "run_id": "run-a", "state": "unlocked"})["changed"] is False


def test_dead_lock_takeover(path):
    _lock.acquire(path, "run-dead", OWNER, ttl=-1)
    refused = run({"path": path, "run_id": "run-new"}, FailJson)
    assert "dead run" in refused["msg"] and "takeover=true" in refused["msg"] and refused["dead"]
    took = run({"path": path, "run_id": "run-new", "takeover": True, "owner": {"label": "rerun"}})
    assert took["changed"] and took["previous"]["run_id"] == "run-dead"
    assert took["lock"]["took_over"]["owner"]["awx_job_id"] == "1234"


def test_waits_for_a_live_lock(path):
    _lock.acquire(path, "run-a", ttl=600)
    timer = threading.Timer(0.5, _lock.release, (path, "run-a"))
    timer.start()
    try:
        res = run({"path": path, "run_id": "run-b", "wait": 20})
    finally:
        timer.join()
    assert res["changed"] and res["waited"] > 0 and res["lock"]["run_id"] == "run-b"
