# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Log lines in the engines' own formats (what journalctl shows on a real host)."""
import os
import sys
import time


def _flush(stream, line):
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class VllmLog:
    """`(APIServer pid=123) INFO 11-29 12:00:00 [api_server.py:1] message`."""

    def __init__(self, proc="APIServer"):
        self.proc = proc

    def _emit(self, level, src, msg, stream=None):
        stamp = time.strftime("%m-%d %H:%M:%S")
        _flush(stream or sys.stdout, "(%s pid=%d) %s %s [%s] %s" % (self.proc, os.getpid(), level, stamp, src, msg))

    def info(self, msg, src="api_server.py:1"):
        self._emit("INFO", src, msg)

    def warning(self, msg, src="api_server.py:1"):
        self._emit("WARNING", src, msg, sys.stderr)

    def error(self, msg, src="core.py:1"):
        self._emit("ERROR", src, msg, sys.stderr)


class SglangLog:
    """`[2025-11-29 12:00:00 TP0] message`."""

    def __init__(self, tag=""):
        self.tag = tag

    def _emit(self, msg, stream=None):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        tag = " " + self.tag if self.tag else ""
        _flush(stream or sys.stdout, "[%s%s] %s" % (stamp, tag, msg))

    def info(self, msg, src=None):
        self._emit(msg)

    def warning(self, msg, src=None):
        self._emit("WARNING: " + msg, sys.stderr)

    def error(self, msg, src=None):
        self._emit(msg, sys.stderr)


def traceback_text(exc_line, frames=()):
    """A Python-looking traceback ending in `exc_line` (what the engines print on a bad config)."""
    lines = ["Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        lines.append('  File "%s", line %d, in %s' % (path, lineno, func))
        lines.append("    " + code)
    lines.append(exc_line)
    return "\n".join(lines)
