# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one validation gate for values that reach a host: unit files, reports, host paths.

Requests arrive as ``-e`` extra vars, inventory and AWX survey answers (free text), and a switch
runs as root. Every string that is written into a unit file, a report (Markdown, Prometheus, JSON)
or a host path passes one of the checks below first, on the controller, before the host is
touched. A refusal is a ``GateError`` whose message starts with the field's name.

Rules that hold for every text field: no control characters (C0, DEL, C1 such as NEL, and the
Unicode line and paragraph separators, which some readers treat as line breaks), valid UTF-8, a
length cap. Field-specific patterns (user, unit, DeviceAllow=, syscall names) and ranges (port,
memory share, context length, tensor parallel size) are the ones systemd and the engines accept,
narrowed where a wider form has no use here.

Stdlib only: it runs on the controller (filters) and on targets (modules).
"""
from __future__ import annotations

import difflib
import math
import re

__all__ = ["GateError", "text", "boolean", "integer", "number", "path", "name", "word_list", "suggest", "MAX_TEXT"]

MAX_TEXT = 4096  # a model path, a draft head id, an argument: longer is a mistake or an attack
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NUMBER = re.compile(r" *[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)? *\Z")

# Patterns for names systemd parses itself (systemd.exec(5), systemd.unit(5), useradd(8)).
PATTERNS = {
    # POSIX-portable user/group names as useradd accepts them by default, up to 32 characters.
    "user": (re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z"), "a user/group name ([a-z_][a-z0-9_-]*, at most 32)"),
    # A service unit name: systemd's allowed characters, one '@' for templates, ending in .service.
    "unit": (re.compile(r"[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.service\Z"),
             "a systemd service name (letters, digits, ':_.\\-', one '@', ending in .service)"),
    # DeviceAllow=: a device node path or a char-/block- class (globs allowed), then r, w, m flags.
    "device_allow": (re.compile(r"(/dev/[A-Za-z0-9_./*-]+|(char|block)-[A-Za-z0-9_.*:+-]+)( [rwm]{1,3})?\Z"),
                     "a DeviceAllow= entry: /dev/PATH or char-CLASS/block-CLASS, then optional r, w, m"),
    # SystemCallFilter=: a syscall name or an @group.
    "syscall": (re.compile(r"@?[a-z0-9_-]{1,64}\Z"), "a system call name or @group ([a-z0-9_-])"),
    # An environment variable name (systemd refuses others in Environment=).
    "env_name": (re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z"), "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"),
    # A host to bind: an IPv4/IPv6 literal or a DNS name.
    "host": (re.compile(r"[A-Za-z0-9_.:%-]{1,255}\Z"), "an IP address or host name"),
}


class GateError(ValueError):
    """A value that may not reach the host; the message names the field."""


def _kind(value):
    return type(value).__name__


def text(field, value, max_len=MAX_TEXT, allow_empty=False, pattern=None, no_dash=False, secret=False):
    """A string without control characters, at most ``max_len`` characters; stripped of nothing.

    ``secret``: the value is never quoted in the message (an API key, a token).
    """
    shown = (lambda v: "(value hidden)") if secret else _clip
    if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
        raise GateError("%s must be text, got %s %r" % (field, _kind(value), value))
    if isinstance(value, (int, float)):
        # YAML hands numbers over unquoted (a served name such as 70, a version): their text is fine.
        value = str(value)
    if not isinstance(value, str):
        raise GateError("%s must be text, got %s" % (field, _kind(value)))
    bad = _CONTROL.search(value)
    if bad:
        raise GateError("%s contains a control or line-separator character (U+%04X at offset %d), refused: %r"
                        % (field, ord(bad.group()), bad.start(), shown(value)))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise GateError("%s is not valid UTF-8 text: %r" % (field, shown(value)))
    if not value and not allow_empty:
        raise GateError("%s must not be empty" % field)
    if len(value) > max_len:
        raise GateError("%s is %d characters long, at most %d allowed" % (field, len(value), max_len))
    if no_dash and value.startswith("-"):
        raise GateError("%s may not start with '-' (it would be read as an engine flag): %r" % (field, shown(value)))
    if pattern:
        regex, what = PATTERNS[pattern]
        if not regex.match(value):
            raise GateError("%s must be %s, got %r" % (field, what, shown(value)))
    return value


def name(field, value, pattern):
    """A name checked against one of ``PATTERNS`` (user, unit, device_allow, syscall, env_name, host)."""
    return text(field, value, max_len=255, pattern=pattern)


def boolean(field, value):
    """A boolean, or the words Ansible reads as one (yes/no, true/false, on/off, 1/0)."""
    if isinstance(value, bool):
        return value
    words = {"yes": True, "true": True, "on": True, "1": True, "no": False, "false": False, "off": False, "0": False}
    if isinstance(value, (str, int)) and str(value).strip().lower() in words:
        return words[str(value).strip().lower()]
    raise GateError("%s must be a boolean, got %r" % (field, _clip(value)))


def integer(field, value, lo, hi):
    """An integer in [lo, hi]; numeric text (``"8000"``) is accepted, booleans never."""
    if isinstance(value, str) and re.match(r" *[+-]?[0-9]+ *\Z", value):  # "8000\n" is refused, not coerced
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GateError("%s must be an integer between %s and %s, got %r" % (field, lo, hi, _clip(value)))
    if not lo <= value <= hi:
        raise GateError("%s must be between %s and %s, got %s" % (field, lo, hi, value))
    return value


def number(field, value, lo, hi, lo_open=False):
    """A finite number in [lo, hi] (or (lo, hi] with ``lo_open``); numeric text accepted, booleans never."""
    if isinstance(value, str) and _NUMBER.match(value):  # "0.9\n" is refused, not coerced
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GateError("%s must be a number between %s and %s, got %r" % (field, lo, hi, _clip(value)))
    value = float(value)
    if value > hi or value < lo or (lo_open and value == lo):
        raise GateError("%s must be %s %s and <= %s, got %s" % (field, ">" if lo_open else ">=", lo, hi, value))
    return value


# Quotes, backslashes and '$' are read by systemd in path settings (ReadWritePaths= keeps escapes
# undecoded; ExecStart= substitutes '$'), so a path with them cannot be written back faithfully.
_PATH_FORBIDDEN = re.compile(r"[\"'$\\]")


def path(field, value):
    """An absolute, normalised path without quotes, backslashes or '$' (spaces and '%' are fine)."""
    value = text(field, value)
    if not value.startswith("/") or _PATH_FORBIDDEN.search(value):
        raise GateError("%s must be an absolute path without quotes, backslashes, '$' or control characters "
                        "(spaces and '%%' are fine), got %r" % (field, _clip(value)))
    parts = value.split("/")[1:]
    if value != "/" and (value.endswith("/") or any(p in ("", ".", "..") for p in parts)):
        raise GateError("%s must be a normalised path (no '//', '.', '..' or trailing '/'), got %r" % (field, value))
    return value


def word_list(field, values, check, max_items=256):
    """A list whose items each pass ``check(field_item, item)``; a lone string is refused (not split)."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise GateError("%s must be a list, got %s" % (field, _kind(values)))
    values = list(values)
    if len(values) > max_items:
        raise GateError("%s has %d items, at most %d allowed" % (field, len(values), max_items))
    return [check("%s[%d]" % (field, i), v) for i, v in enumerate(values)]


def suggest(unknown, known):
    """The closest known name to ``unknown``, or None (for 'did you mean' messages)."""
    match = difflib.get_close_matches(unknown, list(known), n=1, cutoff=0.75)
    return match[0] if match else None


def _clip(value, keep=80):
    text_ = value if isinstance(value, str) else repr(value)
    return text_ if len(text_) <= keep else text_[:keep] + "...(%d characters)" % len(text_)
