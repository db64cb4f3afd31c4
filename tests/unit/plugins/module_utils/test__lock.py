# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_lock: the per-host switch lock with real directories, real flocks and real competing processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _lock
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import REPO

OWNER = {"controller": "ctl-1", "user": "ops", "pid": 31337, "awx_job_id": "1234", "label": "switch ngram k=4"}
# tests/conftest.py links the checkout there as ansible_collections/llmops/specdec
COLLECTIONS = os.path.join(REPO, ".build", "collections")


@pytest.fixture
def lock(tmp_path):
    return str(tmp_path / "run" / "llmops-specdec.lock")


@pytest.fixture(autouse=True)
def run_dir(tmp_path):
    (tmp_path / "run").mkdir()


def owner_of(path):
    with open(os.path.join(path, "owner")) as handle:
        return json.load(handle)


def test_take_describe_refuse_release(lock):
    res = _lock.acquire(lock, "run-a", OWNER, ttl=900)
    assert res["changed"] and res["previous"] is None
    doc = owner_of(lock)
    assert {k: doc[k] for k in OWNER} == OWNER and doc["run_id"] == "run-a"
    assert doc["deadline"] - doc["started_epoch"] == pytest.approx(900, abs=0.01)
    assert doc["deadline_at"].endswith("Z") and doc["host"]
    assert _lock.acquire(lock, "run-a", OWNER)["changed"] is False  # already ours

    with pytest.raises(_lock.LockError) as exc:
        _lock.acquire(lock, "run-b", {"controller": "ctl-2"})
    msg = exc.value.msg
    for part in ("another run holds", "run run-a", "(switch ngram k=4)", "from ctl-1", "as ops", "pid 31337",
                 "AWX job 1234", "deadline", "nothing was changed"):
        assert part in msg, (part, msg)
    assert exc.value.owner["run_id"] == "run-a" and exc.value.dead is None

    foreign = _lock.release(lock, "run-b")
    assert foreign["changed"] is False and foreign["foreign"] and os.path.isdir(lock)
    assert _lock.release(lock, "run-a")["changed"] is True and not os.path.exists(lock)
    assert _lock.release(lock, "run-a")["changed"] is False
    assert [n for n in os.listdir(os.path.dirname(lock)) if n.startswith("llmops-specdec.lock.released")] == []


def test_dead_lock_is_reported_and_taken_over_only_when_asked(lock):
    _lock.acquire(lock, "run-old", OWNER, ttl=-5)  # its deadline passed
    with pytest.raises(_lock.LockError, match="held by a dead run: run run-old .* its deadline passed") as exc:
        _lock.acquire(lock, "run-new", wait=30)  # a dead lock is not waited for
    assert "takeover=true" in exc.value.msg and exc.value.dead
    res = _lock.acquire(lock, "run-new", {"label": "rerun"}, takeover=True)
    assert res["changed"] and res["previous"]["run_id"] == "run-old"
    doc = owner_of(lock)
    assert doc["run_id"] == "run-new" and doc["took_over"]["owner"]["run_id"] == "run-old"
    assert "deadline passed" in doc["took_over"]["why"]


def test_a_live_lock_is_never_taken_over(lock):
    _lock.acquire(lock, "run-live", OWNER, ttl=600)
    with pytest.raises(_lock.LockError, match="another run holds"):
        _lock.acquire(lock, "run-new", takeover=True)
    assert owner_of(lock)["run_id"] == "run-live"


def test_guard_note_makes_the_lock_dead(lock):
    _lock.acquire(lock, "run-a", OWNER, ttl=600)
    assert _lock.annotate(lock, "run-b", {"outcome": "x"}) is False
    assert _lock.annotate(lock, "run-a", {"outcome": "guard_restore_failed", "at": "t", "msg": "no answer"})
    reason = _lock.dead_reason(lock, _lock.read_owner(lock), time.time())
    assert "guard ended that run (guard_restore_failed at t: no answer)" in reason
    with pytest.raises(_lock.LockError, match="the guard ended run run-a"):
        _lock.renew(lock, "run-a", 60)
    assert _lock.acquire(lock, "run-b", takeover=True)["previous"]["guard"]["outcome"] == "guard_restore_failed"


def test_renew_moves_only_this_runs_deadline(lock):
    _lock.acquire(lock, "run-a", OWNER, ttl=10)
    first = owner_of(lock)["deadline"]
    doc = _lock.renew(lock, "run-a", 3600)
    assert doc["deadline"] > first + 3000 and owner_of(lock)["renewed"]
    with pytest.raises(_lock.LockError, match="held by another run"):
        _lock.renew(lock, "run-b", 60)
    _lock.release(lock, "run-a")
    with pytest.raises(_lock.LockError, match="not held"):
        _lock.renew(lock, "run-a", 60)


def test_wait_gets_the_lock_once_released(lock):
    _lock.acquire(lock, "run-a", ttl=600)
    timer = threading.Timer(0.5, _lock.release, (lock, "run-a"))
    timer.start()
    try:
        res = _lock.acquire(lock, "run-b", wait=20)
    finally:
        timer.join()
    assert res["changed"] and res["waited"] > 0 and owner_of(lock)["run_id"] == "run-b"


def test_old_format_and_missing_owner(lock, monkeypatch):
    os.mkdir(lock)
    assert _lock.read_owner(lock) == {}
    assert _lock.dead_reason(lock, {}, time.time()) is None          # being written: live
    assert "no owner was ever written" in _lock.dead_reason(lock, {}, time.time() + _lock.NO_OWNER_GRACE + 5)
    with open(os.path.join(lock, "owner"), "w") as handle:
        handle.write("switch ngram from ctl since 2026-12-01T09:00:00Z\n")
    with pytest.raises(_lock.LockError, match="switch ngram from ctl since"):
        _lock.acquire(lock, "run-b", takeover=True)  # no deadline: cannot be known dead


def test_check_mode_writes_nothing(lock, tmp_path):
    res = _lock.acquire(lock, "run-a", OWNER, check_mode=True, directories=[str(tmp_path / "state" / "x")])
    assert res["changed"] and res["lock"]["run_id"] == "run-a"
    assert os.listdir(os.path.dirname(lock)) == [] and not (tmp_path / "state").exists()
    _lock.acquire(lock, "run-a", OWNER)
    assert _lock.release(lock, "run-a", check_mode=True)["changed"] and os.path.isdir(lock)


def _race(lock, argv_tail, n):
    code = ("import sys, json; sys.path.insert(0, %r)\n"
            "from ansible_collections.llmops.specdec.plugins.module_utils import _lock\n"
            "run = sys.argv[1]; takeover = sys.argv[2] == '1'\n"
            "try:\n"
            "    r = _lock.acquire(%r, run, {'label': run}, ttl=600, takeover=takeover)\n"
            "    print('WON' if r['changed'] else 'SAME')\n"
            "except _lock.LockError as e:\n"
            "    print('LOST')\n") % (COLLECTIONS, lock)
    procs = [subprocess.Popen([sys.executable, "-c", code, "run-%d" % i, argv_tail], stdout=subprocess.PIPE, text=True)
             for i in range(n)]
    return [p.communicate(timeout=60)[0].strip() for p in procs]


def test_racing_takers_exactly_one_wins(lock):
    outcomes = _race(lock, "0", 6)
    assert sorted(outcomes) == ["LOST"] * 5 + ["WON"], outcomes
    assert owner_of(lock)["label"] == owner_of(lock)["run_id"]


def test_racing_takeovers_of_a_dead_lock_exactly_one_wins(lock):
    _lock.acquire(lock, "run-dead", ttl=-1)
    outcomes = _race(lock, "1", 6)
    assert sorted(outcomes) == ["LOST"] * 5 + ["WON"], outcomes
    doc = owner_of(lock)
    assert doc["took_over"]["owner"]["run_id"] == "run-dead" and doc["run_id"] != "run-dead"
