"""_http: the shared engine API options, API key refusal, scrubbing, and the one bounded GET helper.

GETs go through ansible's real open_url to a real local server (engine_http.EngineHTTP).
"""
from __future__ import annotations

import pytest
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.specdec.plugins.module_utils import _http
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.engine_http import (
    EngineHTTP, Reply, closed_port_url,
)


def test_engine_api_argspec_is_a_fresh_copy_with_the_shared_options():
    spec = _http.engine_api_argspec(engine={'type': 'str'})
    assert spec == {'url': {'type': 'str', 'required': True}, 'api_key': {'type': 'str', 'no_log': True},
                    'validate_certs': {'type': 'bool', 'default': True}, 'engine': {'type': 'str'}}
    spec['url']['required'] = False
    assert _http.ENGINE_API_ARGSPEC['url']['required'] is True


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
    problem = _http.api_key_problem(key)
    assert problem.startswith('api_key contains ') and words in problem
    assert 'sk' not in problem
    with pytest.raises(_http.BadHeaderValue):
        _http.auth_headers(key)


def test_good_or_absent_keys_are_accepted():
    assert _http.api_key_problem(None) is None and _http.api_key_problem('') is None
    assert _http.auth_headers('sk-ABC_123.def~+/=') == {'Authorization': 'Bearer sk-ABC_123.def~+/='}
    assert _http.auth_headers(None) == {} and _http.auth_headers('') == {}


def test_scrub_masks_every_spelling_of_a_secret_in_nested_results():
    key = 'sk-SECRET\n'
    value = {'a': ['invalid %r' % key, {'b': "Invalid header value b'Bearer sk-SECRET\\n'"}],
             'c': 'json "sk-SECRET\\n" and plain sk-SECRET', 'n': 3, 'none': None}
    out = _http.scrub(value, [key])
    assert 'SECRET' not in repr(out)
    assert out['n'] == 3 and out['none'] is None
    assert out['c'] == 'json "%s" and plain %s' % (_http.MASK, _http.MASK)
    assert _http.scrub('nothing here', []) == 'nothing here'


def test_server_root_accepts_a_trailing_v1():
    for base in ('http://h:1', 'http://h:1/', 'http://h:1/v1', 'http://h:1/v1/'):
        assert _http.server_root(base) == 'http://h:1'


def test_http_get_returns_status_body_and_no_error():
    with EngineHTTP({'/x': [Reply(200, {'ok': 1})]}) as srv:
        assert _http.http_get(open_url, srv.url + '/x', 5) == (200, b'{"ok": 1}', None)


def test_http_get_keeps_the_start_of_an_error_body():
    with EngineHTTP({'/x': [Reply(401, b'{"error": "bad key"}')]}) as srv:
        status, body, err = _http.http_get(open_url, srv.url + '/x', 5)
    assert (status, err) == (401, 'HTTP 401') and b'bad key' in body


def test_http_get_does_not_read_a_body_beyond_its_cap():
    with EngineHTTP({'/metrics': [Reply(200, b'x' * 300000)]}) as srv:
        status, body, err = _http.http_get(open_url, srv.url + '/metrics', 5, max_bytes=100000)
    assert status == 200 and body == b''
    assert err == 'HTTP 200, body larger than 100000 bytes (not read on)'


def test_http_get_never_raises():
    assert _http.http_get(open_url, closed_port_url() + '/x', 5) == (None, b'', 'connection refused')

    def broken(url, **kwargs):
        raise RuntimeError('opener bug')

    assert _http.http_get(broken, 'http://127.0.0.1:9/x', 5) == (None, b'', 'RuntimeError: opener bug')
