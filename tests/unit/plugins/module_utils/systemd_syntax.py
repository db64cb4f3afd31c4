# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reference reader of systemd unit-file command lines, written from systemd.syntax(7),
systemd.service(5) "Command lines" and systemd.exec(5) "Environment=", used to round-trip
what _unit.py writes. No systemd runs on the controller; the real check (systemctl show -p
ExecStart on the mock host) belongs to the spec_server role's Molecule scenario.

Order of systemd's own steps: specifiers are resolved on the whole value first
(unit_full_printf), then the value is split into words with quotes and C escapes
(extract_first_word with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), then, at exec time, $VAR/${VAR}
are substituted in the arguments ("$$" is a literal "$"); Environment= values skip that last step.
"""
from __future__ import annotations

import re

WHITESPACE = " \t\n\r"
_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", '"': '"', "'": "'", "s": " "}


class SyntaxProblem(ValueError):
    """The line would not mean one plain argv to systemd."""


def resolve_specifiers(value):
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "%":
            nxt = value[i + 1:i + 2]
            if nxt != "%":
                raise SyntaxProblem("specifier %%%s would be expanded by systemd" % nxt)
            out.append("%")
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _cunescape(value, i):
    """Decode the C escape starting after the backslash at value[i]; return (text, next index)."""
    ch = value[i:i + 1]
    if ch == "":
        raise SyntaxProblem("a trailing backslash would continue the line")
    if ch in _SIMPLE:
        return _SIMPLE[ch], i + 1
    if ch == "x" and re.match(r"[0-9a-fA-F]{2}", value[i + 1:i + 3]):
        return chr(int(value[i + 1:i + 3], 16)), i + 3
    raise SyntaxProblem("unknown escape \\%s" % ch)


def split_words(value):
    """extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) applied until the value ends."""
    words, i, n = [], 0, len(value)
    while True:
        while i < n and value[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        if value[i] == ";" and (i + 1 == n or value[i + 1] in WHITESPACE):
            raise SyntaxProblem("a lone ';' separates commands in ExecStart=")
        word, quote = [], None
        while i < n:
            ch = value[i]
            if quote:
                if ch == quote:
                    quote = None
                    i += 1
                elif ch == "\\":
                    text, i = _cunescape(value, i + 1)
                    word.append(text)
                else:
                    word.append(ch)
                    i += 1
            elif ch in WHITESPACE:
                break
            elif ch in "\"'":
                quote = ch
                i += 1
            elif ch == "\\":
                text, i = _cunescape(value, i + 1)
                word.append(text)
            else:
                word.append(ch)
                i += 1
        if quote:
            raise SyntaxProblem("unbalanced quote")
        words.append("".join(word))


def substitute_env(word):
    """Exec-time substitution with an empty environment: only '$$' may appear."""
    if re.search(r"\$(?!\$)", word.replace("$$", "")):
        raise SyntaxProblem("unescaped $ would be substituted: %r" % word)
    return word.replace("$$", "$")


def parse_exec(value):
    """What systemd executes for ExecStart=<value>: (path, argv)."""
    words = split_words(resolve_specifiers(value))
    if not words or not words[0].startswith("/"):
        raise SyntaxProblem("Neither a valid executable name nor an absolute path")
    return [words[0]] + [substitute_env(w) for w in words[1:]]


def parse_environment(value):
    """What Environment=<value> sets; systemd resolves specifiers per assignment after unquoting."""
    env = {}
    for word in split_words(value):
        name, sep, val = word.partition("=")
        if not sep:
            raise SyntaxProblem("not an assignment: %r" % word)
        env[name] = resolve_specifiers(val)
    return env
