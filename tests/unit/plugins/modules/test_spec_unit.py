# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_unit main(): the unit systemd loads, a verified snapshot, the archive of kept configurations."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.modules import spec_unit
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import FailJson, run_module

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
UNIT = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n"


@pytest.fixture
def host(tmp_path, monkeypatch):
    unit = tmp_path / "etc" / "vllm-server.service"
    unit.parent.mkdir()
    unit.write_text(UNIT)
    props = {"LoadState": "loaded", "FragmentPath": str(unit), "DropInPaths": "", "ActiveState": "active"}

    def run_command(self, argv, **_kw):
        if argv[:2] == ["systemctl", "show"]:
            return 0, "".join("%s=%s\n" % kv for kv in props.items()), ""
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    return tmp_path, unit, props


def args(tmp_path, unit, **more):
    return dict({"name": "vllm-server.service", "path": str(unit)}, **more)


def test_snapshot_then_unchanged_then_refused_for_an_unfinished_run(host):
    tmp_path, unit, _props = host
    snap = str(tmp_path / "snapshot.service")
    check = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap, _ansible_check_mode=True))
    assert check["changed"] and not os.path.exists(snap)
    first = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap))
    assert first["changed"] and first["snapshot"]["sha256"] == first["sha256"]
    assert run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap))["changed"] is False
    (tmp_path / "guard.json").write_text("{}")
    refused = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap, unfinished=str(tmp_path / "guard.json")),
                         FailJson)
    assert "an unfinished switch still owns" in refused["msg"]


def test_a_unit_from_elsewhere_or_an_exec_start_drop_in_is_refused(host):
    tmp_path, unit, props = host
    props["FragmentPath"] = "/lib/systemd/system/vllm-server.service"
    assert "is loaded from /lib/systemd/system" in run_module(spec_unit.main, args(tmp_path, unit), FailJson)["msg"]
    drop = tmp_path / "override.conf"
    drop.write_text("[Service]\nExecStart=\nExecStart=/bin/other\n")
    props.update(FragmentPath=str(unit), DropInPaths=str(drop))
    assert "set ExecStart=" in run_module(spec_unit.main, args(tmp_path, unit), FailJson)["msg"]


def test_archive_and_the_check_before_a_rollback(host):
    tmp_path, unit, _props = host
    kept = str(tmp_path / "kept")
    previous = tmp_path / "previous.service"
    previous.write_text(UNIT)
    done = run_module(spec_unit.main, args(tmp_path, unit, archive={"src": str(previous), "dir": kept, "keep": 3}))
    assert done["changed"] and done["archived"]["sha256"] == done["sha256"]
    ok = run_module(spec_unit.main, args(tmp_path, unit, expect_archived={"path": str(previous), "dir": kept}))
    assert ok["changed"] is False
    previous.write_text(UNIT + "ExecStartPre=/bin/sh -c 'tampered'\n")
    refused = run_module(spec_unit.main, args(tmp_path, unit, expect_archived={"path": str(previous), "dir": kept}),
                         FailJson)
    assert "but the newest kept configuration" in refused["msg"] and "nothing was changed" in refused["msg"]
    assert run_module(spec_unit.main, args(tmp_path, unit, archive={"src": str(previous), "dir": kept, "keep": 0}),
                      FailJson)["msg"] == "archive.keep must be at least 1"
