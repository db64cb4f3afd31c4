# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real tier's skeleton: a real engine on a mock GPU host, driven by the collection's playbooks.

Nothing here is specific to one engine: ``SPECDEC_REAL_ENGINE`` (default ``vllm``) names
``engines/<engine>.yml``, which says how to build the engine's venv and models, the host's inventory
variables, the switch requests of the tests and the metric names to read. The host is a mock GPU
host (real systemd in nspawn) that sees the venv and the models read-only; the service is deployed by
``spec_server`` with the unit as shipped, and every step runs ``ansible-playbook`` as an operator would.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest

from realhost import ROOT, down, up  # tests/real is on sys.path (rootdir conftest)

ENGINE = os.environ.get("SPECDEC_REAL_ENGINE", "vllm")
HOST = os.environ.get("SPECDEC_REAL_HOST", "real-" + ENGINE)
INDEX = os.environ.get("SPECDEC_REAL_INDEX", "160")
BUILD = os.path.join(ROOT, ".build", "real")


class Host:
    """The mock GPU host the real engine runs on: shell and HTTP on the host itself, over SSH."""

    def __init__(self, desc, cfg, inventory):
        self.name = desc["name"]
        self.address = desc["address"]
        self.key = desc["identity_file"]
        self.cfg = cfg
        self.inventory = inventory
        self.vars = cfg["vars"]
        self.unit = "%s-server.service" % self.vars["spec_server_engine"]
        self.port = int(self.vars.get("spec_server_port") or (8000 if self.vars["spec_server_engine"] == "vllm" else 30000))

    def sh(self, command, check=True, timeout=60):
        argv = ["ssh", "-i", self.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "root@" + self.address, command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode:
            raise AssertionError("on %s: %s -> rc %d\n%s%s" % (self.name, command, done.returncode, done.stdout,
                                                               done.stderr))
        return done.stdout

    def http(self, path, timeout=30):
        """GET http://127.0.0.1:PORT/PATH on the host: (status, body); status 0 when nothing answers."""
        code = ("import sys,urllib.request,urllib.error\n"
                "try:\n r=urllib.request.urlopen(sys.argv[1],timeout=%d); print(r.status); print(r.read().decode())\n"
                "except urllib.error.HTTPError as e: print(e.code); print(e.read().decode(errors='replace'))\n"
                "except Exception as e: print(0); print(e)\n" % timeout)
        out = self.sh("python3 -c %s %s" % (shlex.quote(code), shlex.quote("http://127.0.0.1:%d%s" % (self.port, path))),
                      timeout=timeout + 15)
        status, _sep, body = out.partition("\n")
        return int(status), body

    def greedy(self, prompts, max_tokens=32):
        """Each prompt's greedy completion (temperature 0) from the engine, as text."""
        code = ("import json,sys,urllib.request\n"
                "url,model,n=sys.argv[1],sys.argv[2],int(sys.argv[3])\n"
                "for p in json.loads(sys.stdin.read()):\n"
                " body=json.dumps({'model':model,'prompt':p,'max_tokens':n,'temperature':0}).encode()\n"
                " r=urllib.request.Request(url,data=body,headers={'Content-Type':'application/json'})\n"
                " print(json.dumps(json.load(urllib.request.urlopen(r,timeout=60))['choices'][0]['text']))\n")
        argv = ["ssh", "-i", self.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "root@" + self.address,
                "python3 -c %s http://127.0.0.1:%d/v1/completions %s %d" % (
                    shlex.quote(code), self.port, shlex.quote(self.vars["spec_server_served_model_name"]), max_tokens)]
        done = subprocess.run(argv, input=json.dumps(prompts), capture_output=True, text=True, timeout=300,
                              check=True)
        return [json.loads(line) for line in done.stdout.splitlines()]

    def metrics(self):
        """The engine's /metrics as {name: {labels-string: value}} (the Prometheus text format)."""
        status, body = self.http("/metrics")
        assert status == 200, body
        out = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"([^{\s]+)(\{[^}]*\})?\s+(\S+)", line)
            if m:
                out.setdefault(m.group(1), {})[m.group(2) or ""] = float(m.group(3))
        return out

    def show(self):
        out = self.sh("systemctl show %s -p ActiveState -p SubState -p MainPID -p NRestarts -p ControlGroup "
                      "-p ExecMainStartTimestampMonotonic" % self.unit)
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def argv(self, pid):
        out = self.sh("cat /proc/%d/cmdline | tr '\\0' '\\n'" % int(pid), check=False)
        return out.splitlines()

    def cgroup_pids(self, cgroup):
        out = self.sh("cat /sys/fs/cgroup/unified%s/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup%s/cgroup.procs"
                      % (cgroup, cgroup), check=False)
        return [int(p) for p in out.split()]

    def history(self):
        out = self.sh("cat /var/lib/llmops-specdec/history.jsonl 2>/dev/null || true")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def playbook(self, name, *extra, env=None, report=None, timeout=1500):
        """Run playbooks/NAME against this host as an operator would; return (rc, output)."""
        argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", self.inventory,
                os.path.join(ROOT, "playbooks", name)]
        for item in extra:
            argv += ["-e", item if isinstance(item, str) else json.dumps(item)]
        if report:
            argv += ["-e", "specdec_report_dir=%s" % report]
        # JSON results keep each message on one line, so the tests can search the output.
        run_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
                       ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"), **(env or {}))
        log = os.path.join(BUILD, "logs", "%s-%d.log" % (name.replace(".yml", ""), int(time.time() * 1000)))
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "w", encoding="utf-8") as f:
            done = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=run_env, timeout=timeout,
                                  check=False)
        with open(log, encoding="utf-8") as f:
            return done.returncode, f.read()


@pytest.fixture(scope="session")
def real_host():
    """A mock GPU host with the real engine's venv and models; the tests deploy and switch it."""
    desc, cfg, venv = up(ENGINE, HOST, INDEX, os.path.join(BUILD, "inventory"))
    host = Host(desc, cfg, os.path.join(BUILD, "inventory"))
    host.venv = venv
    try:
        yield host
    finally:
        if not os.environ.get("SPECDEC_REAL_KEEP"):
            down(HOST)
