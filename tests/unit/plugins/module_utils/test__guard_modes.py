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

from ansible_collections.llmops.specdec.plugins.module_utils import _guard


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
