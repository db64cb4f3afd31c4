# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An OpenAI-compatible streaming server of known timing: the "truth" for bench_fidelity.py.

Every request: the first token exactly --ttft-ms after the request has been read, then one token
every --tpot-ms, on absolute deadlines (lateness never accumulates). Token 0 goes alone (prefill);
later tokens go --chunk at a time, each chunk at the deadline of its last token, so that a chunk
of k tokens looks like one speculative step. The number of tokens is max_tokens, or --eos-after
when the request does not set ignore_eos (to show tools that count the requested length).
It honours stream_options.include_usage / continuous_usage_stats as vLLM does.

Deadlines run from the request's arrival, stamped one of two ways (--arrival):
- kernel (default): the kernel's receive timestamp of the request's last byte (SO_TIMESTAMPNS), not when
  this Python process got round to reading it, so its own accept and thread start-up are not charged
  to the client;
- parsed: when this process has parsed the request head, as an ordinary server stamps it (and as the
  independent server of issue 14 did): a server's cost of accepting a fresh connection then shows.
Connections are kept alive (HTTP/1.1) unless the client asks otherwise; /truth counts those that
carried a stream.
One thread per connection sleeping with clock_nanosleep to each deadline: wake-up error is tens of
microseconds, where asyncio's epoll rounds timeouts up to whole milliseconds. The server records
what it actually did; GET /truth returns it (and resets it with ?reset=1), so a client's figures
are compared with measured server behaviour, not only with the configured values.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import struct
import sys
import threading
import time

SO_TIMESTAMPNS = getattr(socket, 'SO_TIMESTAMPNS', 35)

WORDS = ('the quick brown fox jumps over a lazy dog while seven bright stars watch quietly from far above the old stone bridge near the river').split()


class Truth:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.ttft_ns = []
            self.tpot_ns = []
            self.late_ns = []
            self.tokens = 0
            self.requests = 0
            self.connections = 0
            self.first_arrival_ns = None
            self.last_token_ns = None

    def connected(self):
        with self.lock:
            self.connections += 1

    def arrived(self, t):
        with self.lock:
            if self.first_arrival_ns is None or t < self.first_arrival_ns:
                self.first_arrival_ns = t

    def add(self, ttft, tpot, late, tokens, last_ns):
        with self.lock:
            self.last_token_ns = max(self.last_token_ns or 0, last_ns)
            self.ttft_ns.append(ttft)
            if tpot is not None:
                self.tpot_ns.append(tpot)
            self.late_ns.extend(late)
            self.tokens += tokens
            self.requests += 1

    def report(self):
        def mean(v):
            return sum(v) / len(v) / 1e6 if v else None

        with self.lock:
            late = sorted(self.late_ns)
            return {
                'requests': self.requests,
                'connections': self.connections,
                'tokens': self.tokens,
                'first_arrival_ns': self.first_arrival_ns,
                'last_token_ns': self.last_token_ns,
                'ttft_ms_mean': mean(self.ttft_ns),
                'tpot_ms_mean': mean(self.tpot_ns),
                'late_ms_mean': mean(late),
                'late_ms_p99': late[int(0.99 * (len(late) - 1))] / 1e6 if late else None,
                'late_ms_max': late[-1] / 1e6 if late else None,
            }


class Handler(socketserver.StreamRequestHandler):
    rbufsize = 65536
    wbufsize = 0
    cfg = None
    truth = None

    def _recv(self):
        """One recvmsg(); returns (bytes, kernel receive time as perf_counter ns, or None)."""
        data, anc = self.connection.recvmsg(65536, socket.CMSG_SPACE(16))[:2]
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack('qq', raw[:16])
                # kernel stamps are CLOCK_REALTIME; map to perf_counter (CLOCK_MONOTONIC) now
                return data, sec * 1_000_000_000 + nsec - (time.time_ns() - time.perf_counter_ns())
        return data, None

    def read_request(self):
        """Read one request; its arrival is when the kernel received its last byte."""
        buf, stamp = self.leftover, None
        while b'\r\n\r\n' not in buf:
            data, stamp = self._recv()
            if not data:
                return None
            buf += data
        head, rest = buf.split(b'\r\n\r\n', 1)
        lines = head.split(b'\r\n')
        parts = lines[0].split()
        headers = {}
        for h in lines[1:]:
            k, v = (h.decode('latin-1').split(':', 1) + [''])[:2]
            headers[k.strip().lower()] = v.strip()
        parsed = time.perf_counter_ns()
        need = int(headers.get('content-length', '0') or 0)
        while len(rest) < need:
            data, stamp = self._recv()
            if not data:
                return None
            rest += data
        self.leftover = rest[need:]
        if self.cfg.arrival == 'parsed':
            return parts[0], parts[1].decode(), headers, rest[:need], parsed
        now = time.perf_counter_ns()
        return parts[0], parts[1].decode(), headers, rest[:need], stamp if stamp and stamp <= now else now

    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.leftover = b''
        counted = False  # a connection counts once it carries a stream (not the harness's GET /truth)
        while True:
            try:
                req = self.read_request()
            except ConnectionError:
                return  # the client closed with our last bytes unread (a reset): gone, as at a close
            if req is None:
                return
            method, path, headers, body, arrived = req
            keep = headers.get('connection', '').lower() != 'close'
            if method == b'POST' and path in ('/v1/completions', '/v1/chat/completions'):
                if not counted:
                    self.truth.connected()
                    counted = True
                if not self.stream(json.loads(body or b'{}'), arrived, path.endswith('chat/completions'), keep):
                    return
            elif path.startswith('/v1/models'):
                self.send_json({'object': 'list', 'data': [{'id': self.cfg.model, 'object': 'model'}]})
            elif path.startswith('/truth'):
                rep = self.truth.report()
                if 'reset=1' in path:
                    self.truth.reset()
                self.send_json(rep)
            elif path.startswith('/health'):
                self.send_json({})
            else:
                self.send_json({'error': 'not found'}, 404)
            if not keep:
                return

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.wfile.write(b'HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' % (status, len(data)) + data)

    def stream(self, req, arrived, chat, keep):
        """Stream one response; whether the connection is still usable (the client stayed)."""
        cfg = self.cfg
        self.truth.arrived(arrived)
        n = int(req.get('max_tokens') or cfg.tokens)
        if not req.get('ignore_eos') and cfg.eos_after:
            n = min(n, cfg.eos_after)
        opts = req.get('stream_options') or {}
        usage_end = bool(opts.get('include_usage'))
        usage_each = usage_end and bool(opts.get('continuous_usage_stats'))
        ttft, tpot, k = cfg.ttft_ms * 1e6, cfg.tpot_ms * 1e6, cfg.chunk
        rid = 'cmpl-%d' % arrived
        obj = 'chat.completion.chunk' if chat else 'text_completion'
        w = self.wfile.write

        def event(text, sent, finish=None):
            choice = {'index': 0, 'delta': {'content': text}, 'finish_reason': finish} if chat else {'index': 0, 'text': text, 'finish_reason': finish}
            ev = {'id': rid, 'object': obj, 'model': cfg.model, 'choices': [choice]}
            if usage_each:
                ev['usage'] = {'prompt_tokens': 8, 'completion_tokens': sent, 'total_tokens': 8 + sent}
            return b'data: ' + json.dumps(ev, separators=(',', ':')).encode() + b'\n\n'

        def chunk(payload):
            w(b'%x\r\n%s\r\n' % (len(payload), payload))

        w(b'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n' + (b'' if keep else b'Connection: close\r\n') + b'\r\n')
        if chat:
            chunk(
                b'data: '
                + json.dumps(
                    {
                        'id': rid,
                        'object': obj,
                        'model': cfg.model,
                        'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': ''}, 'finish_reason': None}],
                    },
                    separators=(',', ':'),
                ).encode()
                + b'\n\n'
            )
        late = []
        sent = 0
        first_ns = last_ns = None
        # token j is due at arrived + ttft + j * tpot; a chunk goes at its last token's deadline
        groups = [1] + [k] * ((n - 1) // k) + ([(n - 1) % k] if (n - 1) % k else [])
        groups = [g for g in groups if g][:n] if n > 0 else []
        for g in groups:
            due = arrived + ttft + (sent + g - 1) * tpot
            while True:
                now = time.perf_counter_ns()
                if now >= due:
                    break
                time.sleep((due - now) / 1e9)
            text = ''.join(' ' + WORDS[(sent + i) % len(WORDS)] for i in range(g))
            sent += g
            fin = ('length' if sent >= (req.get('max_tokens') or 0) else 'stop') if sent == n else None
            data = event(text, sent, fin)
            # stamped as the write starts: no client can see the token earlier
            t = time.perf_counter_ns()
            try:
                chunk(data)
            except OSError:
                return False
            late.append(t - due)
            if first_ns is None:
                first_ns = t
            last_ns = t
        tail = b''
        if usage_end:
            tail += (
                b'data: '
                + json.dumps(
                    {'id': rid, 'object': obj, 'model': cfg.model, 'choices': [], 'usage': {'prompt_tokens': 8, 'completion_tokens': n, 'total_tokens': 8 + n}}
                ).encode()
                + b'\n\n'
            )
        tail += b'data: [DONE]\n\n'
        if first_ns is not None:
            self.truth.add(first_ns - arrived, (last_ns - first_ns) / (n - 1) if n > 1 else None, late, n, last_ns)
        try:
            chunk(tail)
            w(b'0\r\n\r\n')
        except OSError:
            return False
        return True


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def server_bind(self):
        # accepted sockets inherit it: each request's arrival is the kernel's receive time, so
        # this server's own accept and thread start-up lag is not counted as client error
        self.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        super().server_bind()


def main(argv=None):
    # many streams share one GIL: keep a waiting thread from being held back for 5 ms
    sys.setswitchinterval(0.0002)
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--ttft-ms', type=float, default=50.0)
    ap.add_argument('--tpot-ms', type=float, default=12.0)
    ap.add_argument('--tokens', type=int, default=256, help='when the request sets no max_tokens')
    ap.add_argument('--chunk', type=int, default=1, help='tokens per SSE event after the first')
    ap.add_argument('--eos-after', type=int, default=0, help='stop after N tokens unless the request sets ignore_eos (0: never)')
    ap.add_argument('--model', default='timed-model')
    ap.add_argument(
        '--arrival',
        choices=('kernel', 'parsed'),
        default='kernel',
        help="a request's arrival: the kernel's receive time of its last byte, or when its head is parsed here",
    )
    ap.add_argument('--lifetime', type=float, default=1800, help='exit after this many seconds')
    ap.add_argument('--port-file', help='write the bound port here once listening')
    cfg = ap.parse_args(argv)
    Handler.cfg = cfg
    Handler.truth = Truth()
    srv = Server((cfg.host, cfg.port), Handler)
    port = srv.server_address[1]
    if cfg.port_file:
        with open(cfg.port_file + '.tmp', 'w') as f:
            f.write(str(port))
        import os

        os.replace(cfg.port_file + '.tmp', cfg.port_file)
    print('timed_server listening on %s:%d' % (cfg.host, port), flush=True)
    timer = threading.Timer(cfg.lifetime, srv.shutdown)
    timer.daemon = True
    timer.start()
    srv.serve_forever(poll_interval=0.5)


if __name__ == '__main__':
    main()
