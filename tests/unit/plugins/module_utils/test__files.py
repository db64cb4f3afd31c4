# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_files: atomic writes that say whether the file changed, and appended logs."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _files


def test_write_if_changed_writes_once_and_leaves_an_identical_file_alone(tmp_path):
    p = str(tmp_path / "r.json")
    assert _files.write_if_changed(p, "a") is True
    before = os.stat(p).st_mtime_ns
    assert _files.write_if_changed(p, "a") is False
    assert _files.write_if_changed(p, b"a") is False
    assert os.stat(p).st_mtime_ns == before
    assert _files.write_if_changed(p, "b") is True
    assert open(p, encoding="utf-8").read() == "b"
    assert oct(os.stat(p).st_mode & 0o777) == "0o644"
    assert os.listdir(str(tmp_path)) == ["r.json"]


def test_write_if_changed_sets_the_mode_of_an_identical_file(tmp_path):
    p = tmp_path / "r.md"
    p.write_text("x")
    p.chmod(0o600)
    assert _files.write_if_changed(str(p), "x") is True
    assert oct(p.stat().st_mode & 0o777) == "0o644"
    assert _files.write_if_changed(str(p), "x", mode=0o640) is True
    assert _files.write_if_changed(str(p), "x", mode=0o640) is False


def test_write_if_changed_in_check_mode_writes_nothing_and_says_what_would_change(tmp_path):
    p = tmp_path / "u.service"
    assert _files.write_if_changed(str(p), "x", check_mode=True) is True
    assert not p.exists()
    p.write_text("x")
    p.chmod(0o600)
    assert _files.write_if_changed(str(p), "x", check_mode=True) is True  # the mode would change
    assert oct(p.stat().st_mode & 0o777) == "0o600"
    assert _files.write_if_changed(str(p), "y", mode=0o600, check_mode=True) is True
    assert _files.write_if_changed(str(p), "x", mode=0o600, check_mode=True) is False
    assert p.read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_write_if_changed_with_root_replaces_a_file_of_another_owner(tmp_path):
    p = tmp_path / "u.service"
    p.write_text("x")
    p.chmod(0o644)
    os.chown(str(p), 65534, 65534)
    assert _files.write_if_changed(str(p), "x") is False  # the owner is not asked about
    assert _files.write_if_changed(str(p), "x", root=True, check_mode=True) is True
    assert p.stat().st_uid == 65534
    inode = p.stat().st_ino
    assert _files.write_if_changed(str(p), "x", root=True) is True
    st = p.stat()
    # A new file of root's, not the old one chowned: a holder of the old inode cannot write the unit.
    assert (st.st_uid, st.st_gid) == (0, 0) and st.st_ino != inode and p.read_text() == "x"
    assert _files.write_if_changed(str(p), "x", root=True) is False


def test_update_is_write_if_changed_that_also_says_what_the_file_held(tmp_path):
    p = tmp_path / "u.service"
    assert _files.update(str(p), "x", check_mode=True) == (True, None) and not p.exists()
    assert _files.update(str(p), "x") == (True, None) and p.read_text() == "x"
    assert _files.update(str(p), "x") == (False, "x")
    p.write_bytes(b"caf\xc3\xa9 \xff")
    assert _files.update(str(p), "y", check_mode=True) == (True, "caf\u00e9 \ufffd") and p.read_bytes() == b"caf\xc3\xa9 \xff"
    assert _files.update(str(p), "y") == (True, "caf\u00e9 \ufffd") and p.read_text() == "y"
    p.chmod(0o600)
    assert _files.update(str(p), "y") == (True, "y") and oct(p.stat().st_mode & 0o777) == "0o644"
    assert _files.update(str(tmp_path), "z", check_mode=True) == (True, None)  # a directory holds no text


def test_read_text_of_a_file_a_missing_one_and_a_directory(tmp_path):
    (tmp_path / "a").write_bytes(b"caf\xc3\xa9 \xff")
    assert _files.read_text(str(tmp_path / "a")) == "caf\u00e9 \ufffd"
    assert _files.read_text(str(tmp_path / "missing")) is None
    assert _files.read_text(str(tmp_path)) is None


def test_write_if_changed_keeps_the_old_file_and_no_temporary_when_writing_fails(tmp_path, monkeypatch):
    p = tmp_path / "bench.json"
    p.write_text("old")

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="No space left"):
        _files.write_if_changed(str(p), "new")
    assert p.read_text() == "old"
    assert os.listdir(str(tmp_path)) == ["bench.json"]


def test_write_if_changed_replaces_a_link_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    assert _files.write_if_changed(str(link), "new") is True
    assert target.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"


def test_write_if_changed_refuses_a_missing_directory(tmp_path):
    with pytest.raises(OSError):
        _files.write_if_changed(str(tmp_path / "no" / "such.json"), "x")


def test_append_lines_adds_one_line_each_and_nothing_for_none(tmp_path):
    h = str(tmp_path / "h.jsonl")
    assert _files.append_lines(h, []) is False
    assert not os.path.exists(h)
    assert _files.append_lines(h, [json.dumps({"host": "gpu1"}), json.dumps({"host": "gpu2"}) + "\n"]) is True
    assert _files.append_lines(h, [json.dumps({"host": "gpu3"})]) is True
    assert [json.loads(line)["host"] for line in open(h, encoding="utf-8").read().splitlines()] == ["gpu1", "gpu2", "gpu3"]
    assert oct(os.stat(h).st_mode & 0o777) == "0o644"


def test_write_atomic_writes_every_time_with_its_mode(tmp_path):
    p = tmp_path / "state.json"
    _files.write_atomic(str(p), b"{}", mode=0o600)
    before = p.stat().st_ino
    _files.write_atomic(str(p), "{}", mode=0o600)
    assert p.read_text() == "{}" and p.stat().st_ino != before
    assert oct(p.stat().st_mode & 0o777) == "0o600"
