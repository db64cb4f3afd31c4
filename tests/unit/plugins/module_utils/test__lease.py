# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's lease on the host's guard, renewed by the modules that wait on the host."""
from __future__ import annotations

import json
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard, _lease


@pytest.fixture
def statefile(tmp_path):
    path = tmp_path / "guard" / "vllm-server.service.json"
    path.parent.mkdir(mode=0o700)
    path.write_text(json.dumps({"version": _guard.STATE_VERSION, "run_id": "run-a", "unit": "vllm-server.service", "phase": _guard.PHASE_ARMED,
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
        doc.update({"other": {"run_id": "run-b"}, "restoring": {"phase": _guard.PHASE_RESTORING}}[change])
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
