# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An async job's results file, as async_wrapper writes it."""
from __future__ import annotations

import json
import threading
import time

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _job

RUNNING = {"started": True, "finished": False, "ansible_job_id": "j1"}


def test_read_job_tells_running_from_finished(tmp_path):
    path = tmp_path / "j1"
    path.write_text("")
    assert _job.read_job(str(path)) is None  # not written yet
    path.write_text(json.dumps(RUNNING))
    assert _job.read_job(str(path)) is None
    path.write_text(json.dumps({"failed": True, "msg": "Timeout exceeded", "child_pid": 9}))
    assert _job.read_job(str(path)) == {"failed": True, "msg": "Timeout exceeded", "child_pid": 9}


@pytest.mark.parametrize("content, match", [(None, "no async job results file"), ("{", "is not JSON"),
                                            ("[1]", "holds list, not a result")])
def test_read_job_refuses_what_is_not_a_job(tmp_path, content, match):
    path = tmp_path / "j1"
    if content is not None:
        path.write_text(content)
    with pytest.raises(_job.JobError, match=match):
        _job.read_job(str(path))


def test_wait_job_returns_after_one_cycle_or_when_the_job_ends(tmp_path):
    path = tmp_path / "j1"
    path.write_text(json.dumps(RUNNING))
    result, waited = _job.wait_job(str(path), 0.3, poll=0.05)
    assert result is None and 0.3 <= waited < 1.0
    assert _job.wait_job(str(path), 0)[0] is None

    def finish():
        time.sleep(0.2)
        path.write_text(json.dumps({"bench": {"ok": 1}, "msg": "done"}))
    threading.Thread(target=finish).start()
    t0 = time.monotonic()
    result, waited = _job.wait_job(str(path), 10, poll=0.05)
    assert result == {"bench": {"ok": 1}, "msg": "done"} and time.monotonic() - t0 < 2
