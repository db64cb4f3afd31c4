# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit systemd loads and a snapshot a rollback can trust (systemctl faked, systemd-analyze real)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _unitfile

UNIT = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n"


def runner(props):
    """run_command: systemctl show answers ``props``; anything else runs for real (systemd-analyze)."""
    def run(argv):
        if argv[:2] == ["systemctl", "show"]:
            return 0, "".join("%s=%s\n" % kv for kv in props.items()), ""
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    return run


@pytest.fixture
def unit(tmp_path):
    path = tmp_path / "etc" / "vllm-server.service"
    path.parent.mkdir()
    path.write_text(UNIT)
    return path


def test_the_managed_unit_without_exec_start_drop_ins_is_fine(tmp_path, unit):
    drop = tmp_path / "10-nccl.conf"
    drop.write_text("[Service]\nEnvironment=NCCL_DEBUG=INFO\n")
    info = _unitfile.inspect(runner({"LoadState": "loaded", "FragmentPath": str(unit), "DropInPaths": str(drop),
                                     "ActiveState": "active"}), "vllm-server.service", str(unit))
    assert info["problem"] is None and info["drop_in_paths"] == [str(drop)] and info["exists"]


def test_a_unit_loaded_from_elsewhere_is_named(tmp_path, unit):
    info = _unitfile.inspect(runner({"LoadState": "loaded", "FragmentPath": "/lib/systemd/system/vllm-server.service"}),
                             "vllm-server.service", str(unit))
    assert "is loaded from /lib/systemd/system/vllm-server.service, not from %s" % unit in info["problem"]


def test_a_drop_in_that_sets_exec_start_is_named(tmp_path, unit):
    drop = tmp_path / "override.conf"
    drop.write_text("[Service]\nExecStart=\nExecStart=/opt/other/vllm serve m\n")
    info = _unitfile.inspect(runner({"LoadState": "loaded", "FragmentPath": str(unit), "DropInPaths": str(drop)}),
                             "vllm-server.service", str(unit))
    assert info["exec_start_drop_ins"] == [str(drop)] and "set ExecStart=" in info["problem"]


def test_no_unit_yet_is_no_problem(tmp_path):
    info = _unitfile.inspect(runner({"LoadState": "not-found", "FragmentPath": ""}), "vllm-server.service",
                             str(tmp_path / "vllm-server.service"))
    assert info["problem"] is None and not info["exists"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_snapshot_is_a_verified_private_copy(tmp_path, unit):
    dest = tmp_path / "snap.service"
    run = runner({})
    snap = _unitfile.snapshot(run, str(unit), str(dest))
    assert snap == {"path": str(dest), "sha256": _unitfile.sha256_file(str(unit)), "changed": True}
    assert dest.read_text() == UNIT and (os.stat(dest).st_mode & 0o777) == 0o600
    assert _unitfile.snapshot(run, str(unit), str(dest))["changed"] is False


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_a_unit_systemd_refuses_is_never_a_snapshot_to_switch_from(tmp_path, unit):
    unit.write_text("[Service]\nExecStart=relative/bin\n")
    with pytest.raises(_unitfile.UnitFileError, match="systemd-analyze verify refuses"):
        _unitfile.snapshot(runner({}), str(unit), str(tmp_path / "snap.service"))


def test_archive_keeps_the_newest_few_with_checksums(tmp_path, unit):
    kept = tmp_path / "kept"
    first = _unitfile.archive(str(unit), str(kept), "vllm-server.service", keep=2, now=1_000_000)
    assert first["changed"] and (os.stat(first["path"]).st_mode & 0o777) == 0o600
    again = _unitfile.archive(str(unit), str(kept), "vllm-server.service", keep=2, now=1_000_100)
    assert again["changed"] is False and again["path"] == first["path"]
    for i in range(3):
        unit.write_text(UNIT + "# %d\n" % i)
        last = _unitfile.archive(str(unit), str(kept), "vllm-server.service", keep=2, now=1_000_200 + i)
    assert len(last["pruned"]) == 1 and not (kept / last["pruned"][0]).exists()
    newest = _unitfile.newest_archived(str(kept))
    assert newest["sha256"] == _unitfile.sha256_file(str(unit)) == last["sha256"]
    assert len([n for n in os.listdir(kept) if n != "MANIFEST.json"]) == 2
    assert _unitfile.newest_archived(str(tmp_path / "none")) is None
