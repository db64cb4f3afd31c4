# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline checks of awx/controller/*.yml and awx/configure.yml against the real awx.awx modules."""
from __future__ import annotations

import re

import pytest
import yaml

from conftest import REPO, run_ansible_playbook

# controller_* list (infra.aap_configuration's names) -> the awx.awx module configure.yml feeds it to.
LISTS = {
    "controller_execution_environments": "execution_environment",
    "controller_projects": "project",
    "controller_templates": "job_template",
    "controller_workflows": "workflow_job_template",
    "controller_schedules": "schedule",
}
PY_TYPES = {"str": str, "bool": bool, "int": int, "float": (int, float), "list": list, "dict": dict}


def test_configure_playbook_passes_syntax_check(awx_venv):
    proc = run_ansible_playbook(["--syntax-check", "awx/configure.yml"], venv=awx_venv)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("listname", sorted(LISTS))
def test_items_use_only_module_options_with_valid_values(controller_config, module_docs, listname):
    options = module_docs[LISTS[listname]]
    assert controller_config[listname], "%s is empty" % listname
    for item in controller_config[listname]:
        for key, value in item.items():
            assert key in options, "%s %r: %r is not an option of awx.awx.%s" % (
                listname, item["name"], key, LISTS[listname])
            doc = options[key]
            assert isinstance(value, PY_TYPES[doc.get("type", "str")]), (item["name"], key, value)
            if "choices" in doc:
                assert value in doc["choices"], (item["name"], key, value, doc["choices"])
        missing = [k for k, d in options.items() if d.get("required") and k not in item]
        assert not missing, "%s %r lacks required %s" % (listname, item["name"], missing)


def _configure_tasks():
    play = yaml.safe_load((REPO / "awx" / "configure.yml").read_text())[0]
    return play["tasks"]


@pytest.mark.parametrize("listname", sorted(LISTS))
def test_configure_passes_every_key_of_the_data_on(controller_config, listname):
    """A key in the data that configure.yml never hands to the module would be silently ignored."""
    task = next(t for t in _configure_tasks() if t.get("loop") == "{{ %s }}" % listname)
    args = task["awx.awx." + LISTS[listname]]
    passed = {k for k, v in args.items() if isinstance(v, str) and re.search(r"\bitem\.%s\b" % re.escape(k), v)}
    for item in controller_config[listname]:
        dropped = set(item) - passed
        assert not dropped, "configure.yml drops %s of %r" % (sorted(dropped), item["name"])


def test_references_between_objects_resolve(controller_config):
    cfg = controller_config
    envs = {e["name"] for e in cfg["controller_execution_environments"]}
    projects = {p["name"] for p in cfg["controller_projects"]}
    templates = {t["name"] for t in cfg["controller_templates"]}
    workflows = {w["name"] for w in cfg["controller_workflows"]}
    for project in cfg["controller_projects"]:
        assert project["default_environment"] in envs
    for template in cfg["controller_templates"]:
        assert template["project"] in projects
        assert template["execution_environment"] in envs
    for workflow in cfg["controller_workflows"]:
        ids = {n["identifier"] for n in workflow["workflow_nodes"]}
        for node in workflow["workflow_nodes"]:
            assert node["unified_job_template"]["name"] in templates, node
            for kind, links in node.get("related", {}).items():
                assert {link["identifier"] for link in links} <= ids, (workflow["name"], kind)
    for schedule in cfg["controller_schedules"]:
        assert schedule["unified_job_template"] in templates | workflows


def test_one_template_per_playbook_and_each_playbook_exists(templates):
    wanted = {"playbooks/baseline.yml", "playbooks/switch_spec.yml", "playbooks/sweep.yml",
              "playbooks/rollback.yml", "playbooks/reclaim.yml", "playbooks/nightly.yml"}
    playbooks = [t["playbook"] for t in templates.values()]
    assert sorted(playbooks) == sorted(wanted)
    for playbook in playbooks:
        assert (REPO / playbook).is_file(), playbook


@pytest.mark.parametrize("playbook", ["playbooks/baseline.yml", "playbooks/switch_spec.yml",
                                      "playbooks/sweep.yml", "playbooks/rollback.yml",
                                      "playbooks/reclaim.yml", "playbooks/nightly.yml"])
def test_launched_playbooks_pass_syntax_check(playbook):
    proc = run_ansible_playbook(["--syntax-check", "-i", "localhost,", playbook])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sweep_candidates_left_to_the_inventory(templates):
    """Extra vars outrank inventory: a `sweep` in a template would hide the per-engine candidate lists
    of group_vars (vLLM and SGLang take different parameters), so no template sets one."""
    for template in templates.values():
        assert "sweep" not in template.get("extra_vars", {}), template["name"]
