# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real HTTP/1.1 server on 127.0.0.1 that keeps connections alive and counts them.

It answers streaming POSTs on every connection it accepts, one request after another, and records
which connection served which request, so a test can tell a reused connection from a fresh one.
What each request gets is an *action*, chosen by ``script(n, conn, k)`` (the request's number over
the server, its connection's number, its number on that connection, all from 0):
  'ok'            a well-formed SSE stream, chunked, connection kept open
  'close_header'  the same with `Connection: close`, then the server closes
  'close_after'   the same without saying so, then the server closes at once (an idle close)
  'cut_before'    read the request, close without a byte of answer (a stale connection's race)
  'cut_after'     the response head and one event, then close (a stream cut mid-way)
  'error_500'     a complete 500 answer with a Content-Length, connection kept open
  'trickle'       an event every 0.2 s for 30 s, never ending on its own
  'slow_end'      the whole stream and [DONE], then the chunked terminator only 3 s later
  'flood'         events back to back for 30 s (beyond any byte cap)
A TLS server comes from ``context=`` (an ssl.SSLContext for the server side).
"""
from __future__ import annotations

import json
import socket
import threading
import time

TOKENS = 4


def event(text, tokens):
    ev = {'choices': [{'index': 0, 'text': text}],
          'usage': {'prompt_tokens': 3, 'completion_tokens': tokens, 'total_tokens': 3 + tokens}}
    return b'data: ' + json.dumps(ev).encode() + b'\n\n'


def chunk(data):
    return b'%x\r\n%s\r\n' % (len(data), data)


HEAD = b'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n'
STREAM = b''.join(chunk(event(' w', i + 1)) for i in range(TOKENS)) + chunk(b'data: [DONE]\n\n')
END = b'0\r\n\r\n'


class KeepAliveServer:
    """Serve requests by ``script`` (default: every request 'ok'); see the module docstring."""

    def __init__(self, script=None, context=None):
        self.script = script or (lambda n, conn, k: 'ok')
        self.context = context
        self.accepted = 0          # connections accepted
        self.served = []           # (connection number, number on it, action) of every request read
        self.closed = threading.Event()   # set whenever the server closes a connection
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(('127.0.0.1', 0))
        self._sock.listen(64)
        scheme = 'https' if context else 'http'
        self.url = '%s://127.0.0.1:%d' % (scheme, self._sock.getsockname()[1])
        self._conns = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)
        for conn in list(self._conns):
            try:
                conn.close()
            except OSError:
                pass

    def per_connection(self):
        """How many requests each connection served, in the order they were accepted."""
        counts = [0] * self.accepted
        for conn, _k, _action in self.served:
            counts[conn] += 1
        return counts

    def _accept(self):
        while True:
            try:
                conn = self._sock.accept()[0]
            except OSError:
                return
            with self._lock:
                number = self.accepted
                self.accepted += 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn, number):
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            self._conns.append(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(30)
            f = conn.makefile('rb')
            k = 0
            while self._request(f):
                with self._lock:
                    n = len(self.served)
                    action = self.script(n, number, k)
                    self.served.append((number, k, action))
                if not self._answer(conn, action):
                    return
                k += 1
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
            self.closed.set()

    @staticmethod
    def _request(f):
        """Read one request (head and Content-Length body); False at the client's close."""
        line = f.readline()
        if not line:
            return False
        length = 0
        while True:
            h = f.readline()
            if h in (b'\r\n', b'\n', b''):
                break
            name, _sep, value = h.decode('latin-1').partition(':')
            if name.strip().lower() == 'content-length':
                length = int(value.strip())
        f.read(length)
        return True

    @staticmethod
    def _answer(conn, action):
        """Answer one request; whether the connection stays open for the next."""
        if action == 'cut_before':
            return False
        if action == 'error_500':
            body = b'{"error": "overloaded"}'
            conn.sendall(b'HTTP/1.1 500 X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'
                         % (len(body), body))
            return True
        if action == 'close_header':
            conn.sendall(HEAD + b'Connection: close\r\n\r\n' + STREAM + END)
            return False
        conn.sendall(HEAD + b'\r\n')
        if action == 'cut_after':
            conn.sendall(chunk(event(' w', 1)))
            return False
        if action in ('trickle', 'flood'):
            t_end = time.monotonic() + 30
            while time.monotonic() < t_end:
                conn.sendall(chunk(event(' w', 1)))
                if action == 'trickle':
                    time.sleep(0.2)
            return False
        conn.sendall(STREAM)
        if action == 'slow_end':
            time.sleep(3)
        conn.sendall(END)
        return action != 'close_after'
