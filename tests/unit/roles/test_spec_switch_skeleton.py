# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one skeleton under the lock (roles/spec_switch/tasks/under_lock.yml, issue 30 part 2).

Read from the role's own files: every experiment that holds the lock goes through it with its middle, nothing else
takes the lock but the two flows with an order of their own, and the skeleton's failure record is templated by
ansible-playbook as the role writes it (one line: a folded YAML scalar keeps the newline before a more-indented line).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmops.specdec.tests.unit.roles.test_spec_switch_acceptance import PLAYBOOK_BIN, REPO, TASKS, walk
from ansible_collections.llmops.specdec.tests.unit.roles.test_spec_switch_acceptance import task as named_task

# Entry file -> the middle it runs under the skeleton, and whether it may change the host.
ENTRIES = {"main.yml": ("switch.yml", True), "sweep.yml": ("sweep_run.yml", True),
           "nightly.yml": ("nightly_check.yml", False), "baseline_only.yml": ("baseline_measure.yml", False)}
# The flows that put the skeleton's steps together in their own order (docs/switch.md says why).
OWN_ORDER = {"under_lock.yml", "group.yml", "rollback_kept.yml"}


def load(name):
    with open(os.path.join(TASKS, name), encoding="utf-8") as f:
        return yaml.safe_load(f) or []


def includes(name, action):
    return [t for t in walk(load(name)) if "ansible.builtin." + action in t]


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_every_experiment_runs_its_middle_under_the_one_skeleton(entry):
    middle, changes = ENTRIES[entry]
    # Imported: its tasks are the entry's own in the job log, with no include line of their own.
    found = [t for t in includes(entry, "import_tasks") if t["ansible.builtin.import_tasks"] == "under_lock.yml"]
    assert len(found) == 1, entry
    args = found[0]["vars"]
    assert args["__spec_switch_middle"] == middle and os.path.isfile(os.path.join(TASKS, middle))
    assert args.get("__spec_switch_changes", True) is changes and args["__spec_switch_kind"]


def test_only_the_skeleton_and_the_flows_with_their_own_order_take_the_lock():
    takers = {name for name in os.listdir(TASKS) if name.endswith(".yml")
              and any(t["ansible.builtin.import_tasks"] == "lock.yml" for t in includes(name, "import_tasks"))}
    assert takers == OWN_ORDER
    for name in takers:  # and each releases it whatever happens
        assert any(t.get("always") and any("unlock.yml" in json.dumps(a) for a in t["always"]) for t in load(name)), name


def test_the_skeleton_orders_its_steps():
    top = load("under_lock.yml")
    assert top[0]["ansible.builtin.import_tasks"] == "lock.yml"
    body = top[1]
    inner = body["block"][0]
    steps = [t.get("ansible.builtin.import_tasks") or t.get("ansible.builtin.include_tasks") for t in inner["block"]]
    assert steps == ["snapshot.yml", "baseline.yml", "{{ __spec_switch_middle }}"]
    after = [t.get("ansible.builtin.include_tasks") for t in body["block"][1:]]
    assert after == ["guard_confirm.yml", "record.yml"]
    assert body["always"][0]["ansible.builtin.import_tasks"] == "unlock.yml"


CASES = [  # kind, installed -> the reason's start
    ("switch", True, "candidate failed in 'Wait': it crashed"),
    ("switch", False, "switch aborted before the service was touched in 'Wait': it crashed"),
    ("sweep", True, "sweep failed in 'Wait': it crashed"),
    ("tuning", False, "tuning aborted before the service was touched in 'Wait': it crashed"),
]
# A run that only measures fails as it failed, naming what and where.
MEASURING = [("nightly check", "nightly check failed in 'Wait': it crashed"),
             ("baseline measurement", "baseline measurement failed in 'Wait': it crashed")]
FAILED = {"ansible_failed_task": {"name": "Wait"}, "ansible_failed_result": {"msg": "it crashed"}}


def run_tasks(tmp_path, tasks, keep):
    """Run TASKS on localhost with the collection's config; returns the values of the facts named in KEEP."""
    out = tmp_path / "kept.json"
    tasks = tasks + [{"name": "write", "ansible.builtin.copy": {"dest": str(out), "mode": "0600", "content": "{{ [%s] | to_json }}" % ", ".join(
        keep)}}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                           str(tmp_path / "play.yml")],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_failure_record_is_one_line_for_every_kind(tmp_path):
    tasks = []
    for i, (kind, installed, _want) in enumerate(CASES):
        task = dict(named_task("under_lock.yml", "Record why the run failed"), name="case %d" % i)
        task["vars"] = dict(task["vars"], __spec_switch_kind=kind, __spec_switch_installed=installed, **FAILED)
        tasks += [task, {"name": "keep %d" % i, "ansible.builtin.set_fact": {"case_%d" % i: "{{ __spec_switch_verdict }}"}}]
    cases = run_tasks(tmp_path, tasks, ["case_%d" % i for i in range(len(CASES))])
    assert len(cases) == len(CASES)  # every case reached the task as the role writes it
    for got, (_kind, _installed, want) in zip(cases, CASES):
        assert got["reason"] == want and got["decision"] == "rollback" and got["speedup"] is None


def test_a_measuring_run_fails_naming_what_failed_and_where(tmp_path):
    tasks = []
    for i, (kind, _want) in enumerate(MEASURING):
        task = dict(named_task("under_lock.yml", "Fail as the measurement failed (nothing on the host was changed)"), name="case %d" % i)
        task.update(vars=dict(FAILED, __spec_switch_kind=kind, __spec_switch_changes=False), register="case_%d" % i, ignore_errors=True)
        tasks.append(task)
    cases = run_tasks(tmp_path, tasks, ["case_%d" % i for i in range(len(MEASURING))])
    assert len(cases) == len(MEASURING)  # every case reached the fail task, as the role writes it
    for got, (_kind, want) in zip(cases, MEASURING):
        assert got["failed"] and got["msg"] == want
