# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's lease on the host's guard, renewed by the modules that wait on the host."""
from __future__ import annotations

import json
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state, _lease


@pytest.fixture
def statefile(tmp_path):
    path = tmp_path / "guard" / "vllm-server.service.json"
    path.parent.mkdir(mode=0o700)
    path.write_text(json.dumps({"version": _guard_state.STATE_VERSION, "run_id": "run-a", "unit": "vllm-server.service", "phase": _guard_state.PHASE_ARMED,
                                "deadline": time.time() + 5}))
    return path


def _deadline(statefile):
    return json.loads(statefile.read_text())["deadline"]


def test_renew_extends_the_deadline(statefile):
    before = _deadline(statefile)
    state = _lease.renew({"statefile": str(statefile), "run_id": "run-a", "ttl": 600})
    assert state["renewals"] == 1 and _deadline(statefile) > before + 500
    assert _lease.renew(None) is None


@pytest.mark.parametrize("change, why", [("gone", "no guard is armed"), ("other", "belongs to run run-b"),
                                         ("restoring", "too late to renew")])
def test_a_lease_that_is_not_ours_any_more_is_lost(statefile, change, why):
    if change == "gone":
        statefile.unlink()
    else:
        doc = json.loads(statefile.read_text())
        doc.update({"other": {"run_id": "run-b"}, "restoring": {"phase": _guard_state.PHASE_RESTORING}}[change])
        statefile.write_text(json.dumps(doc))
    with pytest.raises(_lease.LeaseLost, match=why):
        _lease.renew({"statefile": str(statefile), "run_id": "run-a", "ttl": 60})


def test_heartbeat_renews_while_the_block_runs_and_keeps_the_first_loss(statefile):
    lease = {"statefile": str(statefile), "run_id": "run-a", "ttl": 60}
    with _lease.Heartbeat(lease, interval=0.05) as beat:
        deadline = time.monotonic() + 10
        while beat.renewals < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert beat.renewals >= 3 and beat.lost is None
        statefile.unlink()  # the guard restored the host meanwhile
        while beat.lost is None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "no guard is armed" in beat.lost


def _state(**kw):
    doc = {"version": _guard_state.STATE_VERSION, "run_id": "run-a", "phase": _guard_state.PHASE_ARMED, "deadline": 100.0,
           "deadline_at": "then"}
    doc.update(kw)
    return doc


@pytest.mark.parametrize("state, now, why", [
    (None, 0, "no guard is armed"),
    (_state(run_id="run-b"), 0, "belongs to run run-b, not run-a"),
    (_state(phase=_guard_state.PHASE_RESTORING, restoring_since="t"), 0, "the guard is restoring since t"),
    (_state(deadline=None), 0, "has no deadline"),
    (_state(), 100.0, "deadline then passed 0.0 s ago without a renewal from the controller"),
    (_state(), 130.5, "passed 30.5 s ago"),
])
def test_lease_problem_names_why_the_lease_is_lost(state, now, why):
    assert why in _lease.lease_problem(state, "run-a", now)


def test_lease_problem_is_none_while_the_deadline_is_ahead():
    assert _lease.lease_problem(_state(), "run-a", 99.9) is None


def test_watch_never_renews_and_ends_the_job_once_the_deadline_passes(statefile):
    """Issue 31: the lease is the controller's; the watch only reads it, and calls back once it ran out."""
    doc = json.loads(statefile.read_text())
    doc["deadline"] = time.time() + 0.3
    statefile.write_text(json.dumps(doc))
    before = statefile.read_text()
    ended = []
    with _lease.Watch({"statefile": str(statefile), "run_id": "run-a", "ttl": 600}, interval=0.05) as watch:
        assert watch.lost is None
        watch.on_lost(ended.append)
        limit = time.monotonic() + 5
        while not ended and time.monotonic() < limit:
            time.sleep(0.02)
    assert statefile.read_text() == before  # never renewed
    assert len(ended) == 1 and "without a renewal from the controller" in ended[0] and watch.lost == ended[0]
    late = []
    watch.on_lost(late.append)  # given after the loss: called at once
    assert late == ended


def test_watch_follows_renewals_by_the_controller(statefile):
    lease = {"statefile": str(statefile), "run_id": "run-a", "ttl": 0.5}
    with _lease.Watch(lease, interval=0.05) as watch:
        for _renewal in range(8):  # 1.2 s: past the first deadline, held by the controller's renewals
            _lease.renew(lease)
            time.sleep(0.15)
        assert watch.lost is None and watch.checks > 5


def test_watch_loses_a_lease_the_guard_took_back(statefile):
    with _lease.Watch({"statefile": str(statefile), "run_id": "run-a", "ttl": 60}, interval=0.05) as watch:
        statefile.unlink()  # the guard restored and removed its state
        limit = time.monotonic() + 5
        while watch.lost is None and time.monotonic() < limit:
            time.sleep(0.02)
    assert "no guard is armed" in watch.lost


def test_watch_without_a_lease_does_nothing():
    with _lease.Watch(None) as watch:
        pass
    assert watch.lost is None and watch.checks == 0


def test_watch_of_a_lease_already_lost_says_so_at_once(statefile):
    statefile.unlink()
    with _lease.Watch({"statefile": str(statefile), "run_id": "run-a", "ttl": 60}) as watch:
        assert "no guard is armed" in watch.lost
