# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_* filters as the playbooks call them: playbooks/tasks/capacity_guard.yml and
playbooks/fleet_outcome.yml run by a real ansible-playbook on four local hosts whose services are not
there (every probe finds its engine down), so the guard's YAML, Ansible's hostvars and the filters
meet without a mock host. molecule/fleet runs the same files on mock GPU hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.filter.fleet import FilterModule

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

INVENTORY = """
[inference]
h1
h2
h3 specdec_in_service=false
h4 spec_server_engine=sglang
[inference:vars]
ansible_connection=local
spec_server_model=/models/m
spec_server_unit=specdec-test-absent.service
spec_server_host=127.0.0.1
spec_server_port=9
"""

PLAYBOOK = """
- name: Rollout as switch_spec.yml does, with a stand-in for the switch
  hosts: inference
  gather_facts: false
  serial: "{{ specdec_serial | default('100%') }}"
  pre_tasks:
    - name: Guard
      ansible.builtin.import_tasks: REPO/playbooks/tasks/capacity_guard.yml
  tasks:
    - name: Record a verdict
      ansible.builtin.set_fact:
        spec_switch_record: {host: "{{ inventory_hostname }}", outcome: kept, label: ngram, suite: all, reason: faster}

- name: Outcome
  ansible.builtin.import_playbook: REPO/playbooks/fleet_outcome.yml
  vars:
    specdec_hosts: inference
"""


def test_filter_names():
    assert sorted(FilterModule().filters()) == ["fleet_guard", "fleet_guard_plan", "fleet_outcome", "fleet_slice"]


def run(tmp_path, *extra):
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK.replace("REPO", REPO))
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "play.yml"), "-e", "ansible_python_interpreter=%s" % sys.executable] + list(extra),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module", name="runs")
def runs_fixture(tmp_path_factory):
    cases = {"skip": ["-e", "specdec_serial=2"], "refuse": ["-e", json.dumps({"specdec_serial": 2, "specdec_max_out_of_service": 1})], "serial": []}
    out = {}
    for name, extra in cases.items():
        path = tmp_path_factory.mktemp(name)
        if name == "serial":
            # Inventory never reaches the play header: one batch of four, while the tasks see 1.
            (path / "group_vars").mkdir()
            (path / "group_vars" / "inference.yml").write_text("specdec_serial: 1\n")
        out[name] = run(path, *extra)
    return out


def recap(out, host):
    return out.split("PLAY RECAP")[1].split(host + " ")[1].split("\n")[0]


def test_hosts_down_are_skipped_and_failed_at_the_end_except_drained(runs):
    rc, out = runs["skip"]
    assert rc != 0, out
    assert "batch h1,h2: 0 to switch, 4 out of service (h1, h2, h3, h4), 4 out at once of 4 (limit 4), 0 of 0 tried so far failed" in out
    assert "batch h3,h4: 0 to switch, 4 out of service (h1, h2, h3, h4), 4 out at once of 4 (limit 4), 0 of 0 tried so far failed" in out
    for host in ("h1", "h2", "h4"):
        assert "%s: SKIPPED - out of service before its batch: systemctl show specdec-test-absent.service" % host in out
    assert "h3: SKIPPED - out of service before its batch: drained in inventory (specdec_in_service: false)" in out
    assert "TASK [Record a verdict]" not in out
    # Drained is what the operator asked; the other three fail.
    assert [("failed=1" in recap(out, h)) for h in ("h1", "h2", "h3", "h4")] == [True, True, False, True]


def test_a_refused_batch_ends_the_play_and_names_every_host(runs):
    rc, out = runs["refuse"]
    assert rc != 0, out
    assert (
        "capacity guard: switching no host now would leave 4 of 4 hosts out of service, more than "
        "specdec_max_out_of_service=1 (1 hosts); out of service: h1: systemctl show"
    ) in out
    assert "h1: SKIPPED - out of service before its batch: systemctl show" in out
    assert "h3: NOT REACHED - the rollout stopped before its batch, and it was out of service: drained in inventory" in out
    assert "h4: NOT REACHED - the rollout stopped before its batch, and it was out of service: systemctl show" in out
    assert "batch h3,h4" not in out
    assert all("failed=1" in recap(out, h) for h in ("h1", "h2", "h3", "h4"))


def test_serial_in_inventory_stops_the_first_batch_before_probing(runs):
    rc, out = runs["serial"]
    assert rc != 0, out
    assert "the first batch has 4 host(s) but specdec_serial=1 asks for 1" in out
    assert "(item=h1)" not in out


def test_fleet_slice_refuses_a_slice_it_cannot_read():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="fleet_slice: specdec_slice must read K/N"):
        FilterModule().filters()["fleet_slice"]({"h": {}}, ["h"], "3")
