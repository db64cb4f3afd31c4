# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""awx/configure.yml with the real awx.awx modules against an in-memory AWX API (fake_controller.py):
what it creates, that AWX's checks accept it, and that a second run changes nothing."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import REPO
from fake_controller import FakeController, serve

SEED = {  # what the site creates by hand before applying (docs/awx.md, steps 4-5)
    "organizations": [{"name": "Default"}],
    "inventories": [{"name": "GPU inference fleet", "organization": 1}],
    "credentials": [{"name": "GPU hosts SSH", "organization": 1}],
}


def _apply(awx_venv, url):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), CONTROLLER_HOST=url,
               CONTROLLER_OAUTH_TOKEN="test-token", CONTROLLER_VERIFY_SSL="false")
    proc = subprocess.run([str(awx_venv / "bin" / "ansible-playbook"), "awx/configure.yml"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def applied(awx_venv):
    controller = FakeController(REPO, SEED)
    server, url = serve(controller)
    try:
        first = _apply(awx_venv, url)
        second = _apply(awx_venv, url)
    finally:
        server.shutdown()
    return controller, first, second


def test_creates_every_template_with_its_survey(applied, controller_config):
    controller = applied[0]
    for template in controller_config["controller_templates"]:
        created = controller.named("job_templates", template["name"])
        assert created["playbook"] == template["playbook"]
        assert created["project"] == controller.named("projects", "llmops.specdec")["id"]
        assert created["inventory"] == controller.named("inventories", "GPU inference fleet")["id"]
        assert created["execution_environment"] == controller.named("execution_environments", "llmops.specdec EE")["id"]
        assert controller.linked("job_templates", created["id"], "credentials") == [
            controller.named("credentials", "GPU hosts SSH")["id"]]
        if template.get("survey_enabled"):
            assert controller.survey("job_templates", created["id"]) == template["survey_spec"]
        assert json.loads(created.get("extra_vars") or "{}") == template.get("extra_vars", {})


def test_creates_the_workflow_baseline_then_sweep(applied):
    controller = applied[0]
    workflow = controller.named("workflow_job_templates", "specdec baseline then sweep")
    nodes = {n["identifier"]: n for n in controller.objects["workflow_job_template_nodes"].values()
             if n["workflow_job_template"] == workflow["id"]}
    assert nodes["baseline"]["unified_job_template"] == controller.named("job_templates", "specdec baseline")["id"]
    assert nodes["sweep"]["unified_job_template"] == controller.named("job_templates", "specdec sweep")["id"]
    assert controller.linked("workflow_job_template_nodes", nodes["baseline"]["id"], "success_nodes") == [nodes["sweep"]["id"]]
    assert controller.linked("workflow_job_template_nodes", nodes["sweep"]["id"], "success_nodes") == []


def test_creates_the_nightly_schedule_on_the_nightly_template(applied):
    controller = applied[0]
    by_target = {s["unified_job_template"]: s for s in controller.objects["schedules"].values()}
    assert len(by_target) == 2
    schedule = by_target[controller.named("job_templates", "specdec nightly")["id"]]
    assert schedule["rrule"] == "DTSTART;TZID=UTC:20260101T020000 RRULE:FREQ=DAILY;INTERVAL=1"
    assert schedule["enabled"] is True
    # The same night in slices: on its workflow, shipped disabled (enable one of the two).
    sliced = by_target[controller.named("workflow_job_templates", "specdec nightly in slices")["id"]]
    assert sliced["rrule"] == schedule["rrule"] and sliced["enabled"] is False


def test_creates_the_slice_workflow_with_one_node_per_slice(applied):
    controller = applied[0]
    workflow = controller.named("workflow_job_templates", "specdec nightly in slices")
    nodes = [n for n in controller.objects["workflow_job_template_nodes"].values() if n["workflow_job_template"] == workflow["id"]]
    nightly = controller.named("job_templates", "specdec nightly")
    assert {n["unified_job_template"] for n in nodes} == {nightly["id"]} and nightly["allow_simultaneous"] is True
    extra = [n["extra_data"] if isinstance(n["extra_data"], dict) else json.loads(n["extra_data"]) for n in nodes]
    assert sorted(e["specdec_slice"] for e in extra) == ["1/4", "2/4", "3/4", "4/4"]
    # Every node a root: AWX starts them at once.
    assert not any(controller.linked("workflow_job_template_nodes", n["id"], kind)
                   for n in nodes for kind in ("success_nodes", "failure_nodes", "always_nodes"))


def test_second_run_changes_nothing(applied):
    recap = re.search(r"localhost\s+:\s+ok=\d+\s+changed=(\d+)", applied[2])
    assert recap and recap.group(1) == "0", applied[2][-4000:]


def test_controller_refuses_a_broken_survey_and_rrule():
    """The fake refuses what AWX refuses, so the runs above passing means something."""
    controller = FakeController(REPO, SEED)
    status, answer = controller.handle("POST", "/api/v2/job_templates/", {}, {
        "name": "t", "project": 99, "inventory": 2, "playbook": "playbooks/nope.yml"})
    assert status == 400 and any("project 99" in e for e in answer["__all__"])
    status, answer = controller.handle("POST", "/api/v2/schedules/", {}, {
        "name": "s", "unified_job_template": 1, "rrule": "RRULE:FREQ=DAILY;INTERVAL=1"})
    assert status == 400 and any("DTSTART" in e for e in answer["__all__"])
