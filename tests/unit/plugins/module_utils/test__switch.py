# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch role's own settings pass the gate too (suite, benchmark, paths)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _switch

GOOD = {"suite": "reasoning", "bench_api": "completions", "bench_concurrency": [8, 1, 1], "bench_requests": "8",
        "bench_warmup": 1, "bench_max_tokens": 256, "bench_timeout": 120, "missing_baseline": "measure",
        "reclaim_scope": "gpu", "reclaim_verify_timeout": 60, "state_dir": "/var/lib/llmops-specdec",
        "lock_path": "/run/llmops-specdec.lock", "lock_wait": 0, "textfile_dir": ""}


def test_good_settings_come_back_typed():
    out = _switch.settings(GOOD)
    assert out["bench_concurrency"] == [1, 8] and out["bench_requests"] == 8 and out["textfile_dir"] == ""


@pytest.mark.parametrize("key, value, match", [
    ("suite", "reasoning\n# HELP x", "spec_switch_suite must be one of"),
    ("bench_concurrency", [], "must list at least one"),
    ("bench_concurrency", [1, True], "spec_switch_bench_concurrency[1] must be an integer"),
    ("bench_requests", 0, "spec_switch_bench_requests must be between 1"),
    ("bench_timeout", "inf", "spec_switch_bench_timeout must be a number"),
    ("reclaim_scope", "all", "spec_switch_reclaim_scope must be one of unit, gpu"),
    ("state_dir", "/var/lib/x\n", "spec_switch_state_dir contains a control"),
    ("lock_path", "run/lock", "spec_switch_lock_path must be an absolute path"),
    ("textfile_dir", "/var/lib/../tmp", "spec_switch_textfile_dir must be a normalised path"),
])
def test_bad_settings_are_refused_naming_the_variable(key, value, match):
    with pytest.raises(_gate.GateError) as info:
        _switch.settings(dict(GOOD, **{key: value}))
    assert match in str(info.value)
