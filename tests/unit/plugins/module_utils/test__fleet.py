# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_fleet: the capacity guard's limits, probes, refusals and states, and the rollout's outcome (docs/fleet.md).

The cases of molecule/fleet are here as plain host variables, with the messages that scenario searches for.
"""

from __future__ import annotations

import os

import jinja2
import pytest
import yaml
from ansible.utils.helpers import pct_to_int

from ansible_collections.llmops.specdec.plugins.filter import spec as spec_filters
from ansible_collections.llmops.specdec.plugins.module_utils import _fleet, _server
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils import unit_render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
HOSTS = ["flt-1", "flt-2", "flt-3", "flt-4"]
CRASHED = "crashed: sglang-server.service is inactive/dead (result success, 0 restarts); see journalctl -u sglang-server.service"


def fleet(**per_host):
    """Inventory of molecule/fleet (three vLLM hosts, one SGLang), with per-host additions."""
    hv = {h: {"spec_server_engine": "sglang" if h == "flt-4" else "vllm", "spec_server_model": "/models/m"} for h in HOSTS}
    for host, extra in per_host.items():
        hv[host.replace("_", "-")].update(extra)
    return hv


def probed(hv, plan, down=None, unreachable=None):
    """Register each batch host's share of probe results, as the probe task does."""
    down, unreachable = down or {}, unreachable or {}
    for host in plan["batch"]:
        results = []
        for item in plan["share"][host]:
            if item in unreachable:
                results.append({"item": item, "unreachable": True, "msg": unreachable[item] + "\n"})
            else:
                results.append({"item": item, "ready": item not in down, "msg": down.get(item, "ready")})
        hv[host]["specdec_guard_probe"] = {"results": results}
    return hv


def switched(hv, hosts, failed=()):
    for host in hosts:
        hv[host]["specdec_fleet_state"] = "switching"
        hv[host]["spec_switch_record"] = {
            "host": host,
            "outcome": "failed" if host in failed else "kept",
            "label": "ngram k=3",
            "suite": "all",
            "reason": "injected" if host in failed else "faster",
        }
    return hv


@pytest.mark.parametrize("n", [1, 3, 4, 7, 16, 100])
@pytest.mark.parametrize("value", ["1%", "10%", "25%", "29%", "33%", "50%", "75%", "99%", "100%", "150%", "0%", 3, "2"])
def test_count_reads_percentages_as_ansible_reads_serial(value, n):
    assert _fleet.count("x", value, n, minimum=1) == pct_to_int(value, n)


@pytest.mark.parametrize("value", ["two", "%", "1.5", True, [1]])
def test_count_refuses_what_it_cannot_read(value):
    with pytest.raises(_fleet.FleetError, match="x must be a number of hosts or N%"):
        _fleet.count("x", value, 4)


def test_plan_defaults_and_limits():
    plan = _fleet.guard_plan(fleet(), HOSTS, HOSTS)
    assert plan["limits"] == {"max_out": 4, "max_failed": None, "max_fail_pct": 100.0, "first_batch": True, "expected_batch": 4}
    assert plan["policy"] == {"max_out_of_service": "100%", "max_fail_percentage": None, "max_failed_hosts": None, "serial": "100%"}
    assert plan["serial_problem"] == ""
    plan = _fleet.guard_plan(fleet(), HOSTS, HOSTS[:2], "50%", "50", "25%", 2)
    assert plan["limits"] == {"max_out": 2, "max_failed": 1, "max_fail_pct": 50.0, "first_batch": True, "expected_batch": 2}
    # At least one host out; an empty value is unset (a survey sends "" for a question left blank).
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS, "10%", "", "", "")["limits"]["max_out"] == 1
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS, 0)["limits"]["max_out"] == 1
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS, max_failed_hosts=0)["limits"]["max_failed"] == 0


def test_plan_refuses_a_policy_it_cannot_read():
    with pytest.raises(_fleet.FleetError, match="specdec_max_out_of_service must be a number of hosts or N%, got 'half'"):
        _fleet.guard_plan(fleet(), HOSTS, HOSTS, "half")
    with pytest.raises(_fleet.FleetError, match="specdec_max_fail_percentage must be a percentage"):
        _fleet.guard_plan(fleet(), HOSTS, HOSTS, max_fail_percentage="most")
    with pytest.raises(_fleet.FleetError, match="specdec_in_service of flt-2 must be a boolean"):
        _fleet.guard_plan(fleet(flt_2={"specdec_in_service": "maybe"}), HOSTS, HOSTS)


def test_plan_refuses_a_hostile_port_or_key_naming_the_field_and_never_the_key():
    with pytest.raises(_fleet.FleetError, match="flt-2: spec_server_port must be between 1 and 65535, got 70000"):
        _fleet.guard_plan(fleet(flt_2={"spec_server_port": 70000}), HOSTS, HOSTS)
    with pytest.raises(_fleet.FleetError, match="spec_server_port must be an integer"):
        _fleet.guard_plan(fleet(flt_2={"spec_server_port": "80\nExecStartPre=/bin/id"}), HOSTS, HOSTS)
    with pytest.raises(_fleet.FleetError, match=r"flt-1: spec_server_api_key contains a carriage return \(U\+000D\)") as err:
        _fleet.guard_plan(fleet(flt_1={"spec_server_api_key": "sk-secret\r\n"}), HOSTS, HOSTS)
    assert "sk-secret" not in str(err.value)
    # Drained hosts are not probed, so not judged here; a good key and a port as text pass.
    plan = _fleet.guard_plan(fleet(flt_1={"spec_server_api_key": "sk-ok", "spec_server_port": "8001"},
                                   flt_2={"specdec_in_service": False, "spec_server_port": 0}), HOSTS, HOSTS)
    assert plan["drained"] == ["flt-2"] and plan["probes"]["flt-1"]["url"].endswith(":8001")


def test_serial_in_inventory_is_caught_on_the_first_batch_only():
    # molecule/fleet: specdec_serial=1 in inventory, so the play header made one batch of four.
    plan = _fleet.guard_plan(fleet(), HOSTS, HOSTS, serial="1")
    assert plan["serial_problem"].startswith("the first batch has 4 host(s) but specdec_serial=1 asks for 1: Ansible evaluates")
    assert plan["serial_problem"].endswith("not in inventory. Nothing was changed.")
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS[2:], serial="1")["serial_problem"] == ""
    # A list: the first batch is its first item; 0 means every host, as Ansible reads it.
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS[:1], serial=[1, "50%"])["serial_problem"] == ""
    assert "specdec_serial=[2, '50%'] asks for 2" in _fleet.guard_plan(fleet(), HOSTS, HOSTS[:1], serial=[2, "50%"])["serial_problem"]
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS, serial=0)["serial_problem"] == ""
    assert _fleet.guard_plan(fleet(), HOSTS, HOSTS[:1], serial="10%")["serial_problem"] == ""


def test_plan_shares_the_probing_and_skips_drained_hosts():
    hv = fleet(flt_3={"specdec_in_service": "false"})
    plan = _fleet.guard_plan(hv, HOSTS, HOSTS[:2], serial=2)
    assert plan["drained"] == ["flt-3"]
    assert plan["share"] == {"flt-1": ["flt-1", "flt-4"], "flt-2": ["flt-2"]}
    assert list(plan["probes"]) == ["flt-1", "flt-2", "flt-4"]


def _role_defaults(engine):
    """roles/spec_server/defaults/main.yml rendered for one engine, as Ansible would."""
    with open(os.path.join(REPO, "roles", "spec_server", "defaults", "main.yml"), encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    out = {"spec_server_engine": engine}
    env = jinja2.Environment()
    env.filters["llmops.specdec.engine_facts"] = spec_filters.FilterModule().filters()["engine_facts"]
    for key in ("spec_server_unit", "spec_server_host", "spec_server_port", "spec_server_ready_url"):
        value = raw[key]
        out[key] = env.from_string(value).render(out) if isinstance(value, str) else value
    return out


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_probe_defaults_are_the_server_roles(engine):
    defaults = _role_defaults(engine)
    assert (
        _fleet.SERVER_DEFAULTS["engine"]
        == yaml.safe_load(open(os.path.join(REPO, "roles", "spec_server", "defaults", "main.yml"), encoding="utf-8"))["spec_server_engine"]
    )
    got = _fleet.probe_target({"spec_server_engine": engine, "spec_server_model": "/m"})
    assert got["unit"] == defaults["spec_server_unit"]
    # The role leaves the port unset (null): its render takes the engine's own, as the probe does.
    assert defaults["spec_server_port"] is None
    port = unit_render.render(engine=engine, unit=defaults["spec_server_unit"], port=None)[1]["port"]
    assert got["url"] == "http://%s:%s" % (defaults["spec_server_host"], port)
    assert got["model"] == ("/m" if engine == "vllm" else None)
    assert _fleet.probe_target({"spec_server_model": "/m"})["engine"] == "vllm"


def _checked(**settings):
    base = {
        "engine": "vllm",
        "unit": "vllm-server.service",
        "executable": "/usr/local/bin/vllm",
        "model": "/m",
        "host": "127.0.0.1",
        "port": 8000,
        "user": "vllm",
        "group": "vllm",
        "working_dir": "/var/lib/vllm",
        "env_file": "/etc/x.env",
        "start_timeout": 1800,
        "stop_timeout": 120,
        "restart_sec": 30,
        "start_limit_burst": 10,
        "start_limit_interval": 600,
    }
    base.update(settings)
    return _server.unit_settings(base)


@pytest.mark.parametrize("bind", ["0.0.0.0", "", "::", "::1", "fe80::1", "10.0.0.5", "gpu1.example"])
def test_probe_address_is_the_server_roles_rule(bind):
    checked = _checked(host=bind or "127.0.0.1", port=8011)
    inventory = {"spec_server_host": bind, "spec_server_port": 8011, "spec_server_model": "/m"}
    if bind:
        assert _fleet.probe_target(inventory)["url"] == checked["ready_url"]
    assert _fleet.probe_target({"spec_server_checked": checked})["url"] == checked["ready_url"]


def test_probe_prefers_the_checked_settings_of_this_run():
    checked = _checked(engine="sglang", unit="sg.service", executable="/usr/bin/python3", port=30001, served_model_name="served")
    hv = {"spec_server_engine": "sglang", "spec_server_port": 1, "spec_server_checked": checked}
    assert _fleet.probe_target(hv) == {"url": "http://127.0.0.1:30001", "engine": "sglang", "unit": "sg.service", "model": None}
    checked = _checked(served_model_name="served", ready_url="https://lb.example/gpu1")
    assert _fleet.probe_target({"spec_server_checked": checked}) == {
        "url": "https://lb.example/gpu1",
        "engine": "vllm",
        "unit": "vllm-server.service",
        "model": "served",
    }
    # Inventory only: ready_url, unit and served name as given.
    assert _fleet.probe_target(
        {"spec_server_ready_url": "http://x:1", "spec_server_unit": "u.service", "spec_server_model": "/m", "spec_server_served_model_name": "s"}
    ) == {"url": "http://x:1", "engine": "vllm", "unit": "u.service", "model": "s"}


def test_batch_after_a_failed_candidate_goes_on_within_the_budget():
    # molecule/fleet candidate_fails: serial 2, at most 50% out, 50% failure budget; flt-2's candidate failed.
    hv = switched(fleet(), ["flt-1", "flt-2"], failed=["flt-2"])
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], "50%", 50, None, 2)
    g = _fleet.guard(plan, probed(hv, plan), HOSTS)
    assert g["lines"] == ["batch flt-3,flt-4: 2 to switch, 0 out of service, 2 out at once of 4 (limit 2), 1 of 2 tried so far failed"]
    assert (g["refused"], g["tried"], g["failed"]) == ("", ["flt-1", "flt-2"], ["flt-2"])
    assert g["states"] == {"flt-3": "switching", "flt-4": "switching"}
    assert g["reasons"] == {"flt-3": "", "flt-4": ""}


def test_batch_refused_while_a_host_is_down():
    # molecule/fleet guard: flt-4's service stopped, serial 2, at most 2 out of service.
    hv = fleet()
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-1", "flt-2"], 2, None, None, 2)
    g = _fleet.guard(plan, probed(hv, plan, down={"flt-4": CRASHED}), HOSTS)
    assert g["refused"] == (
        "switching flt-1, flt-2 now would leave 3 of 4 hosts out of service, more than "
        "specdec_max_out_of_service=2 (2 hosts); out of service: flt-4: crashed: sglang-server.service is "
        "inactive/dead (result success, 0 restarts)"
    )
    assert g["lines"][0] == "batch flt-1,flt-2: 2 to switch, 1 out of service (flt-4), 3 out at once of 4 (limit 2), 0 of 0 tried so far failed"
    assert g["lines"][1] == "capacity guard: %s. This batch and the ones after it are not touched." % g["refused"]
    assert g["states"] == {"flt-1": "refused", "flt-2": "refused"}
    assert g["reasons"]["flt-1"] == "rollout stopped before this batch: " + g["refused"]


def test_host_down_is_skipped_when_the_limit_allows():
    # molecule/fleet guard: at most 75% out; the second batch holds the host that is down.
    hv = switched(fleet(), ["flt-1", "flt-2"])
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], "75%", None, None, 2)
    g = _fleet.guard(plan, probed(hv, plan, down={"flt-4": CRASHED}), HOSTS)
    assert g["refused"] == "" and g["batch"] == ["flt-3"] and g["out"] == 2
    assert g["states"] == {"flt-3": "switching", "flt-4": "skipped"}
    assert g["reasons"]["flt-4"] == "out of service before its batch: crashed: sglang-server.service is inactive/dead (result success, 0 restarts)"


def test_drained_and_unreachable_hosts_are_out_of_service_in_fleet_order():
    hv = fleet(flt_1={"specdec_in_service": False})
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], 3, None, None, 2)
    g = _fleet.guard(plan, probed(hv, plan, unreachable={"flt-2": "  Failed to connect to the host via ssh"}), HOSTS)
    assert g["down"] == {"flt-1": _fleet.DRAINED, "flt-2": "unreachable: Failed to connect to the host via ssh"}
    assert g["out"] == 4 and g["refused"].startswith("switching flt-3, flt-4 now would leave 4 of 4 hosts out of service")
    assert g["refused"].endswith(
        "out of service: flt-1: drained in inventory (specdec_in_service: false); flt-2: unreachable: Failed to connect to the host via ssh"
    )


def test_failure_budget_counts_failed_candidates_and_hosts_that_left_the_play():
    hv = switched(fleet(), ["flt-1", "flt-2"], failed=["flt-2"])
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], "100%", 49, None, 2)
    g = _fleet.guard(plan, probed(hv, plan), ["flt-2", "flt-3", "flt-4"])
    assert g["failed"] == ["flt-1", "flt-2"]
    assert g["refused"] == (
        "failure budget spent: 2 of 2 host(s) tried so far failed (flt-1, flt-2), over specdec_max_fail_percentage=49.0 or specdec_max_failed_hosts=None"
    )
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], "100%", None, 0, 2)
    assert _fleet.guard(plan, probed(hv, plan), HOSTS)["refused"].startswith("failure budget spent: 1 of 2 host(s)")
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-3", "flt-4"], "100%", None, 1, 2)
    assert _fleet.guard(plan, probed(hv, plan), HOSTS)["refused"] == ""


def test_outcome_names_every_host_without_a_verdict():
    # After run_b of molecule/fleet: the first batch refused, flt-4 down, the second batch never reached.
    hv = fleet()
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-1", "flt-2"], 2, None, None, 2)
    g = _fleet.guard(plan, probed(hv, plan, down={"flt-4": CRASHED}), HOSTS)
    for host in plan["batch"]:
        hv[host].update(specdec_guard=g, specdec_fleet_state=g["states"][host], specdec_fleet_reason=g["reasons"][host])
    out = _fleet.outcome(hv, HOSTS)
    assert list(out["lines"]) == HOSTS
    assert out["lines"]["flt-1"].startswith("flt-1: REFUSED - rollout stopped before this batch: switching flt-1, flt-2")
    assert out["lines"]["flt-3"] == "flt-3: NOT REACHED - the rollout stopped before its batch"
    assert out["lines"]["flt-4"] == (
        "flt-4: NOT REACHED - the rollout stopped before its batch, and it was out of service: "
        "crashed: sglang-server.service is inactive/dead (result success, 0 restarts)"
    )
    assert out["fail"] == out["lines"]


def test_outcome_fails_failed_candidates_and_spares_drained_and_not_asked_hosts():
    hv = switched(fleet(), ["flt-1", "flt-2"], failed=["flt-2"])
    hv["flt-2"]["spec_switch_verdict_line"] = "flt-2: FAILED ngram k=3 on all - injected"
    hv["flt-3"].update(specdec_fleet_state="skipped", specdec_fleet_reason="out of service before its batch: " + _fleet.DRAINED)
    hv["flt-4"].update(specdec_fleet_state="skipped", specdec_fleet_reason="not asked: the request is for vllm hosts", specdec_not_asked=True)
    out = _fleet.outcome(hv, HOSTS)
    assert out["fail"] == {"flt-2": "flt-2: FAILED ngram k=3 on all - injected"}
    assert out["lines"] == {
        "flt-3": "flt-3: SKIPPED - out of service before its batch: " + _fleet.DRAINED,
        "flt-4": "flt-4: SKIPPED - not asked: the request is for vllm hosts",
    }
    # The inventory's spec_switch_fail_on_candidate_error: false keeps the failed candidate's host green;
    # without the composed line the record's own verdict line is the message.
    hv["flt-2"]["spec_switch_fail_on_candidate_error"] = "false"
    assert _fleet.outcome(hv, HOSTS)["fail"] == {}
    del hv["flt-2"]["spec_switch_fail_on_candidate_error"], hv["flt-2"]["spec_switch_verdict_line"]
    assert _fleet.outcome(hv, HOSTS)["fail"]["flt-2"].startswith("flt-2: FAILED ngram k=3 on all - injected")
    hv["flt-1"] = {"specdec_fleet_state": "switching"}
    assert _fleet.outcome(hv, HOSTS)["lines"]["flt-1"] == "flt-1: SWITCHING - failed before a verdict was recorded, see its error above"


def grouped(**per_host):
    """molecule/fleet's four hosts, flt-1 and flt-2 one serving group (flt-1 its head)."""
    hv = fleet(**per_host)
    for host in ("flt-1", "flt-2"):
        hv[host]["spec_server_nodes"] = ["flt-1", "flt-2"]
    return hv


def test_a_serving_group_is_one_service_probed_through_its_head():
    """issue 33: the group's worker is not probed (it serves no API); it is out of service when its head is, and the
    group counts once against specdec_max_out_of_service."""
    hv = grouped()
    plan = _fleet.guard_plan(hv, HOSTS, HOSTS, 1, None, None, None)
    assert plan["service"] == {"flt-1": "flt-1", "flt-2": "flt-1", "flt-3": "flt-3", "flt-4": "flt-4"}
    assert sorted(plan["probes"]) == ["flt-1", "flt-3", "flt-4"] and plan["limits"]["expected_batch"] == 4
    g = _fleet.guard(plan, probed(hv, plan, down={"flt-1": CRASHED}), HOSTS)
    assert g["down"]["flt-2"] == "its serving group's head flt-1: " + CRASHED.split("; see", maxsplit=1)[0]
    assert g["states"]["flt-1"] == g["states"]["flt-2"] == "skipped"
    # three services: the group (down) and two hosts to switch -> 3 out at once, over a limit of 1 service.
    assert g["out"] == 3
    assert g["refused"].startswith("switching flt-3, flt-4 now would leave 3 of 3 services (a serving group counts once) "
                                   "out of service")
    # the group alone switching is one service out
    plan = _fleet.guard_plan(hv, HOSTS, ["flt-1", "flt-2"], 1, None, None, 2)
    g = _fleet.guard(plan, probed(hv, plan), HOSTS)
    assert g["refused"] == "" and g["batch"] == ["flt-1", "flt-2"] and g["out"] == 1
    assert g["lines"][0].startswith("batch flt-1,flt-2: 2 to switch, 0 out of service, 1 out at once of 3 (limit 1)")


def test_a_group_with_one_node_drained_is_drained_whole():
    hv = grouped(flt_2={"specdec_in_service": False})
    plan = _fleet.guard_plan(hv, HOSTS, HOSTS, "100%", None, None, None)
    assert plan["drained"] == ["flt-1", "flt-2"] and sorted(plan["probes"]) == ["flt-3", "flt-4"]
    g = _fleet.guard(plan, probed(hv, plan), HOSTS)
    assert g["states"] == {"flt-1": "skipped", "flt-2": "skipped", "flt-3": "switching", "flt-4": "switching"}
