# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment definition and the AWX project's collection requirements."""
from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from conftest import REPO

EE = REPO / "awx" / "execution-environment.yml"


def _fqcn_collections():
    """Collections the shipped playbooks and roles call (namespace.name of every FQCN module/role)."""
    found = set()
    for path in list((REPO / "playbooks").rglob("*.yml")) + list((REPO / "roles").rglob("*.yml")):
        for match in re.finditer(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b", path.read_text()):
            found.add("%s.%s" % match.groups())
    return {c for c in found if c.split(".")[0] in _NAMESPACES}


# Namespaces of collections (not Jinja attribute chains like spec_switch_record.spec.method).
_NAMESPACES = {"ansible", "llmops", "community", "awx", "containers", "kubernetes"}


@pytest.fixture(scope="module")
def context(awx_venv, tmp_path_factory):
    out = tmp_path_factory.mktemp("ee")
    proc = subprocess.run([str(awx_venv / "bin" / "ansible-builder"), "create", "-f", str(EE), "-c", str(out),
                           "--output-filename", "Containerfile"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_builder_renders_a_build_context(context):
    containerfile = (context / "Containerfile").read_text()
    assert "quay.io/centos/centos:stream9" in containerfile
    assert "/usr/bin/python3.11" in containerfile
    assert "ansible-core==2.19.14" in containerfile and "ansible-runner==2.4.3" in containerfile
    for name in ("requirements.yml", "requirements.txt", "bindep.txt"):
        assert (context / "_build" / name).is_file(), name


def test_ee_python_pins_match_the_repository():
    """Controller-side packages are pinned as in requirements.txt, so the EE runs what CI tested."""
    repo_pins = dict(line.split("==") for line in (REPO / "requirements.txt").read_text().splitlines()
                     if "==" in line and not line.startswith("#"))
    ee = yaml.safe_load(EE.read_text())["dependencies"]
    assert ee["ansible_core"]["package_pip"] == "ansible-core==" + repo_pins["ansible-core"]
    assert ee["ansible_runner"]["package_pip"] == "ansible-runner==" + repo_pins["ansible-runner"]
    for line in (REPO / "awx" / ee["python"]).read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert repo_pins[name] == version, line


@pytest.mark.parametrize("requirements", ["collections/requirements.yml", "awx/ee/requirements.yml"])
def test_requirements_cover_every_collection_the_playbooks_use(requirements):
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    listed = {c["name"] for c in yaml.safe_load((REPO / requirements).read_text())["collections"]}
    used = _fqcn_collections() - {"ansible.builtin"}
    assert "%s.%s" % (galaxy["namespace"], galaxy["name"]) in used
    assert used <= listed, sorted(used - listed)


def test_collection_does_not_depend_on_awx():
    """The controller configuration stays out of the collection's runtime: nothing outside awx/ and
    tests/awx uses awx.awx, and galaxy.yml does not depend on it."""
    assert "awx.awx" not in (yaml.safe_load((REPO / "galaxy.yml").read_text()).get("dependencies") or {})
    for top in ("plugins", "roles", "playbooks"):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".yml", ".j2"):
                assert "awx.awx" not in path.read_text(), path
