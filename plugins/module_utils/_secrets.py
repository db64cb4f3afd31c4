# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API key on its way to an engine: refused when it cannot be sent, and scrubbed from what comes back.

- ``check_api_key()`` / ``auth_headers()``: a key that holds a control character (a trailing newline from
  a file, a CR/LF that would start a new header line) is refused before any request, in words that
  never quote the key.
- ``scrub()``: takes secret values out of any text or result, in every form an exception may quote them.

Stdlib only: the modules (``_http``, ``_ready``, ``_bench``) and the controller's fleet filters use it.
"""

from __future__ import annotations

import json

MASK = '********'

_CONTROL_NAMES = {'\n': 'a line feed', '\r': 'a carriage return', '\t': 'a tab', '\x00': 'a NUL byte'}
_LINE_SEPARATORS = ('\u0085', '\u2028', '\u2029')


class BadHeaderValue(ValueError):
    """A value that cannot go into an HTTP header as given (its text never holds the value)."""


def api_key_problem(api_key):
    """Why ``api_key`` cannot be sent as a bearer token, or None. The answer never quotes the key."""
    if not api_key:
        return None
    last = len(api_key) - 1
    for i, ch in enumerate(api_key):
        code = ord(ch)
        if code < 0x20 or code == 0x7f or 0x80 <= code <= 0x9f or ch in _LINE_SEPARATORS:
            where = (' at its end (a newline left by a file or a lookup? strip it, for example with | trim)'
                     if i == last else '')
            name = _CONTROL_NAMES.get(ch, 'a control character')
            return ('api_key contains %s (U+%04X)%s: refused before any request, because a control character '
                    'in a header would end it or start another one' % (name, code, where))
        if code > 0x7e:
            return 'api_key contains a non-ASCII character (U+%04X): refused before any request; bearer tokens are ASCII' % code
    return None


def check_api_key(api_key):
    """Raise BadHeaderValue when ``api_key`` cannot be sent (see api_key_problem)."""
    problem = api_key_problem(api_key)
    if problem:
        raise BadHeaderValue(problem)


def auth_headers(api_key):
    """``{'Authorization': 'Bearer KEY'}`` for a key, ``{}`` without one; refuses a bad key."""
    if not api_key:
        return {}
    check_api_key(api_key)
    return {'Authorization': 'Bearer %s' % api_key}


def secret_forms(secret):
    """The ways an exception message may spell ``secret``: as is, stripped, repr- and JSON-escaped."""
    if not secret:
        return []
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1],
             repr(secret.encode('utf-8', 'replace'))[2:-1]}
    # Longest first, so that a form containing another is masked whole.
    return sorted((f for f in forms if len(f) >= 3), key=len, reverse=True)


def scrub(value, secrets):
    """``value`` (text, or dicts and lists of it) with every form of each secret replaced by MASK."""
    forms = []
    for secret in secrets or ():
        forms.extend(secret_forms(secret))
    if not forms:
        return value
    forms.sort(key=len, reverse=True)
    return _scrub(value, forms)


def _scrub(value, forms):
    if isinstance(value, str):
        for form in forms:
            if form in value:
                value = value.replace(form, MASK)
        return value
    if isinstance(value, dict):
        return dict((k, _scrub(v, forms)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_scrub(v, forms) for v in value]
    return value
