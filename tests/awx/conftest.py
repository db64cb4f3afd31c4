# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the AWX tests: the awx tool venv, the resolved controller configuration, module docs."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
AWX_VENV = REPO / ".build" / "venv-awx"
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def awx_venv():
    """.build/venv-awx, built by awx/setup-venv when missing (so CI runs these tests, never skips)."""
    subprocess.run([str(REPO / "awx" / "setup-venv")], check=True, cwd=REPO, timeout=900,
                   stdout=subprocess.DEVNULL)
    return AWX_VENV


@pytest.fixture(scope="session")
def awx_collection(awx_venv):
    out = subprocess.run([str(awx_venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip()) / "ansible_collections" / "awx" / "awx"


def _env():
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    return env


@pytest.fixture(scope="session")
def controller_config(awx_venv, tmp_path_factory):
    """awx/controller/*.yml as Ansible resolves them (configure.yml's offline dump)."""
    dump = tmp_path_factory.mktemp("awx") / "controller.json"
    proc = subprocess.run(
        [str(awx_venv / "bin" / "ansible-playbook"), "awx/configure.yml", "-e", "specdec_awx_dump=%s" % dump],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(dump.read_text())


@pytest.fixture(scope="session")
def templates(controller_config):
    return {t["name"]: t for t in controller_config["controller_templates"]}


def template_for(templates, playbook):
    return next(t for t in templates.values() if t["playbook"] == playbook)


@pytest.fixture(scope="session")
def module_docs(awx_collection):
    """awx.awx module name -> its DOCUMENTATION options (the module's interface as documented)."""
    docs = {}
    for path in (awx_collection / "plugins" / "modules").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION":
                docs[path.stem] = yaml.safe_load(node.value.value)["options"]
    return docs


def run_ansible_playbook(args, venv=None, timeout=300):
    binary = (venv / "bin" / "ansible-playbook") if venv else (REPO / ".venv" / "bin" / "ansible-playbook")
    return subprocess.run([str(binary)] + list(args), cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
