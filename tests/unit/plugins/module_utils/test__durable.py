# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes that must survive a power cut (issue 31 item 13): the guard's state, unit files, baselines, the
kept archive and the history. Every one is write temp, fsync it, rename over the path, fsync the directory;
an append is one write then fsync; a removal of the guard's state is followed by an fsync of its directory.

The mock host (tests/mockgpu/host/crash) kills the whole host but cannot drop the page cache, so the order of
the system calls is checked here: os.fsync, os.replace, os.rename and os.unlink are wrapped and traced, and
every file that changed under the state directory must have come from a traced rename (a new inode) or, for
the history, an fsync'd append.
"""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _guard_state, _lock, _record, _unitfile


class Trace:
    """Events in order: ("fsync", path, size), ("replace", src, dst, size), ("unlink", path)."""

    def __init__(self, monkeypatch):
        self.events = []
        real_fsync, real_replace, real_rename, real_unlink = os.fsync, os.replace, os.rename, os.unlink

        def fsync(fd):
            path = os.readlink("/proc/self/fd/%d" % fd)
            st = os.fstat(fd)
            self.events.append(("fsync", path, st.st_size if not os.path.isdir(path) else None))
            return real_fsync(fd)

        def renamer(real):
            def rename(src, dst, *a, **kw):
                out = real(src, dst, *a, **kw)
                size = os.path.getsize(dst) if os.path.isfile(dst) else None
                self.events.append(("replace", os.path.abspath(src), os.path.abspath(dst), size))
                return out
            return rename

        def unlink(path, *a, **kw):
            self.events.append(("unlink", os.path.abspath(path)))
            return real_unlink(path, *a, **kw)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", renamer(real_replace))
        monkeypatch.setattr(os, "rename", renamer(real_rename))
        monkeypatch.setattr(os, "unlink", unlink)

    def check_replaces(self):
        """Every rename's source was fsynced at its final size before, and the target's directory after."""
        checked = 0
        for i, event in enumerate(self.events):
            if event[0] != "replace":
                continue
            src, dst = event[1], event[2]
            before = [e for e in self.events[:i] if e[0] == "fsync" and e[1] == src]
            assert before, "%s renamed over %s without an fsync of it first: %s" % (src, dst, self.events)
            assert before[-1][2] == event[3], "%s was fsynced at %s bytes, renamed at %s" % (src, before[-1][2], event[3])
            assert os.path.dirname(src) == os.path.dirname(dst), "the temp file is not beside %s" % dst
            after = [e for e in self.events[i + 1:] if e[0] == "fsync" and e[1] == os.path.dirname(dst)]
            assert after, "the directory of %s is not fsynced after the rename: %s" % (dst, self.events)
            checked += 1
        return checked

    def replaced(self):
        return {e[2] for e in self.events if e[0] == "replace"}

    def fsynced(self):
        return {e[1] for e in self.events if e[0] == "fsync"}


@pytest.fixture
def trace(monkeypatch):
    return Trace(monkeypatch)


def inodes(root):
    """{path: (inode, size)} of every regular file under root."""
    out = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for name in files:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_ino, st.st_size)
    return out


def assert_no_write_in_place(before, after, trace, appended=()):
    """A file that changed either came from a traced rename or is an fsynced append (a log)."""
    changed = [p for p, v in after.items() if before.get(p) != v]
    for path in changed:
        if path in appended:
            assert path in trace.fsynced(), "%s appended without fsync" % path
            assert before.get(path, (None,))[0] in (None, after[path][0])
        else:
            assert path in trace.replaced(), "%s was written in place, not renamed into place" % path
    return changed


def test_write_atomic_is_write_fsync_rename_fsync_dir(tmp_path, trace):
    path = tmp_path / "state.json"
    path.write_text("old\n")
    _files.write_atomic(str(path), b'{"new": true}\n', 0o600)
    kinds = [(e[0], os.path.basename(e[1]) if e[0] != "replace" else "tmp->" + os.path.basename(e[2])) for e in trace.events]
    assert kinds[0][0] == "fsync" and kinds[0][1].startswith(".state.json.")
    assert kinds[1] == ("replace", "tmp->state.json")
    assert kinds[2] == ("fsync", tmp_path.name)
    assert trace.check_replaces() == 1
    assert path.read_text() == '{"new": true}\n' and os.listdir(str(tmp_path)) == ["state.json"]


def test_a_failed_fsync_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    path.write_text("old\n")

    def broken(fd):
        raise OSError(5, "EIO")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        _files.write_atomic(str(path), "new\n")
    assert path.read_text() == "old\n" and os.listdir(str(tmp_path)) == ["state.json"]


def test_append_lines_is_one_write_then_fsync_and_a_new_log_flushes_its_directory(tmp_path, trace, monkeypatch):
    log = tmp_path / "history.jsonl"
    writes = []
    real_write = os.write

    def write(fd, data):
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    assert _files.append_lines(str(log), ['{"a": 1}', '{"b": 2}'], 0o600)
    assert writes == [b'{"a": 1}\n{"b": 2}\n']
    assert [e[:2] for e in trace.events] == [("fsync", str(log)), ("fsync", str(tmp_path))]
    assert trace.events[0][2] == len(writes[0])
    trace.events.clear()
    assert _files.append_lines(str(log), ['{"c": 3}'], 0o600)
    assert [e[:2] for e in trace.events] == [("fsync", str(log))]  # an existing log: its directory is unchanged
    assert oct(os.stat(str(log)).st_mode & 0o777) == "0o600"


def test_remove_flushes_the_directory(tmp_path, trace):
    path = tmp_path / "guard.json"
    path.write_text("{}")
    assert _files.remove(str(path)) is True
    assert [e[:2] for e in trace.events] == [("unlink", str(path)), ("fsync", str(tmp_path))]
    assert _files.remove(str(path)) is False


def test_the_guard_state_and_the_lock_owner_are_renamed_into_place(tmp_path, trace):
    statefile = tmp_path / "guard" / "vllm-server.json"
    statefile.parent.mkdir(mode=0o700)
    _guard_state.write_state(str(statefile), {"version": 1, "phase": "armed", "run_id": "r1"})
    _guard_state.write_state(str(statefile), {"version": 1, "phase": "restoring", "run_id": "r1"})
    _lock.write_json_atomic(str(tmp_path / "owner"), {"run_id": "r1"})
    assert trace.check_replaces() == 3
    assert json.loads(statefile.read_text())["phase"] == "restoring"
    assert oct(os.stat(str(statefile)).st_mode & 0o777) == "0o600"


def test_the_guard_restore_writes_the_unit_and_baselines_atomically(tmp_path, trace):
    """The writers the restore's file step calls (_lock.write_bytes_atomic for the unit and baselines, copy_if_changed)."""
    unit_dir = tmp_path / "etc"
    unit_dir.mkdir()
    unit = unit_dir / "vllm-server.service"
    unit.write_text("[Service]\nExecStart=/usr/bin/candidate\n")
    _lock.write_bytes_atomic(str(unit), b"[Service]\nExecStart=/usr/bin/production\n", 0o644)
    _files.copy_if_changed(str(unit), str(tmp_path / "baseline.json"), 0o600)
    assert trace.check_replaces() == 2


def test_a_kept_switch_writes_every_file_by_rename_and_fsyncs_the_history(tmp_path, trace):
    state = tmp_path / "state"
    for sub in ("snapshot", "baselines", "previous"):
        (state / sub).mkdir(parents=True)
    unit = "vllm-server.service"
    key = "vllm-kimi-reasoning"
    (state / "snapshot" / unit).write_text("[Service]\nExecStart=/usr/bin/production\n")
    (state / "baselines" / (key + ".json")).write_text('{"old": true}\n')
    (state / "history.jsonl").write_text('{"first": 1}\n')
    unit_path = tmp_path / unit
    unit_path.write_text("[Service]\nExecStart=/usr/bin/candidate\n")
    kept = {"unit": unit, "unit_path": str(unit_path), "replaced_unit": True, "baseline_key": key,
            "baseline": {"summary": {}, "label": "ngram"}, "settings": {"engine": "vllm"},
            "acceptance": {"acceptance": {"mean": 2.0}}, "archive_keep": 2}
    before = inodes(state)
    out = _record.write(str(state), {"outcome": "kept"}, "", kept)
    after = inodes(state)
    history = str(state / "history.jsonl")
    changed = assert_no_write_in_place(before, after, trace, appended=(history,))
    # previous/UNIT, previous/KEY.json, the archive copy and its manifest, acceptance/, baselines/, history
    assert len(changed) >= 7, changed
    assert str(state / "kept" / "MANIFEST.json") in changed
    assert trace.check_replaces() == len(changed) - 1
    assert out["written"][-1] == history


def test_the_archive_manifest_is_renamed_into_place(tmp_path, trace):
    src = tmp_path / "vllm-server.service"
    src.write_text("[Service]\nExecStart=/usr/bin/production\n")
    first = _unitfile.archive(str(src), str(tmp_path / "kept"), src.name, keep=2, now=1.0e9)
    src.write_text("[Service]\nExecStart=/usr/bin/other\n")
    second = _unitfile.archive(str(src), str(tmp_path / "kept"), src.name, keep=2, now=1.0e9 + 60)
    assert first["changed"] and second["changed"]
    assert trace.check_replaces() == 4  # two copies, two manifests
    assert not [n for n in os.listdir(str(tmp_path / "kept")) if n.endswith(".tmp") or n.startswith(".")]
