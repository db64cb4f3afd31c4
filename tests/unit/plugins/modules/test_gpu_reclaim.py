# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reclaim main(): options, check/diff mode, results and failures, on the NVML shim with real holders."""
from __future__ import annotations

import json
import os
import time

import pynvml
import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.llmops.specdec.plugins.doc_fragments import lease as lease_fragment
from ansible_collections.llmops.specdec.plugins.module_utils import _guard_state, _nvml, _optional, _systemd
from ansible_collections.llmops.specdec.plugins.modules import gpu_reclaim
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import (
    NOBODY, FakeUnits, alive)


@pytest.fixture
def host(gpu_host):
    return gpu_host(2)


@pytest.fixture
def systemctl(monkeypatch):
    fake = FakeUnits(monkeypatch, _systemd)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv))
    return fake


def run(args, outcome=ExitJson):
    return run_module(gpu_reclaim.main, args, outcome)


def test_check_then_real_then_check_then_real(host, systemctl):
    main = host.hold((0, 2000))
    stray = host.hold((1, 1000))
    spared = host.hold_as((1, 500), exe=host.program("nv-hostengine"))  # the executable counts, not argv
    systemctl.add("vllm.service", [main])
    args = {"units": ["vllm.service"], "scope": "gpu", "gpus": ["0", "1"], "term_timeout": 2,
            "protect": ["nv-hostengine"], "_ansible_diff": True}

    # The protected holder would keep GPU 1 busy: check mode and the real run both refuse up front,
    # naming it, and nothing is stopped or signalled.
    for check_mode in (True, False):
        refused = run(dict(args, _ansible_check_mode=check_mode), FailJson)
        assert "GPU(s) 1 would stay busy" in refused["msg"] and "left alone: protected program" in refused["msg"]
        assert refused["touched"] is False and refused["stopped"] == []
        assert refused["signalled"] == [] and refused["units"][0]["action"] == "none"
        assert alive(spared) and alive(main) and alive(stray)
    assert [c for c in systemctl.calls if "stop" in c] == []

    args["gpus"] = ["0"]
    check = run(dict(args, _ansible_check_mode=True))
    assert check["changed"] is True and alive(main)
    assert [u["action"] for u in check["units"]] == ["would stop"]
    assert [e["pid"] for e in check["would_signal"]] == [main]
    assert check["diff"]["after"]["gpu0"]["used_mib"] == 0

    real = run(args)
    assert real["changed"] is True and not alive(main) and alive(stray) and alive(spared)
    assert real["touched"] is True and real["stopped"] == ["vllm.service"] and real["gpus_source"] == "gpus"
    assert real["units"][0]["action"] == "stopped" and real["gpus"][0]["used_mib_after"] == 0

    again = run(dict(args, _ansible_check_mode=True))
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"]
    final = run(args)
    assert final["changed"] is False and final["signalled"] == [] and final["units"][0]["action"] == "none"
    assert final["touched"] is False and final["stopped"] == []
    assert final["gpus"][0]["used_mib_after"] == 0


def test_without_diff_mode_no_diff_is_returned(host, systemctl):
    host.hold((0, 100))
    result = run({"scope": "gpu", "gpus": ["all"]})
    assert result["changed"] is True and "diff" not in result
    assert set(result) >= {"gpus", "gpus_source", "units", "signalled", "spared", "elapsed", "touched", "stopped"}


def test_missing_gpu_fails_before_the_unit_is_touched(host, systemctl):
    main = host.hold((0, 100))
    systemctl.add("vllm.service", [main])
    result = run({"units": ["vllm.service"], "gpus": ["GPU-missing"]}, FailJson)
    assert result["msg"].startswith("GPU GPU-missing not found")
    assert systemctl.calls == [] and alive(main)


def _armed_guard(tmp_path, deadline_in):
    """A guard state file as switch_guard writes it, armed by run-a."""
    path = tmp_path / "guard" / "vllm-server.service.json"
    path.parent.mkdir(mode=0o700)
    path.write_text(json.dumps({"version": _guard_state.STATE_VERSION, "run_id": "run-a", "unit": "vllm.service",
                                "phase": _guard_state.PHASE_ARMED, "deadline": time.time() + deadline_in}))
    return {"statefile": str(path), "run_id": "run-a", "ttl": 90}


def test_the_lease_is_renewed_for_the_step_after_the_reclaim(host, systemctl, tmp_path):
    main = host.hold((0, 100))
    systemctl.add("vllm.service", [main])
    lease = _armed_guard(tmp_path, 5)
    result = run({"units": ["vllm.service"], "gpus": ["0"], "lease": lease})
    state = json.loads(open(lease["statefile"]).read())
    assert result["touched"] and not alive(main)
    assert state["renewals"] >= 2 and state["deadline"] > time.time() + 80  # at the start and at the end


def test_a_lost_lease_stops_nothing(host, systemctl, tmp_path):
    main = host.hold((0, 100))
    systemctl.add("vllm.service", [main])
    lease = _armed_guard(tmp_path, 5)
    os.unlink(lease["statefile"])  # the guard restored the host and is gone
    result = run({"units": ["vllm.service"], "gpus": ["0"], "lease": lease}, FailJson)
    assert "lease on the host's guard was lost" in result["msg"] and "no guard is armed" in result["lease_lost"]
    assert result["touched"] is False and systemctl.calls == [] and alive(main)


def test_missing_pynvml_is_a_missing_required_lib(monkeypatch, systemctl):
    monkeypatch.setattr(_nvml, "PYNVML", _optional.Optional("pynvml_absent_in_this_test"))
    result = run({"units": ["vllm.service"]}, FailJson)
    assert "nvidia-ml-py" in result["msg"] and "nothing was stopped" in result["msg"]
    assert systemctl.calls == []


def test_bad_scope_is_rejected_by_the_argument_spec():
    result = run({"scope": "everything"}, FailJson)
    assert "scope" in result["msg"] and "unit, gpu" in result["msg"]


def test_the_services_gpus_by_default_and_another_users_job_survives(host, systemctl):
    main = host.hold((0, 2000))
    job = host.hold_as((1, 9000), uid=NOBODY)  # another user's job on a GPU the service does not use
    systemctl.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID")
    result = run({"units": ["vllm.service"], "scope": "gpu"})
    assert result["gpus_source"] == "CUDA_VISIBLE_DEVICES" and [g["index"] for g in result["gpus"]] == [0]
    assert not alive(main) and alive(job)


def test_another_users_job_on_the_services_gpu_refuses_with_the_unit_untouched(host, systemctl):
    main = host.hold((0, 2000))
    job = host.hold_as((0, 9000), uid=NOBODY)
    systemctl.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID")
    for check_mode in (True, False):
        result = run({"units": ["vllm.service"], "scope": "gpu", "_ansible_check_mode": check_mode}, FailJson)
        assert "pid %d (" % job in result["msg"] and "user nobody" in result["msg"]
        assert result["touched"] is False and alive(main) and alive(job)
    assert [c for c in systemctl.calls if "stop" in c] == []


def test_a_kept_unit_beside_the_candidate_is_spared_and_its_memory_accounted(host, systemctl):
    """The candidate is reclaimed while the parked baseline keeps its residual on the same GPU."""
    parked = host.hold((0, 2867))
    candidate = host.hold((0, 60000))
    systemctl.add("baseline.service", [parked])
    systemctl.add("candidate.service", [candidate])
    args = {"units": ["candidate.service"], "gpus": ["0"], "scope": "gpu"}
    # Without keep_units the parked baseline is a holder to leave alone (scope unit: the run is refused)
    # or, in scope gpu, one more process of the service's user to end: keep_units is what spares it.
    refused = run(dict(args, scope="unit"), FailJson)
    assert "pid %d (" % parked in refused["msg"] and alive(candidate)
    predicted = run(dict(args, _ansible_check_mode=True))
    assert sorted(e["pid"] for e in predicted["would_signal"]) == sorted([parked, candidate])
    checked = run(dict(args, keep_units=["baseline.service"], _ansible_check_mode=True))
    assert checked["changed"] and [e["pid"] for e in checked["would_signal"]] == [candidate]
    assert checked["gpus"][0]["kept_mib_before"] == 2867

    result = run(dict(args, keep_units=["baseline.service"]))
    assert not alive(candidate) and alive(parked)
    assert result["kept"][0]["name"] == "baseline.service" and result["kept"][0]["pids"] == [parked]
    gpu = result["gpus"][0]
    assert gpu["kept_mib_after"] == 2867 and gpu["used_mib_after"] == 0 and gpu["processes_after"] == []
    assert all(e["pid"] != parked for e in result["spared"] + result["signalled"])
    assert "stop" not in systemctl.verbs("baseline.service")


def test_a_unit_both_stopped_and_kept_is_refused(host, systemctl):
    systemctl.add("vllm.service", [host.hold((0, 100))])
    result = run({"units": ["vllm.service"], "keep_units": ["vllm.service"], "gpus": ["0"]}, FailJson)
    assert "both stopped (units) and kept (keep_units)" in result["msg"] and not result["touched"]


def test_nvml_lost_after_the_stop_fails_cleanly_with_touched(host, systemctl, monkeypatch):
    main = host.hold((0, 2000))
    systemctl.add("vllm.service", [main], env="CUDA_VISIBLE_DEVICES=0")

    class Lost:
        def __getattr__(self, name):
            return getattr(pynvml, name)

        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            if any(c[1] == "stop" for c in systemctl.calls):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
            return pynvml.nvmlDeviceGetComputeRunningProcesses(handle)

    monkeypatch.setattr(_nvml.PYNVML, "get", Lost)
    result = run({"units": ["vllm.service"]}, FailJson)
    assert result["msg"].startswith("NVML failed during the reclaim") and "roll back" in result["msg"]
    assert result["touched"] is True and result["stopped"] == ["vllm.service"] and result["changed"] is True
    assert "exception" not in result


def test_documentation_matches_the_argument_spec(monkeypatch):
    seen = {}

    class Captured(Exception):
        pass

    def capture(self, argument_spec, **kwargs):
        seen.update(argument_spec)
        seen["__check_mode"] = kwargs.get("supports_check_mode")
        raise Captured()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(Captured):
        gpu_reclaim.main()
    assert seen.pop("__check_mode") is True
    doc = yaml.safe_load(gpu_reclaim.DOCUMENTATION)["options"]
    doc.update(yaml.safe_load(lease_fragment.ModuleDocFragment.DOCUMENTATION)["options"])
    assert set(doc) == set(seen)
    for name, spec in seen.items():
        assert doc[name]["type"] == spec["type"], name
        assert doc[name].get("elements") == spec.get("elements"), name
        assert doc[name].get("default") == spec.get("default"), name
        assert doc[name].get("choices") == spec.get("choices"), name
    returns = yaml.safe_load(gpu_reclaim.RETURN)
    assert {"touched", "stopped", "gpus_source", "gpus", "units", "signalled", "spared"} <= set(returns)
    yaml.safe_load(gpu_reclaim.EXAMPLES)
