# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files the modules write: atomically, and only when they change, so ``changed`` says what happened.

- ``write_atomic(path, data, mode=0o644)``: a reader sees the old file or the new one, never half of one:
  a temporary file in the same directory, created with ``mode``, written and flushed to disk, renamed
  over the path, then the directory flushed too (the rename survives a crash).
- ``write_if_changed(path, data, mode=0o644, root=False, check_mode=False) -> bool``: the same, but an
  identical file is left alone (not even its mtime moves; only its mode is set when that differs). With
  ``root``, a file that is not root's is written anew (root's, as the module runs). Returns whether the
  file changed, or in ``check_mode`` whether it would (nothing is written).
- ``update(path, data, mode=0o644, root=False, check_mode=False) -> (bool, str | None)``: ``write_if_changed``
  that also returns the text the file held (as ``read_text`` gives it), from the one read that compared it.
- ``read_text(path) -> str | None``: the text of the regular file at path (for a diff's "before").
- ``copy_if_changed(src, dest, mode=0o600) -> bool``: ``write_if_changed`` with the bytes of ``src``.
- ``append_lines(path, lines, mode=0o644) -> bool``: adds lines to a log such as ``history.jsonl`` (one write,
  then fsync).
- ``remove(path) -> bool``: unlinks a file and flushes its directory (the removal survives a crash).
- ``sha256_file(path) -> str``: the hex SHA-256 of a file, read in blocks.

Standard library only: modules ship this to the target.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile

__all__ = ["write_atomic", "write_if_changed", "update", "read_text", "copy_if_changed", "append_lines", "remove",
           "sha256_file"]


def _as_bytes(data):
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _current(path):
    """(content, stat) of the regular file at path, or (None, None) when there is none."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None, None
            return f.read(), st
    except (FileNotFoundError, IsADirectoryError):
        return None, None


def _text(content):
    return None if content is None else content.decode("utf-8", errors="replace")


def read_text(path):
    """The text of the regular file at ``path`` (undecodable bytes replaced), or None when there is none."""
    return _text(_current(path)[0])


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path, data, mode=0o644):
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically with ``mode``.

    Raises OSError; the temporary file is removed and ``path`` is as it was.
    """
    data = _as_bytes(data)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _write_if_changed(path, data, mode, root, check_mode):
    """(whether the file changed, the bytes it held or None), from one read of ``path``."""
    data = _as_bytes(data)
    content, st = _current(path)
    same = content == data and not (root and (st.st_uid, st.st_gid) != (0, 0))
    if same and stat.S_IMODE(st.st_mode) == mode:
        return False, content
    if check_mode:
        return True, content
    if same:
        os.chmod(path, mode)
    else:
        write_atomic(path, data, mode)
    return True, content


def write_if_changed(path, data, mode=0o644, root=False, check_mode=False):
    """Write ``data`` to ``path`` atomically unless the file already holds it; return whether the file changed.

    Only the mode is set when the content is the same but the mode is not. With ``root``, a file that
    does not belong to root:root is replaced by a new one (the writer's: root, as modules run). In
    ``check_mode`` nothing is written and the answer is whether it would change. Raises OSError.
    """
    return _write_if_changed(path, data, mode, root, check_mode)[0]


def update(path, data, mode=0o644, root=False, check_mode=False):
    """:func:`write_if_changed` that also returns the text the file held: ``(changed, before)``.

    ``before`` is :func:`read_text`'s, taken from the read that compared it: a diff costs no second read.
    """
    changed, content = _write_if_changed(path, data, mode, root, check_mode)
    return changed, _text(content)


def copy_if_changed(src, dest, mode=0o600):
    """Copy the file ``src`` to ``dest`` atomically unless ``dest`` already holds it; return whether it changed."""
    with open(src, "rb") as f:
        return write_if_changed(dest, f.read(), mode)


def append_lines(path, lines, mode=0o644):
    """Append each of ``lines`` (text, one per line) to ``path``, created with ``mode``; return whether it changed.

    One ``write(2)`` on an ``O_APPEND`` descriptor (concurrent writers never interleave inside a line), then
    ``fsync``; a new file's directory is flushed too, so the line survives a crash once this returns.
    """
    lines = list(lines)
    if not lines:
        return False
    data = b"".join(_as_bytes(line.rstrip("\n") + "\n") for line in lines)
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(os.path.dirname(os.path.abspath(path)))
    return True


def remove(path):
    """Remove the file at ``path`` and flush its directory, so the removal survives a crash; return whether it was there.

    The guard's state file is removed by a confirm: a removal lost to a power cut would bring the file back,
    and the boot unit would then restore a configuration the controller had confirmed away.
    """
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    _fsync_dir(os.path.dirname(os.path.abspath(path)))
    return True


def sha256_file(path):
    """The hex SHA-256 of the file at ``path`` (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
