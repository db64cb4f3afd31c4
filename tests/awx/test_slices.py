# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nightly job in slices (workflow "nightly in slices"), run through ansible-runner as AWX runs each node.

Each node's job gets the whole inventory and its node's extra_data (`specdec_slice: K/N`); playbooks/slice.yml
keeps that slice's services. What a job touched is read from its events, as AWX shows them: the hosts with a task
in a play after the slice play. The hosts do not answer (a closed port): what is checked is which hosts each
slice's job went to, not a switch; the switch of a group is molecule/group's.
"""
from __future__ import annotations

import concurrent.futures

import yaml

import controller_rules as awx
from jobs import run_job

SLICE_PLAY = "Keep this slice's services (specdec_slice, serving groups whole)"
GROUPS = {"kimi_a": ["kimi-a1", "kimi-a2"], "ds_b": ["ds-b1", "ds-b2", "ds-b3", "ds-b4"]}
SINGLES = ["gpu-c%02d" % i for i in range(1, 6)]


def inventory(path):
    """An AWX-style inventory: the inference group, two serving groups as inventory groups, hosts alone."""
    unreachable = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "root"}
    children = {name: {"hosts": {n: {} for n in nodes}, "vars": {"spec_server_nodes": nodes}}
                for name, nodes in GROUPS.items()}
    children["alone"] = {"hosts": {h: {} for h in SINGLES}}
    inv = {"inference": {"children": children,
                         "vars": dict(unreachable, spec_server_engine="vllm", spec_server_model="/models/m")}}
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def touched(job):
    """Hosts the job ran a task on after the slice play, and the slice line it said."""
    hosts = {e["event_data"]["host"] for e in job.events
             if e.get("event") == "runner_on_start" and e["event_data"].get("play") != SLICE_PLAY}
    said = [e["event_data"]["res"]["msg"] for e in job.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == "Say the slice"]
    return hosts, said


def test_the_nightly_slices_keep_every_serving_group_whole(controller_config, templates, tmp_path):
    (workflow,) = [w for w in controller_config["controller_workflows"] if w["name"].endswith("nightly in slices")]
    nodes = workflow["workflow_nodes"]
    count = len(nodes)
    assert sorted(n["extra_data"]["specdec_slice"] for n in nodes) == ["%d/%d" % (k, count) for k in range(1, count + 1)]
    inv = inventory(tmp_path / "hosts.yml")
    fleet = [h for nodes_ in GROUPS.values() for h in nodes_] + SINGLES

    def run(node):
        template = templates[node["unified_job_template"]["name"]]
        assert template["allow_simultaneous"], "the slices run at once"
        extra = awx.launch_extra_vars(template, launch_vars=node["extra_data"], from_ui=False)
        return run_job(template, extra, inv, tmp_path / node["identifier"], timeout=300)

    # At once, as AWX runs a workflow's sibling nodes.
    with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
        jobs = list(pool.map(run, nodes))
    seen = {}
    for node, job in zip(nodes, jobs):
        hosts, said = touched(job)
        assert said, job.stdout[-3000:]
        seen[node["extra_data"]["specdec_slice"]] = hosts
        print("%s: %s | %s" % (node["extra_data"]["specdec_slice"], sorted(hosts), said[0]))
    # Every host in exactly one slice's job, every group in one job whole.
    assert sorted(h for hosts in seen.values() for h in hosts) == sorted(fleet), seen
    for name, group in GROUPS.items():
        holders = [k for k, hosts in seen.items() if set(group) & hosts]
        assert len(holders) == 1 and set(group) <= seen[holders[0]], (name, seen)
    # AWX's own job slicing would have split both groups (hosts by name, every N-th): the reason for this design.
    by_name = sorted(fleet)
    awx_split = [name for name, group in GROUPS.items()
                 if len({k for k in range(count) if set(group) & set(by_name[k::count])}) > 1]
    assert awx_split == list(GROUPS)
