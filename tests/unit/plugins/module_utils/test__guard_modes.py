# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guard's restore writes the state it puts back with the normal path's modes (issue 31, item 9).

``_record`` and ``_files`` keep every file under the state directory 0600 (baselines, history); the
guard's restore must not leave them world-readable. No processes: the writes alone.
"""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _guard, _unitfile


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_restore_puts_baselines_back_0600(tmp_path):
    unit_path = tmp_path / "vllm-server.service"
    baseline = tmp_path / "state" / "baselines" / "k.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text("{}\n")
    os.chmod(str(baseline), 0o644)  # as an older guard left it
    state = {"unit": "vllm-server.service", "unit_path": str(unit_path),
             "restore": {"source": "/snap", "sha256": "0" * 64}}
    _guard._put_back(state, b"[Service]\n", [(str(baseline), b'{"a": 1}\n')], lambda argv: (0, "", ""))
    assert baseline.read_bytes() == b'{"a": 1}\n'
    assert _mode(str(baseline)) == 0o600
    assert _mode(str(unit_path)) == 0o644  # the unit file stays readable to systemd's tools


def test_guard_history_is_0600_in_a_0700_directory(tmp_path):
    history = tmp_path / "state" / "history.jsonl"
    _guard.append_history(str(history), {"outcome": "restored_by_guard"})
    assert _mode(str(history)) == 0o600
    assert _mode(str(history.parent)) == 0o700


def test_guard_history_written_0644_before_is_made_0600(tmp_path):
    history = tmp_path / "history.jsonl"
    history.write_text('{"old": 1}\n')
    os.chmod(str(history), 0o644)
    _guard.append_history(str(history), {"outcome": "restored_by_guard"})
    assert _mode(str(history)) == 0o600
    assert history.read_text().count("\n") == 2


# --------------------------------------------------------------------------- issue 31, item 3

def test_the_guard_removes_only_a_candidate_unit_the_collection_wrote(tmp_path):
    foreign = tmp_path / "sshd-candidate.service"
    foreign.write_text("[Service]\nExecStart=/usr/sbin/sshd -D\n")
    env = tmp_path / "sshd-candidate.service.env"
    env.write_text("X=1\n")
    calls = []
    state = {"park": {"unit": "sshd-candidate.service", "unit_path": str(foreign), "env_file": str(env)}}
    _guard._remove_parked_candidate(state, lambda argv: calls.append(argv) or (0, "", ""))
    assert foreign.exists() and calls == []  # neither disabled nor removed
    ours = tmp_path / "vllm-server-candidate.service"
    ours.write_text(_unitfile.MANAGED_HEADER + " (role spec_server)\n[Service]\nExecStart=/bin/true\n")
    state = {"park": {"unit": "vllm-server-candidate.service", "unit_path": str(ours), "env_file": None}}
    _guard._remove_parked_candidate(state, lambda argv: calls.append(argv) or (0, "", ""))
    assert not ours.exists() and calls == [["systemctl", "disable", "vllm-server-candidate.service"]]


@pytest.mark.parametrize("unit", ["sshd.service", "vllm-server.service"])
def test_the_guard_is_armed_only_for_a_candidate_unit_name(unit):
    with pytest.raises(_guard.GuardError, match="must be a candidate unit name"):
        _guard._park_section({"unit": "vllm-server.service",
                              "park": {"unit": unit, "unit_path": "/etc/systemd/system/" + unit}})
