# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guard's restore writes the state it puts back with the normal path's modes (issue 31, item 9).

``_record`` and ``_files`` keep every file under the state directory 0600 (baselines, history); the
guard's restore must not leave them world-readable (the history: test__guard_state.py). No processes:
the writes alone.
"""
from __future__ import annotations

import os
import stat

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
