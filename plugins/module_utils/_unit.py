# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quote an argv or an environment for a systemd unit file, by systemd's rules (not the shell's).

``exec_line(argv)`` gives the value of ``ExecStart=``; ``env_line(env)`` the value of ``Environment=``.

What systemd does with such a line (systemd.syntax(7), systemd.service(5) "Command lines",
systemd.exec(5) "Environment="), and how each step is undone here:

* ``%`` starts a specifier (``%n``, ``%h``...) everywhere on the line: written ``%%``.
* Words split on whitespace; ``"..."`` groups a word, and C escapes (``\\\\``, ``\\"``, ``\\n``,
  ``\\xNN``...) are decoded: a word with whitespace, quotes, backslashes, ``;`` or control
  characters is double-quoted, with ``\\`` and ``"`` escaped and controls written as C escapes.
  A lone unquoted ``;`` would separate two commands, so ``;`` is always quoted.
* ``ExecStart=`` arguments undergo ``$VAR`` / ``${VAR}`` substitution: ``$`` is written ``$$``.
  The executable path is not substituted (so ``$`` there is refused) and must be an absolute,
  normalized path.
* ``Environment=`` values are not substituted, so ``$`` stays as it is there.

Both raise ``UnitQuoteError`` (a ``ValueError``) for what systemd would reject or misread.
"""
from __future__ import annotations

import re

__all__ = ["UnitQuoteError", "exec_line", "env_line", "env_file_line", "quote_word"]

_NEEDS_QUOTES = re.compile(r'[\s"\'\\;]|[\x00-\x1f\x7f]')
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r",
              "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class UnitQuoteError(ValueError):
    """A value that cannot be written safely into a unit file."""


def _check_text(word, what):
    if not isinstance(word, str):
        raise UnitQuoteError("%s must be a string, got %s: %r" % (what, type(word).__name__, word))
    if "\x00" in word:
        raise UnitQuoteError("%s contains a NUL character, which systemd cannot pass: %r" % (what, word))
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        raise UnitQuoteError("%s is not valid UTF-8 text: %r" % (what, word))


def _escape_char(ch):
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch]
    if ch < " " or ch == "\x7f":
        return "\\x%02x" % ord(ch)
    return ch


def quote_word(word, dollar=True):
    """One word, quoted for a systemd command line; ``dollar`` doubles ``$`` (no env expansion)."""
    _check_text(word, "argument")
    text = word.replace("%", "%%")
    if dollar:
        text = text.replace("$", "$$")
    if text and not _NEEDS_QUOTES.search(text):
        return text
    return '"' + "".join(_escape_char(ch) for ch in text) + '"'


def _check_executable(path):
    _check_text(path, "executable")
    if not path.startswith("/"):
        raise UnitQuoteError("the executable must be an absolute path (systemd's ExecStart= rule), got %r" % path)
    parts = path.split("/")[1:]
    if path.endswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UnitQuoteError("the executable path must be normalized (no '//', '.', '..' or trailing '/'): %r" % path)
    if "$" in path:
        raise UnitQuoteError("systemd does not expand '$' in the executable path; refusing %r" % path)
    if re.search(r"[\x00-\x1f\x7f]", path):
        raise UnitQuoteError("the executable path contains control characters: %r" % path)


def exec_line(argv):
    """The value of ``ExecStart=`` that makes systemd run exactly ``argv`` (a list of strings)."""
    if isinstance(argv, (str, bytes)) or not hasattr(argv, "__iter__"):
        raise UnitQuoteError("argv must be a list of strings, got %s" % type(argv).__name__)
    argv = list(argv)
    if not argv:
        raise UnitQuoteError("argv is empty: ExecStart= needs at least the executable")
    _check_executable(argv[0])
    return " ".join([quote_word(argv[0])] + [quote_word(a) for a in argv[1:]])


def env_line(env):
    """The value of ``Environment=`` that sets exactly ``env`` (a mapping of name to string value).

    Names are sorted so the rendered unit is stable. Numbers and booleans are written as text
    (``True`` -> ``true``) because YAML often hands them over unquoted; anything else is refused.
    """
    if not isinstance(env, dict):
        raise UnitQuoteError("environment must be a mapping of names to values, got %s" % type(env).__name__)
    words = []
    for name in sorted(env):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise UnitQuoteError("invalid environment variable name %r (letters, digits, '_'; not starting with a digit)" % (name,))
        value = env[name]
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        elif not isinstance(value, str):
            raise UnitQuoteError("environment value of %s must be a string, got %s" % (name, type(value).__name__))
        _check_text(value, "environment value of %s" % name)
        if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", value):
            raise UnitQuoteError("environment value of %s has control characters systemd refuses: %r" % (name, value))
        words.append(quote_word("%s=%s" % (name, value), dollar=False))
    return " ".join(words)


def env_file_line(name, value):
    """One ``NAME=value`` line of an ``EnvironmentFile=``, quoted so systemd reads back ``value`` exactly.

    systemd parses a value that starts with a quote as a POSIX shell quoted string: single quotes
    keep everything literal; a value that holds a single quote is double-quoted with ``\\``,
    ``"``, ``$`` and backquote escaped. Control characters (a newline would start a new assignment)
    are refused.
    """
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise UnitQuoteError("invalid environment variable name %r" % (name,))
    if not isinstance(value, str):
        raise UnitQuoteError("environment value of %s must be a string, got %s" % (name, type(value).__name__))
    _check_text(value, "environment value of %s" % name)
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise UnitQuoteError("environment value of %s has control characters" % name)
    if "'" not in value:
        return "%s='%s'\n" % (name, value)
    return '%s="%s"\n' % (name, re.sub(r'([\\"$`])', r"\\\1", value))
