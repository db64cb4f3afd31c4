# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_http.DirectTransport keeps connections alive, as production clients do, and never miscounts for it.

A real HTTP/1.1 server on 127.0.0.1 (keepalive_server.py) counts the connections it accepts and
which one served each request, so every case checks both sides: what the benchmark counted, and what
the server saw (no request lost, none sent twice but the one retry of a stale connection).
"""
from __future__ import annotations

import shutil
import ssl
import subprocess
from urllib.parse import urlsplit

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _bench_stream, _http
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.keepalive_server import (
    TOKENS, KeepAliveServer,
)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.sse_server import closed_port_url

BODY = _bench_stream.request_body('completions', 'm', 'hello', TOKENS)


def by_request(*actions):
    """A script that answers the server's n-th request with actions[n] ('ok' beyond them)."""
    return lambda n, conn, k: actions[n] if n < len(actions) else 'ok'


def send(tr, srv, **kw):
    return _bench_stream.run_request(tr, _bench_stream.endpoint(srv.url, 'completions'), BODY, **kw)


def kinds(results):
    return [r.error or 'ok' for r in results]


@pytest.fixture
def watchdog():
    made = []

    def make(request_timeout_s=60.0):
        made.append(_bench_stream.Watchdog(request_timeout_s))
        return made[-1]

    yield make
    for w in made:
        w.stop()


# ---------------------------------------------------------------- reuse

def test_requests_of_one_stream_share_one_connection():
    with KeepAliveServer() as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(5)]
        assert srv.accepted == 1 and srv.per_connection() == [5]
    assert kinds(results) == ['ok'] * 5
    assert all(r.output_tokens == TOKENS for r in results)


def test_a_closed_loop_uses_one_connection_per_stream_and_opens_them_before_the_first_request():
    with KeepAliveServer() as srv:
        tr = _http.DirectTransport(5)
        results, _wall = _bench.run_level(tr, _bench_stream.endpoint(srv.url, 'completions'), [BODY], 4, 16, warmup=2)
        assert srv.accepted == 4 and sum(srv.per_connection()) == 18
    assert kinds(results) == ['ok'] * 16


def test_keep_alive_off_opens_a_connection_per_request():
    with KeepAliveServer() as srv:
        tr = _http.DirectTransport(5, keep_alive=False)
        results = [send(tr, srv) for _i in range(3)]
        assert tr.prime(srv.url, 4) == 0
        assert srv.accepted == 3
    assert kinds(results) == ['ok'] * 3


def test_the_run_closes_its_idle_connections_at_its_end():
    with KeepAliveServer() as srv:
        tr = _http.DirectTransport(5)
        cfg = {'url': srv.url, 'api': 'completions', 'model': 'm', 'prompts': [('c', 'hello')], 'max_tokens': TOKENS,
               'concurrency': [2], 'requests': 4, 'metrics': 'none'}
        bench = _bench.run_benchmark(cfg, transport=tr)
        assert srv.accepted == 2 and tr.pool.idle(_http.pool_key(urlsplit(srv.url))) == 0
        assert srv.closed.wait(5)
    assert bench['ok'] == 4 and bench['errors'] == 0


# ---------------------------------------------------------------- the server closes

def test_connection_close_from_the_server_gives_a_fresh_connection_and_loses_no_request():
    with KeepAliveServer(lambda n, conn, k: 'close_header') as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(3)]
        assert srv.accepted == 3 and srv.per_connection() == [1, 1, 1]
    assert kinds(results) == ['ok'] * 3


def test_a_closed_loop_against_a_server_that_closes_every_connection_counts_every_request():
    with KeepAliveServer(lambda n, conn, k: 'close_header' if n % 2 else 'close_after') as srv:
        tr = _http.DirectTransport(5)
        results, _wall = _bench.run_level(tr, _bench_stream.endpoint(srv.url, 'completions'), [BODY], 3, 12)
        assert len(srv.served) == 12 and srv.accepted == 12
    assert kinds(results) == ['ok'] * 12


def test_a_stream_cut_mid_way_is_a_failed_request_and_the_next_one_connects_afresh():
    with KeepAliveServer(by_request('ok', 'cut_after')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(3)]
        assert srv.per_connection() == [2, 1]
    assert kinds(results) == ['ok', 'stream_cut', 'ok']


def test_an_idle_connection_closed_by_the_server_is_replaced_transparently():
    with KeepAliveServer(by_request('close_after')) as srv:
        tr = _http.DirectTransport(5)
        first = send(tr, srv)
        assert srv.closed.wait(5)   # the server closed the idle connection, without a word
        second = send(tr, srv)
        assert srv.accepted == 2 and srv.per_connection() == [1, 1]
    assert kinds([first, second]) == ['ok', 'ok']


# ---------------------------------------------------------------- the one retry

def test_a_reused_connection_cut_before_any_byte_is_retried_once_on_a_fresh_one():
    with KeepAliveServer(by_request('ok', 'cut_before')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(2)]
        # the cut request reached the server once, its retry once more, on connection 1
        assert srv.served == [(0, 0, 'ok'), (0, 1, 'cut_before'), (1, 0, 'ok')]
    assert kinds(results) == ['ok', 'ok']


def test_the_retry_is_not_retried():
    with KeepAliveServer(by_request('ok', 'cut_before', 'cut_before')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(3)]
        assert [s[:2] for s in srv.served] == [(0, 0), (0, 1), (1, 0), (2, 0)]
    assert kinds(results) == ['ok', 'stream_cut', 'ok']


def test_a_fresh_connection_cut_before_any_byte_is_not_retried():
    with KeepAliveServer(by_request('cut_before')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(2)]
        assert len(srv.served) == 2 and srv.accepted == 2
    assert kinds(results) == ['stream_cut', 'ok']


def test_a_reused_connection_cut_after_the_response_began_is_a_failure_not_a_retry():
    with KeepAliveServer(by_request('ok', 'cut_after')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(2)]
        assert len(srv.served) == 2
    assert kinds(results) == ['ok', 'stream_cut']
    assert results[1].kept_bytes > 0


# ---------------------------------------------------------------- responses not read to their end

def test_an_http_error_closes_the_connection():
    with KeepAliveServer(by_request('ok', 'error_500')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(3)]
        assert srv.per_connection() == [2, 1]
    assert kinds(results) == ['ok', 'http_5xx', 'ok']


def test_an_oversize_response_closes_the_connection():
    with KeepAliveServer(by_request('ok', 'flood')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv, max_bytes=100000) for _i in range(3)]
        assert srv.per_connection() == [2, 1]
    assert kinds(results) == ['ok', 'oversize', 'ok']


def test_the_deadline_bounds_a_request_on_a_reused_socket_and_its_connection_is_dropped(watchdog):
    with KeepAliveServer(by_request('ok', 'trickle')) as srv:
        tr = _http.DirectTransport(5)
        wd = watchdog(request_timeout_s=0.8)
        results = [send(tr, srv, watchdog=wd) for _i in range(3)]
        assert srv.per_connection() == [2, 1]
    assert kinds(results) == ['ok', 'request_timeout', 'ok']


def test_a_terminator_that_does_not_follow_done_at_once_keeps_the_request_but_not_the_connection():
    with KeepAliveServer(by_request('slow_end')) as srv:
        tr = _http.DirectTransport(5)
        results = [send(tr, srv) for _i in range(2)]
        assert srv.per_connection() == [1, 1]
    assert kinds(results) == ['ok', 'ok']


def test_an_expired_guard_keeps_its_socket():
    wd = _bench_stream.Watchdog(60)
    try:
        g = wd.guard()
        assert g.detach() is True and g.sock is None
        g.expired = True
        assert g.detach() is False
    finally:
        wd.stop()


def test_priming_an_unreachable_server_opens_nothing_and_the_request_reports_it():
    tr = _http.DirectTransport(5)
    url = closed_port_url() + '/v1/completions'
    assert tr.prime(url, 3) == 0
    assert _bench_stream.run_request(tr, url, BODY).error == 'connect'


# ---------------------------------------------------------------- TLS

@pytest.fixture(scope='module')
def tls_server_context(tmp_path_factory):
    if not shutil.which('openssl'):
        pytest.skip('openssl is needed to make a test certificate')
    d = tmp_path_factory.mktemp('tls')
    key, cert = str(d / 'key.pem'), str(d / 'cert.pem')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-days', '1',
                    '-keyout', key, '-out', cert], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def test_tls_connections_are_kept_alive_with_one_context(tls_server_context):
    with KeepAliveServer(context=tls_server_context) as srv:
        tr = _http.DirectTransport(5, validate_certs=False)
        results, _wall = _bench.run_level(tr, _bench_stream.endpoint(srv.url, 'completions'), [BODY], 2, 6)
        context = tr._context
        results.append(send(tr, srv))
        assert srv.accepted == 2 and sum(srv.per_connection()) == 7
        assert tr._context is context
    assert kinds(results) == ['ok'] * 7
