# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_switch's acceptance watch tasks, run by ansible-playbook on the controller (no host touched).

The tasks are taken by name from the role's own files (record.yml's switch_record stores the kept acceptance,
nightly_check.yml reads it back, nightly.yml compares tonight's with it and writes the textfile), so their Jinja meets Ansible's templating (types,
from_json, the file written and read back) as it does on a host; molecule/verdict/plays/acceptance_drop.yml
runs them on a mock vLLM host with a real drop.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.test__watch import bench, level

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
TASKS = os.path.join(REPO, "roles", "spec_switch", "tasks")
UNIT_TEXT = "[Service]\nExecStart=/usr/bin/true\n"
UNIT = hashlib.sha256(UNIT_TEXT.encode()).hexdigest()  # the kept unit's checksum, as switch_record reads it


def walk(tasks):
    """Every task, blocks opened at any depth (block, rescue, always)."""
    for t in tasks:
        yield t
        for key in ("block", "rescue", "always"):
            yield from walk(t.get(key) or [])


def _tasks(path):
    with open(path, encoding="utf-8") as f:
        return list(walk(yaml.safe_load(f) or []))


def task(path, name):
    found = [t for t in _tasks(os.path.join(TASKS, path)) if t.get("name") == name]
    assert len(found) == 1, "%s: no single task named %r" % (path, name)
    return found[0]


def record_key(key):
    """One key of the record's set_fact in record.yml (the expression as the role writes it)."""
    return task("record.yml", "Put the outcome in one record")["ansible.builtin.set_fact"]["spec_switch_record"][key]


def nightly_key(key):
    return task("nightly.yml", "Put the check in one record")["ansible.builtin.set_fact"]["spec_switch_nightly_record"][key]


def build(tmp_path):
    kept_round = bench(level(1, 3000, [0.6, 0.45]), level(8, 3000, [0.6, 0.45]))
    hostvars = {
        # h1: a candidate kept, tonight its acceptance dropped at position 1
        "h1": {"keep": True, "__spec_switch_result": {"bench": [kept_round]},
               "__spec_switch_baseline": {"bench": bench(level(1, 3000, [0.6, 0.3]), level(8, 3000, [0.6, 0.3]))}},
        # h2: kept, tonight the same acceptance
        "h2": {"keep": True, "__spec_switch_result": {"bench": [kept_round]},
               "__spec_switch_baseline": {"bench": bench(level(1, 3000, [0.6, 0.45]), level(8, 3000, [0.61, 0.44]))}},
        # h3: nothing ever kept (a failed candidate has no result)
        "h3": {"keep": False, "__spec_switch_result": None,
               "__spec_switch_baseline": {"bench": bench(level(1, 3000, [0.6, 0.3]))}},
    }
    common = {"ansible_connection": "local", "__spec_switch_baseline_key": "vllm__m__reasoning", "spec_switch_label": "eagle3 k=2",
              "__spec_switch_spec": {"method": "eagle3", "num_speculative_tokens": 2}, "spec_switch_suite": "reasoning",
              "spec_server_unit": "vllm-server.service"}
    # The tasks run outside their role: its vars (vars/main.yml, the lock's predicate) come in as host vars.
    common.update(yaml.safe_load(open(os.path.join(REPO, "roles", "spec_switch", "vars", "main.yml"), encoding="utf-8")))
    for host, values in hostvars.items():
        values.update(common, spec_switch_state_dir=str(tmp_path / host / "state"), spec_switch_textfile_dir=str(tmp_path / host / "prom"),
                      __spec_switch_baseline_settings={"host": host, "unit_sha256": UNIT},
                      spec_server_unit_path=str(tmp_path / host / "vllm-server.service"), __spec_switch_previous_exists=False,
                      spec_switch_kept_history=5)
        (tmp_path / host / "prom").mkdir(parents=True)
        (tmp_path / host / "state").mkdir()
        (tmp_path / host / "vllm-server.service").write_text(UNIT_TEXT)
    inventory = {"all": {"hosts": hostvars}}
    setup = {"name": "Stand in for the switch's record", "ansible.builtin.set_fact": {"spec_switch_record": {
        "outcome": "{{ 'kept' if keep else 'rolled_back' }}", "at": "2026-11-30T02:00:00Z", "acceptance": record_key("acceptance")}}}
    keep = [task("record.yml", "Write the record on the host (history, textfile, and the kept candidate as the baseline)")]
    nightly = [task("nightly_check.yml", "Read the acceptance stored when the running configuration was kept"),
               task("nightly.yml", "Compare tonight's acceptance with the one stored when the configuration was kept"),
               {"name": "Stand in for the nightly record", "ansible.builtin.set_fact": {"spec_switch_nightly_record": {
                   "acceptance_watch": nightly_key("acceptance_watch"), "acceptance_dropped": nightly_key("acceptance_dropped")}}},
               task("nightly.yml", "Look for node_exporter's textfile collector directory"),
               task("nightly.yml", "Export the acceptance watch for node_exporter's textfile collector")]
    out = {"name": "Write what the plays left", "ansible.builtin.copy": {
        "dest": str(tmp_path) + "/{{ inventory_hostname }}/out.json", "mode": "0644",
        "content": "{{ {'record': spec_switch_record, 'nightly': spec_switch_nightly_record} | to_json }}"}}
    play = [{"name": "Keep, then watch", "hosts": "all", "gather_facts": False,
             "tasks": [setup] + keep + nightly + [out]}]
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))


@pytest.fixture(scope="module", name="run")
def run_fixture(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("watch")
    build(tmp_path)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([PLAYBOOK_BIN, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", "ansible_python_interpreter=%s" % sys.executable],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = {}
    for host in ("h1", "h2", "h3"):
        results[host] = json.loads((tmp_path / host / "out.json").read_text())
        results[host]["prom"] = (tmp_path / host / "prom" / "llmops_specdec_acceptance_reasoning.prom").read_text()
        stored = tmp_path / host / "state" / "acceptance" / "vllm__m__reasoning.json"
        results[host]["stored"] = json.loads(stored.read_text()) if stored.exists() else None
    return results


def test_the_kept_acceptance_is_stored_with_its_counts_and_unit(run):
    stored = run["h1"]["stored"]
    assert stored["unit_sha256"] == UNIT and stored["label"] == "eagle3 k=2" and stored["kept_at"] == "2026-11-30T02:00:00Z"
    assert stored["acceptance"]["accepted_per_position"] == [3600, 2700]
    assert stored["acceptance"]["drafts"] == 6000
    assert run["h1"]["record"]["acceptance"] == stored["acceptance"]
    assert run["h3"]["stored"] is None and run["h3"]["record"]["acceptance"] is None


def test_the_nightly_flags_the_drop_in_the_record_and_the_textfile(run):
    watch = run["h1"]["nightly"]["acceptance_watch"]
    assert run["h1"]["nightly"]["acceptance_dropped"] is True
    assert watch["line"].startswith("acceptance dropped at position 1: 0.45 -> 0.30 (drafted 6000 kept, 6000 now)")
    prom = run["h1"]["prom"]
    assert 'llmops_specdec_acceptance_drop{host="h1",suite="reasoning",unit="vllm-server.service",position="1"} 1' in prom
    assert 'llmops_specdec_acceptance_dropped{host="h1",suite="reasoning",unit="vllm-server.service"} 1' in prom
    assert 'llmops_specdec_acceptance_rate{host="h1",suite="reasoning",unit="vllm-server.service",position="1",when="kept"} 0.45' in prom


def test_the_same_acceptance_or_nothing_kept_is_not_flagged(run):
    assert run["h2"]["nightly"]["acceptance_dropped"] is False
    assert run["h2"]["nightly"]["acceptance_watch"]["judged"] is True
    assert 'llmops_specdec_acceptance_dropped{host="h2",suite="reasoning",unit="vllm-server.service"} 0' in run["h2"]["prom"]
    watch = run["h3"]["nightly"]["acceptance_watch"]
    assert run["h3"]["nightly"]["acceptance_dropped"] is False and watch["judged"] is False
    assert watch["reason"] == "no acceptance was stored when the configuration was kept"
    assert 'llmops_specdec_acceptance_judged{host="h3",suite="reasoning",unit="vllm-server.service"} 0' in run["h3"]["prom"]
