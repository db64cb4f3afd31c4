# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real HTTP server on 127.0.0.1 that streams scripted SSE responses, byte for byte.

Each POST is answered by a *plan*: a list of steps run in order on the raw socket, so a test decides
exactly where HTTP chunks and SSE events split, how long each pause is, and when the connection dies:
  ('status', code, body)   a complete non-streaming reply (e.g. 500) and close
  ('head',)                the 200 header of a chunked text/event-stream
  ('chunk', bytes)         one HTTP chunk holding these bytes
  ('sleep', seconds)       pause
  ('end',)                 the terminating zero-length chunk
  ('close',)               close the socket now (a cut stream if no 'end' came first)
  ('trickle', bytes, gap, seconds)  one HTTP chunk of these bytes every gap seconds, for at most seconds
  ('flood', bytes, seconds)         HTTP chunks of these bytes back to back, for at most seconds
The last two end early, quietly, when the client goes away (as a hostile server would not).
GET paths answer from `gets` (path -> (status, body) or a callable returning one).
"""
from __future__ import annotations

import json
import socket
import threading
import time


def completion_event(text, tokens=None, chat=False, finish=None):
    """One SSE event like vLLM's; tokens adds the running usage (continuous_usage_stats)."""
    choice = ({'index': 0, 'delta': {'content': text}, 'finish_reason': finish} if chat
              else {'index': 0, 'text': text, 'finish_reason': finish})
    ev = {'id': 'cmpl-1', 'object': 'chat.completion.chunk' if chat else 'text_completion',
          'model': 'm', 'choices': [choice]}
    if tokens is not None:
        ev['usage'] = {'prompt_tokens': 5, 'completion_tokens': tokens, 'total_tokens': 5 + tokens}
    return b'data: ' + json.dumps(ev).encode() + b'\n\n'


def usage_event(tokens):
    return (b'data: ' + json.dumps({'id': 'cmpl-1', 'choices': [], 'usage': {
        'prompt_tokens': 5, 'completion_tokens': tokens, 'total_tokens': 5 + tokens}}).encode()
        + b'\n\n')


DONE = b'data: [DONE]\n\n'


def simple_plan(n, per_chunk=1, usage=True, continuous=False, gap=0.0, first_delay=0.0):
    """A well-formed stream of n tokens, per_chunk tokens per event after the first."""
    plan = [('head',), ('sleep', first_delay)]
    sent = 0
    sizes = [1] + [per_chunk] * ((n - 1) // per_chunk) + ([(n - 1) % per_chunk] if (n - 1) % per_chunk else [])
    for i, k in enumerate(s for s in sizes if s):
        if i:
            plan.append(('sleep', gap))
        sent += k
        plan.append(('chunk', completion_event(' w' * k, sent if continuous else None)))
    if usage:
        plan.append(('chunk', usage_event(n)))
    plan += [('chunk', DONE), ('end',), ('close',)]
    return plan


class SSEServer:
    """Serve `plans` (a list consumed in order, the last repeating, or a callable(body) -> plan)."""

    def __init__(self, plans, gets=None):
        self.plans = plans
        self.gets = dict(gets or {})
        self.posts = []      # (path, headers, parsed JSON body)
        self.get_paths = []
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(('127.0.0.1', 0))
        self._sock.listen(64)
        self.url = 'http://127.0.0.1:%d' % self._sock.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)

    def _accept(self):
        while not self._stop:
            try:
                conn = self._sock.accept()[0]
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _next_plan(self, body):
        with self._lock:
            if callable(self.plans):
                return self.plans(body)
            if len(self.plans) > 1:
                return self.plans.pop(0)
            return self.plans[0]

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30)
        try:
            f = conn.makefile('rb')
            line = f.readline()
            if not line:
                return
            method, path = line.split()[:2]
            headers = {}
            while True:
                h = f.readline()
                if h in (b'\r\n', b'\n', b''):
                    break
                k, v = (h.decode('latin-1').split(':', 1) + [''])[:2]
                headers[k.strip().lower()] = v.strip()
            body = f.read(int(headers.get('content-length', 0) or 0))
            path = path.decode()
            if method == b'GET':
                self.get_paths.append(path)
                reply = self.gets.get(path, (404, {'detail': 'Not Found'}))
                if callable(reply):
                    reply = reply()
                self._reply(conn, *reply)
                return
            obj = json.loads(body or b'{}')
            with self._lock:
                self.posts.append((path, headers, obj))
            self._run(conn, self._next_plan(obj))
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    @staticmethod
    def _reply(conn, status, body, ctype=None):
        if isinstance(body, (dict, list)):
            body, ctype = json.dumps(body).encode(), ctype or 'application/json'
        elif isinstance(body, str):
            body = body.encode()
        conn.sendall(b'HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n'
                     % (status, (ctype or 'text/plain').encode(), len(body)) + body)

    def _run(self, conn, plan):
        for step in plan:
            op = step[0]
            if op == 'status':
                self._reply(conn, step[1], step[2])
                return
            if op == 'head':
                conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n'
                             b'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n')
            elif op == 'chunk':
                conn.sendall(b'%x\r\n%s\r\n' % (len(step[1]), step[1]))
            elif op == 'sleep':
                if step[1]:
                    time.sleep(step[1])
            elif op == 'end':
                conn.sendall(b'0\r\n\r\n')
            elif op == 'close':
                return
            elif op in ('trickle', 'flood'):
                gap, seconds = (step[2], step[3]) if op == 'trickle' else (0.0, step[2])
                t_end = time.monotonic() + seconds
                frame = b'%x\r\n%s\r\n' % (len(step[1]), step[1])
                while time.monotonic() < t_end:
                    conn.sendall(frame)
                    if gap:
                        time.sleep(gap)


def closed_port_url():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return 'http://127.0.0.1:%d' % port
