# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP to an engine's API, shared by engine_ready (``_ready``) and spec_bench (``_bench*``).

- ``engine_api_argspec()``: the ``url`` / ``api_key`` / ``validate_certs`` options of every module that
  talks to an engine (engine_ready, engine_park, spec_bench), documented once by the
  ``llmops.specdec.engine_api`` doc fragment; their defaults live here only.
- The API key's checks and scrubbing live in ``_secrets`` (stdlib only, so the fleet filters need not
  import this file's HTTP stack).
- ``http_get()``: the one GET helper (readiness probes, model discovery, metrics): never raises for I/O,
  bounded in bytes and in time.
- ``DirectTransport`` / ``AnsibleTransport``: the streaming POSTs of the benchmark. DirectTransport keeps
  its connections alive between requests (``ConnectionPool``), as load balancers and SDKs do.
"""
from __future__ import annotations

import copy
import http.client
import select
import socket
import threading
import time

try:
    import ssl
except ImportError:  # a Python without TLS still benchmarks http:// servers
    ssl = None

from ansible.module_utils.urls import Request, make_context
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urlsplit

# The options every engine-facing module shares (kubernetes.core's k8s_auth_options does the same).
ENGINE_API_ARGSPEC = {
    'url': {'type': 'str', 'required': True},
    'api_key': {'type': 'str', 'no_log': True},
    'validate_certs': {'type': 'bool', 'default': True},
}

# A GET body larger than this is not read on (a /metrics of a big vLLM server is well under 1 MiB).
MAX_GET_BYTES = 16 * 1024 * 1024
# What is kept of an HTTP error's body for its message.
ERROR_BODY_BYTES = 2000
READ_SIZE = 65536
# What may follow [DONE] before a kept-alive connection is reused: the chunked terminator (5 bytes) and
# perhaps trailers. More than this, or later than this, and the connection is closed instead.
DRAIN_BYTES = 65536
DRAIN_TIMEOUT_S = 1.0


def engine_api_argspec(**more):
    """A fresh argument_spec: the shared engine API options plus ``more`` (both copied)."""
    spec = copy.deepcopy(ENGINE_API_ARGSPEC)
    spec.update(copy.deepcopy(more))
    return spec


def server_root(base_url):
    """The server's root URL: ``base_url`` without a trailing ``/`` or ``/v1``."""
    base = base_url.rstrip('/')
    return base[:-3] if base.endswith('/v1') else base


# --------------------------------------------------------------------------- GET

def http_get(open_url, url, timeout, headers=None, follow_redirects='none', validate_certs=True,
             max_bytes=MAX_GET_BYTES):
    """GET ``url`` through ``open_url`` (ansible's, or a callable with its signature).

    Returns (status or None, body bytes, error text or None), and never raises for I/O, HTTP or a
    malformed answer. status None means no HTTP answer (error: 'connection refused', 'timed out after
    N s', ...). An HTTP error status comes with the start of its body and error 'HTTP <code>'. The body
    is read to at most ``max_bytes`` and for about ``timeout`` seconds; beyond either the status is kept,
    the body dropped and error says why, so a server that trickles or floods a body cannot hold the
    caller or its memory.
    """
    t_end = time.monotonic() + timeout
    try:
        resp = open_url(url, method='GET', timeout=timeout, headers=headers or {},
                        follow_redirects=follow_redirects, validate_certs=validate_certs)
        try:
            status = resp.getcode()
            read = getattr(resp, 'read1', None) or resp.read
            parts, size = [], 0
            while True:
                data = read(READ_SIZE)
                if not data:
                    break
                size += len(data)
                if size > max_bytes:
                    return status, b'', 'HTTP %s, body larger than %d bytes (not read on)' % (status, max_bytes)
                parts.append(data)
                if time.monotonic() > t_end:
                    return status, b'', 'HTTP %s, body not complete after %.0f s' % (status, timeout)
            return status, b''.join(parts), None
        finally:
            resp.close()
    except HTTPError as e:
        try:
            text = e.read(ERROR_BODY_BYTES)
        except Exception:  # the error's body is only decoration
            text = b''
        return e.code, text or b'', 'HTTP %d' % e.code
    except URLError as e:
        reason = e.reason
        if isinstance(reason, ConnectionRefusedError):
            return None, b'', 'connection refused'
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return None, b'', 'timed out after %.0f s' % timeout
        return None, b'', str(reason)
    except (socket.timeout, TimeoutError):
        return None, b'', 'timed out after %.0f s' % timeout
    except ConnectionRefusedError:
        return None, b'', 'connection refused'
    except Exception as e:  # reset, bad status line at startup, a header ansible refuses: an answer, not a traceback
        return None, b'', '%s: %s' % (type(e).__name__, e)


# --------------------------------------------------------------------------- streaming transports

class StampedBody:
    """A request body that records the moment it is written to the socket.

    Not bytes-like, so http.client sends the headers, then iterates this and sends each piece;
    the stamp is taken immediately before the body's single send.
    """

    __slots__ = ('body', 'sent_ns')

    def __init__(self, body):
        self.body = body
        self.sent_ns = None

    def __iter__(self):
        self.sent_ns = time.perf_counter_ns()
        yield self.body

    def __len__(self):
        return len(self.body)


class HTTPStatusError(Exception):
    def __init__(self, code, text):
        super(HTTPStatusError, self).__init__('HTTP %s' % code)
        self.code = code
        self.text = text


class ConnectError(Exception):
    pass


def response_socket(resp):
    """The socket under an http.client response (also what urllib returns), or None."""
    raw = getattr(getattr(resp, 'fp', None), 'raw', None)
    return getattr(raw, '_sock', None)


def _timeout(guard, stall):
    return stall if guard is None else guard.timeout(stall)


class AnsibleTransport:
    """HTTP through ansible.module_utils.urls.Request (what open_url wraps).

    One SSL context is built once and shared: open_url() builds a fresh one per call, loading the
    system CA bundle each time (bench/README.md has the cost). Proxies and .netrc are off by default:
    a proxy would be measured along with the server.
    """

    name = 'ansible_urls'
    guarded = True  # post_stream takes guard= (see _bench_stream.Guard)

    def __init__(self, timeout, validate_certs=True, use_proxy=False, headers=None):
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.context = make_context(validate_certs=validate_certs)
        self.use_proxy = use_proxy
        self._local = threading.local()

    def _request(self):
        req = getattr(self._local, 'req', None)
        if req is None:
            req = Request(headers=self.headers, use_proxy=self.use_proxy, timeout=self.timeout,
                          context=self.context, decompress=False, use_netrc=False,
                          follow_redirects='safe')
            self._local.req = req
        return req

    def post_stream(self, url, body, guard=None):
        """Send the request; return (start_ns, response, close).

        start_ns is stamped when http.client hands the body to the socket (after connect and the
        headers), not before Request.open(): the opener is built per call, at a cost measured in
        bench/README.md ("Transport: why the streams use http.client, not open_url").
        The response's socket is handed to ``guard`` (its deadline) once urllib returns the head.
        """
        stamped = StampedBody(body)
        resp = self._request().open('POST', url, data=stamped, timeout=_timeout(guard, self.timeout), headers={
            'Content-Type': 'application/json', 'Accept': 'text/event-stream',
            'Content-Length': str(len(body))})
        if guard is not None:
            guard.attach(response_socket(resp))
        return stamped.sent_ns, resp, resp.close

    def open_url(self, url, method='GET', timeout=None, headers=None, follow_redirects='safe', validate_certs=True):
        """open_url()'s signature over this transport's Request (its SSL context and headers), for http_get."""
        del validate_certs  # the shared SSL context already says
        return self._request().open(method, url, timeout=timeout or self.timeout, headers=headers,
                                    follow_redirects=follow_redirects)

    def get(self, url, timeout=None):
        """GET url; return (status or None, body text, error or None) through http_get."""
        status, body, err = http_get(self.open_url, url, timeout or self.timeout, follow_redirects='safe')
        return status, body.decode('utf-8', 'replace'), err


class DirectTransport:
    """Streaming POSTs over http.client on kept-alive connections; GETs via ansible's urls.

    The default, because it is what keeps TTFT exact at concurrency on a busy host: a request
    costs far less Python before it is on the wire than building a urllib opener through
    ansible.module_utils.urls.Request, whose work piles up at each wave of starts and holds the GIL
    while earlier streams' first tokens arrive (bench/README.md has the figures). The socket reads
    are the same HTTPResponse.read1() either way. TLS uses ansible's make_context(), one context.

    Connections are kept alive between requests (HTTP/1.1), one per stream of the closed loop, as
    production clients (SDKs, load balancers) keep theirs: a server that pays for accepting a fresh
    connection at every request would otherwise charge that to TTFT (bench/README.md, "Keep-alive
    connections"). A connection is reused only after a response read to its end; any error, a server
    close or a response left unread closes it, and the next request connects afresh. A request that
    fails on a reused connection before any byte of its response (the server had closed it while
    idle) is sent once more on a fresh one. ``keep_alive=False``: a connection per request.
    """

    name = 'http.client'
    guarded = True

    def __init__(self, timeout, validate_certs=True, headers=None, keep_alive=True):
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.headers.update({'Content-Type': 'application/json', 'Accept': 'text/event-stream'})
        self.validate_certs = validate_certs
        self.keep_alive = keep_alive
        self.pool = ConnectionPool()
        self._context = None
        self._lock = threading.Lock()
        self._get = AnsibleTransport(timeout, validate_certs=validate_certs, use_proxy=False,
                                     headers=headers)

    def _tls(self):
        with self._lock:
            if self._context is None:
                self._context = make_context(validate_certs=self.validate_certs)
            return self._context

    def _connect(self, u, timeout):
        if u.scheme == 'https':
            conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=timeout, context=self._tls())
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise ConnectError(str(exc))
        return conn

    def post_stream(self, url, body, guard=None):
        """Send the request and wait for the response head; return (start_ns, response, close).

        start_ns is stamped right before the request's bytes go to the socket, after any connect. The
        connection's socket is handed to ``guard`` before the request is sent, so the request's deadline
        also bounds the wait for the response head. ``close`` is a Lease: calling it closes the
        connection, its ``keep()`` lends it to the next request once the stream has ended well.
        """
        u = urlsplit(url)
        key = pool_key(u)
        conn = self.pool.take(key) if self.keep_alive else None
        if conn is not None:
            try:
                return self._exchange(conn, key, u, body, guard, reused=True)
            except StaleConnection:
                pass  # closed by the server while idle, before any byte of the answer: once more, fresh
        conn = self._connect(u, _timeout(guard, self.timeout))
        return self._exchange(conn, key, u, body, guard, reused=False)

    def _exchange(self, conn, key, u, body, guard, reused):
        try:
            if guard is not None:
                guard.attach(conn.sock)
            conn.sock.settimeout(self.timeout)  # the stall limit; with a guard, it holds the deadline
            start = time.perf_counter_ns()
            conn.request('POST', u.path + ('?' + u.query if u.query else ''), body, self.headers)
            resp = conn.getresponse()
        except ConnectionError as exc:
            # send failed, or the server closed without a status line: no byte of an answer came
            conn.close()
            if reused and (guard is None or not guard.kind()):
                raise StaleConnection(str(exc))
            raise
        except BaseException:
            conn.close()
            raise
        if resp.status >= 400:
            try:
                text = resp.read(ERROR_BODY_BYTES).decode('utf-8', 'replace')
            finally:
                resp.close()
                conn.close()
            raise HTTPStatusError(resp.status, text)
        return start, resp, Lease(self, key, conn, resp, guard)

    def prime(self, url, n, timeout=None):
        """Connect until ``n`` idle connections to ``url``'s server are pooled; return how many were opened.

        Before a level, so that its first wave finds warm connections as every later wave does, instead
        of making the server accept ``n`` connections at once. Stops quietly at a failure: the requests
        then report it.
        """
        if not self.keep_alive:
            return 0
        u = urlsplit(url)
        key = pool_key(u)
        opened = 0
        while self.pool.idle(key) < n:
            try:
                conn = self._connect(u, timeout or self.timeout)
            except ConnectError:
                break
            self.pool.put(key, conn)
            opened += 1
        return opened

    def close(self):
        """Close the idle connections (at the end of a run)."""
        self.pool.close()

    def get(self, url, timeout=None):
        return self._get.get(url, timeout)


class StaleConnection(Exception):
    """A reused connection failed before any byte of the response: the server had closed it."""


def pool_key(u):
    return (u.scheme, u.hostname, u.port)


def socket_readable(sock):
    """Whether a socket has something to read now (without waiting)."""
    try:
        if hasattr(select, 'poll'):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def idle_alive(sock):
    """Whether an idle connection can carry a request: the server has not closed it, nor sent anything.

    A TLS 1.3 server sends its session tickets after the handshake; they make a connection that was
    opened ahead (DirectTransport.prime) readable, and are read here, as no answer at all.
    """
    if sock is None:
        return False
    if not socket_readable(sock):
        return True
    if ssl is None or not isinstance(sock, ssl.SSLSocket):
        return False
    timeout = sock.gettimeout()
    try:
        sock.settimeout(0)
        sock.recv(READ_SIZE)   # application data or the server's close: not reusable either way
        return False
    except ssl.SSLWantReadError:
        return True            # only TLS records of its own (tickets) were pending
    except (OSError, ValueError):
        return False
    finally:
        try:
            sock.settimeout(timeout)
        except (OSError, ValueError):
            pass


class ConnectionPool:
    """Idle kept-alive connections by (scheme, host, port), the most recently used taken first.

    A connection is in the pool or lent to exactly one request, never both, so the pool holds no more
    connections than the most streams that ran at once. One that is no longer usable (idle_alive: the
    server closed it while it was idle) is dropped when taken.
    """

    def __init__(self):
        self._idle = {}
        self._lock = threading.Lock()

    def take(self, key):
        while True:
            with self._lock:
                conns = self._idle.get(key)
                if not conns:
                    return None
                conn = conns.pop()
            if idle_alive(conn.sock):
                return conn
            conn.close()

    def put(self, key, conn):
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def idle(self, key):
        with self._lock:
            return len(self._idle.get(key, ()))

    def close(self):
        with self._lock:
            conns = [c for group in self._idle.values() for c in group]
            self._idle = {}
        for conn in conns:
            conn.close()


class Lease:
    """One connection lent to one streamed response.

    Calling it closes the connection: for every request that did not end well (an error, a cut, a
    deadline, a cap), whose response is not known to be read to its end. ``keep()``, for one that
    ended with [DONE], reads the rest of the response (the chunked terminator) and pools the connection
    unless the server said ``Connection: close``, the rest did not come at once, or the request's
    deadline has already shut the socket down.
    """

    __slots__ = ('transport', 'key', 'conn', 'resp', 'guard')

    def __init__(self, transport, key, conn, resp, guard):
        self.transport = transport
        self.key = key
        self.conn = conn
        self.resp = resp
        self.guard = guard

    def __call__(self):
        self.resp.close()
        self.conn.close()

    def keep(self):
        try:
            reusable = (self.transport.keep_alive and not self.resp.will_close and self._drain()
                        and (self.guard is None or self.guard.detach()))
        except Exception:  # whatever went wrong, the connection is simply not reused
            reusable = False
        if reusable:
            self.transport.pool.put(self.key, self.conn)
        else:
            self()

    def _drain(self):
        """Read the response to its end, a little and briefly at most; whether it ended cleanly."""
        resp = self.resp
        self.conn.sock.settimeout(min(self.transport.timeout, DRAIN_TIMEOUT_S))
        left = DRAIN_BYTES
        try:
            while not resp.isclosed():
                data = resp.read1(READ_SIZE)
                left -= len(data)
                if not data or left < 0:
                    break
        except (OSError, http.client.HTTPException, ValueError):
            return False
        # a length-delimited body cut short also closes the response: its length left says so
        return resp.isclosed() and not resp.length
