# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a job template's playbook the way AWX does: through ansible-runner, with the extra vars a
launch sends, and read the job's status and set_stats artifacts back from the runner's artifacts dir.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import ansible_runner
import yaml

from conftest import REPO

HOST_TOOLS = REPO / "tests" / "mockgpu" / "host"


class Job:
    """A finished job as AWX records it: status, rc, stdout and the artifacts of set_stats."""

    def __init__(self, artifact_dir):
        self.dir = Path(artifact_dir)
        self.status = (self.dir / "status").read_text().strip()
        self.rc = int((self.dir / "rc").read_text().strip())
        self.stdout = (self.dir / "stdout").read_text(errors="replace")
        events = [json.loads(p.read_text()) for p in sorted((self.dir / "job_events").glob("*.json"))]
        stats = [e for e in events if e.get("event") == "playbook_on_stats"]
        assert len(stats) == 1, "no playbook_on_stats event: %s" % self.stdout[-3000:]
        # What AWX stores as the job's artifacts (and hands to later workflow nodes).
        self.artifacts = stats[0]["event_data"].get("artifact_data", {})
        self.events = events

    def failures(self):
        """The runner's failed-task events: task name and message (what AWX shows in red)."""
        return ["%s: %s" % (e["event_data"].get("task"), e["event_data"].get("res", {}).get("msg"))
                for e in self.events if e.get("event") in ("runner_on_failed", "runner_on_unreachable")
                and not e["event_data"].get("ignore_errors")]

    def __repr__(self):
        return "Job(%s, rc=%s) failures=%s" % (self.status, self.rc, self.failures())


def run_job(template, extra_vars, inventory, private_data_dir, timeout=900):
    """ansible-runner with the template's playbook from the project checkout, as AWX's worker runs it."""
    private_data_dir = Path(private_data_dir)
    private_data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": "%s:%s" % (REPO / ".venv" / "bin", os.environ.get("PATH", "")),
        "ANSIBLE_FORCE_COLOR": "0",
    }
    result = ansible_runner.run(
        private_data_dir=str(private_data_dir), project_dir=str(REPO), playbook=template["playbook"],
        inventory=str(inventory), extravars=extra_vars, envvars=env, quiet=True, timeout=timeout,
        ident="job")
    return Job(Path(result.config.artifact_dir))


class MockFleet:
    """Mock GPU hosts booted with tests/mockgpu/host/up, as an AWX inventory directory."""

    def __init__(self, workdir, hosts, group_vars):
        self.workdir = Path(workdir)
        self.hosts = hosts  # name -> (index, host vars)
        self.inventory = self.workdir / "inventory"
        self.group_vars = group_vars
        self.addresses = {}  # name -> address, as `up` reports it (its subnet depends on the checkout's slot)

    def up(self):
        inv = {"inference": {"children": {"mockgpu": {"hosts": {}}}, "vars": self.group_vars}}
        for name, (index, host_vars) in self.hosts.items():
            out = subprocess.run([str(HOST_TOOLS / "up"), name, str(index), "--gpus", "2"], check=True,
                                 capture_output=True, text=True, timeout=300)
            info = json.loads(out.stdout.splitlines()[-1])
            self.addresses[name] = info["address"]
            inv["inference"]["children"]["mockgpu"]["hosts"][name] = dict(
                host_vars, ansible_host=info["address"], ansible_ssh_private_key_file=info["identity_file"])
        (self.inventory / "group_vars").mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "inventory" / "mock" / "group_vars" / "mockgpu.yml", self.inventory / "group_vars")
        (self.inventory / "hosts.yml").write_text(yaml.safe_dump(inv, sort_keys=False))

    def down(self):
        for name in self.hosts:
            subprocess.run([str(HOST_TOOLS / "down"), name], capture_output=True, timeout=120, check=False)

    def set_host_vars(self, name, **host_vars):
        """Per-host inventory variables (AWX: host variables), replacing earlier ones."""
        (self.inventory / "host_vars").mkdir(exist_ok=True)
        (self.inventory / "host_vars" / ("%s.yml" % name)).write_text(yaml.safe_dump(host_vars))

    def playbook(self, playbook, *args, timeout=600):
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
        return subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(self.inventory), playbook]
                              + list(args), cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)

    def shell(self, name, *argv, check=True):
        """A command on the mock host over SSH (root), e.g. to write an engine fault."""
        key = REPO / ".build" / "ssh" / "id_ed25519"
        return subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                               "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                               "root@%s" % self.addresses[name], shlex.join(argv)],
                              check=check, capture_output=True, text=True, timeout=60)
