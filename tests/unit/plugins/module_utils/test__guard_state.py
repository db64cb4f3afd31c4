# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guard_state: the guard's history keeps the normal path's modes (issue 31, item 9). No processes."""
from __future__ import annotations

import os
import stat

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_guard_history_is_0600_in_a_0700_directory(tmp_path):
    history = tmp_path / "state" / "history.jsonl"
    _guard_state.append_history(str(history), {"outcome": "restored_by_guard"})
    assert _mode(str(history)) == 0o600
    assert _mode(str(history.parent)) == 0o700


def test_guard_history_written_0644_before_is_made_0600(tmp_path):
    history = tmp_path / "history.jsonl"
    history.write_text('{"old": 1}\n')
    os.chmod(str(history), 0o644)
    _guard_state.append_history(str(history), {"outcome": "restored_by_guard"})
    assert _mode(str(history)) == 0o600
    assert history.read_text().count("\n") == 2
