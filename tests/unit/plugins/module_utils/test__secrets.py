# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_secrets: an API key that cannot be sent is refused without quoting it; every spelling of a secret is scrubbed."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _secrets


@pytest.mark.parametrize('key, words', [
    ('sk-abc\n', 'a line feed (U+000A) at its end (a newline left by a file or a lookup?'),
    ('sk\r\nX-Injected: 1', 'a carriage return (U+000D): refused before any request'),
    ('sk-\tx', 'a tab (U+0009)'),
    ('sk-\x00', 'a NUL byte (U+0000)'),
    ('sk-\x1bx', 'a control character (U+001B)'),
    ('sk-\u0085x', 'a control character (U+0085)'),
    ('sk-\u2028x', 'a control character (U+2028)'),
    ('sk-\u20acx', 'a non-ASCII character (U+20AC)'),
])
def test_a_key_with_a_control_or_non_ascii_character_is_refused_without_quoting_it(key, words):
    problem = _secrets.api_key_problem(key)
    assert problem.startswith('api_key contains ') and words in problem
    assert 'sk' not in problem
    with pytest.raises(_secrets.BadHeaderValue):
        _secrets.auth_headers(key)


def test_good_or_absent_keys_are_accepted():
    assert _secrets.api_key_problem(None) is None and _secrets.api_key_problem('') is None
    assert _secrets.auth_headers('sk-ABC_123.def~+/=') == {'Authorization': 'Bearer sk-ABC_123.def~+/='}
    assert _secrets.auth_headers(None) == {} and _secrets.auth_headers('') == {}


def test_scrub_masks_every_spelling_of_a_secret_in_nested_results():
    key = 'sk-SECRET\n'
    value = {'a': ['invalid %r' % key, {'b': "Invalid header value b'Bearer sk-SECRET\\n'"}],
             'c': 'json "sk-SECRET\\n" and plain sk-SECRET', 'n': 3, 'none': None}
    out = _secrets.scrub(value, [key])
    assert 'SECRET' not in repr(out)
    assert out['n'] == 3 and out['none'] is None
    assert out['c'] == 'json "%s" and plain %s' % (_secrets.MASK, _secrets.MASK)
    assert _secrets.scrub('nothing here', []) == 'nothing here'
