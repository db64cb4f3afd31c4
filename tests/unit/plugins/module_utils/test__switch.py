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


def test_park_settings_default_to_production_port_plus_one_and_its_own_unit():
    off = _switch.settings(GOOD)
    assert off["park"] is False and "park_unit" not in off
    out = _switch.settings(dict(GOOD, park=True, server_unit="vllm-server.service", server_port="8000"))
    assert (out["park_unit"], out["park_port"], out["park_share"]) == ("vllm-server-candidate.service", 8001, 0.9)
    shared = _switch.settings(dict(GOOD, park="yes", server_unit="sg.service", server_port=30000, server_share=0.7,
                                   park_port=31000))
    assert (shared["park_port"], shared["park_share"]) == (31000, 0.7)


@pytest.mark.parametrize("extra,match", [
    ({"park_port": 8000}, "spec_switch_park_port must differ from spec_server_port"),
    ({"park_unit": "vllm-server.service"}, "spec_switch_park_unit must differ"),
    ({"park_unit": "x;rm -rf /.service"}, "spec_switch_park_unit"),
    ({"park_port": 70000}, "spec_switch_park_port"),
    ({"park_share": 1.5}, "spec_switch_park_share"),
])
def test_park_settings_refuse_production_own_unit_or_port_and_bad_values(extra, match):
    values = dict(GOOD, park=True, server_unit="vllm-server.service", server_port=8000, **extra)
    with pytest.raises(_gate.GateError, match=match):
        _switch.settings(values)


@pytest.mark.parametrize("unit", ["sshd.service", "systemd-journald.service",
                                  "candidate.service", "getty@tty1.service"])
def test_the_park_unit_is_only_a_name_of_the_collections_pattern(unit):
    # issue 31, item 3: the park flow writes and later removes this unit; sshd.service must never be it
    values = dict(GOOD, park=True, server_unit="vllm-server.service", server_port=8000, park_unit=unit)
    with pytest.raises(_gate.GateError, match="spec_switch_park_unit must be a candidate unit of the collection's "
                                              "pattern NAME-candidate.service"):
        _switch.settings(values)
    ok = _switch.settings(dict(values, park_unit="vllm-a-candidate.service"))
    assert ok["park_unit"] == "vllm-a-candidate.service"
