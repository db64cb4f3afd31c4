# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_bench_wait main(): one bounded cycle, one renewal of the lease per cycle, the job's result relayed."""
from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state
from ansible_collections.llmops.specdec.plugins.modules import spec_bench_wait
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module

RUNNING = {"started": True, "finished": False, "ansible_job_id": "j1"}


@pytest.fixture(autouse=True)
def _exits(module_exits):
    return module_exits


def run(args, expect=ExitJson, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    return run_module(spec_bench_wait.main, args, expect)


@pytest.fixture
def lease(tmp_path):
    path = tmp_path / "guard" / "vllm-server.service.json"
    path.parent.mkdir(mode=0o700)
    path.write_text(json.dumps({"version": _guard_state.STATE_VERSION, "run_id": "run-a", "unit": "vllm-server.service",
                                "phase": _guard_state.PHASE_ARMED, "deadline": time.time() + 5}))
    return {"statefile": str(path), "run_id": "run-a", "ttl": 600}


def _deadline(lease):
    with open(lease["statefile"]) as f:
        return json.load(f)["deadline"]


def test_a_running_job_is_a_success_so_until_can_retry_and_each_cycle_renews(tmp_path, lease):
    job = tmp_path / "j1"
    job.write_text(json.dumps(RUNNING))
    before = _deadline(lease)
    res = run({"job": str(job), "timeout": 0.2, "poll": 0.05, "lease": lease})
    assert res["finished"] is False and res["changed"] is True and 0.2 <= res["waited"] < 1
    assert _deadline(lease) > before + 500 and res["renewed_until"]
    assert job.exists()
    assert set(res) - {"invocation", "_no_log_values"} <= set(yaml.safe_load(spec_bench_wait.RETURN))


def test_a_finished_benchmark_is_relayed_and_its_results_file_removed(tmp_path):
    job = tmp_path / "j1"
    job.write_text(json.dumps({"changed": False, "bench": {"ok": 4}, "msg": "1 level(s): 4 ok",
                               "warnings": ["run_timeout reached"], "invocation": {"module_args": {}}}))
    res = run({"job": str(job), "timeout": 5})
    assert res["finished"] is True and res["bench"] == {"ok": 4} and res["msg"] == "1 level(s): 4 ok"
    assert res["changed"] is False and res["renewed_until"] is None
    assert not job.exists()


def test_a_benchmark_that_lost_its_lease_fails_with_lease_lost(tmp_path, lease):
    job = tmp_path / "j1"
    job.write_text(json.dumps({"failed": True, "changed": False, "msg": "spec_bench against u: the lease ran out",
                               "lease_lost": "the guard's deadline passed", "bench": {"ok": 0}}))
    res = run({"job": str(job), "timeout": 5, "lease": lease}, expect=FailJson)
    assert res["lease_lost"] == "the guard's deadline passed" and res["msg"].endswith("the lease ran out")
    assert res["finished"] is True and res["bench"] == {"ok": 0}


def test_a_lease_that_cannot_be_renewed_warns_and_the_benchmark_says_the_rest(tmp_path, lease, monkeypatch):
    job = tmp_path / "j1"
    job.write_text(json.dumps(RUNNING))
    warnings = []
    monkeypatch.setattr(spec_bench_wait.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    os.unlink(lease["statefile"])  # the guard restored meanwhile: the benchmark, watching it, ends with lease_lost
    res = run({"job": str(job), "timeout": 0, "lease": lease})
    assert res["finished"] is False and res["changed"] is False
    assert warnings and "could not be renewed" in warnings[0] and "no guard is armed" in warnings[0]


def test_check_mode_renews_nothing_and_keeps_the_results_file(tmp_path, lease):
    job = tmp_path / "j1"
    job.write_text(json.dumps({"bench": {"ok": 1}, "msg": "ok"}))
    before = _deadline(lease)
    res = run({"job": str(job), "timeout": 1, "lease": lease}, check=True)
    assert res["finished"] is True and res["renewed_until"] is None and _deadline(lease) == before
    assert job.exists()


def test_no_job_fails_clearly(tmp_path):
    res = run({"job": str(tmp_path / "nope"), "timeout": 0}, expect=FailJson)
    assert res["msg"].startswith("no async job results file at ")


def test_documentation_matches_the_argument_spec(monkeypatch):
    from ansible.module_utils import basic
    from ansible_collections.llmops.specdec.plugins.doc_fragments import lease as lease_fragment
    from ansible_collections.llmops.specdec.plugins.module_utils import _lease
    seen = {}

    class Captured(Exception):
        pass

    def capture(self, argument_spec, **kwargs):
        seen.update(argument_spec)
        seen["__check_mode"] = kwargs.get("supports_check_mode")
        raise Captured()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(Captured):
        spec_bench_wait.main()
    assert seen.pop("__check_mode") is True
    doc = yaml.safe_load(spec_bench_wait.DOCUMENTATION)["options"]
    doc.update(yaml.safe_load(lease_fragment.ModuleDocFragment.DOCUMENTATION)["options"])
    assert set(doc) == set(seen)
    for name, spec in seen.items():
        assert doc[name]["type"] == spec["type"], name
        assert doc[name].get("default") == spec.get("default"), name
        assert doc[name].get("required", False) == spec.get("required", False), name
    assert seen["lease"] == _lease.LEASE_ARGSPEC
    assert {k: v["type"] for k, v in doc["lease"]["suboptions"].items()} == {
        k: v["type"] for k, v in _lease.LEASE_ARGSPEC["options"].items()}
    yaml.safe_load(spec_bench_wait.EXAMPLES)
