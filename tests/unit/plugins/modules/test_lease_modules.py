# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""engine_ready and spec_bench stop at once when the lease on the host's guard is lost."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.modules import engine_ready, spec_bench
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import FailJson, run_module


@pytest.mark.parametrize("main, args", [
    (engine_ready.main, {"engine": "vllm", "timeout": 0}),
    (spec_bench.main, {"model": "m", "requests": 1, "warmup": 0, "metrics": "none", "run_timeout": 5}),
])
def test_a_guard_that_restored_the_host_ends_the_wait(tmp_path, main, args):
    (tmp_path / "guard").mkdir()
    lease = {"statefile": str(tmp_path / "guard" / "vllm-server.service.json"), "run_id": "run-a", "ttl": 60}
    res = run_module(main, dict(args, url="http://127.0.0.1:9", lease=lease), FailJson)
    assert "lease on the host" in res["msg"] and "no guard is armed" in res["lease_lost"], res["msg"]
