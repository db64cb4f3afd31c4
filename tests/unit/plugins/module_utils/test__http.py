# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_http: the shared engine API options and the one bounded GET helper.

GETs go through ansible's real open_url to a real local server (engine_http.EngineHTTP).
"""
from __future__ import annotations

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
