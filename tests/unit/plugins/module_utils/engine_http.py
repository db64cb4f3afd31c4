# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real HTTP server on 127.0.0.1 that answers like an engine's API, scripted per path.

Used by the readiness tests: the code under test talks real HTTP (ansible's open_url) to it.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Reply:
    def __init__(self, status=200, body=b"", delay=0.0, on_request=None):
        self.status = status
        self.body = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        self.delay = delay
        self.on_request = on_request  # called while serving, e.g. to "kill" the unit


def models(*ids):
    return {"object": "list", "data": [{"id": i, "object": "model", "root": i} for i in ids]}


class EngineHTTP:
    """Serve scripted replies: ``script[path]`` is a list consumed in order; the last one repeats."""

    def __init__(self, script):
        self.script = {path: list(replies) for path, replies in script.items()}
        self.requests = []  # (path, headers dict)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                outer.requests.append((self.path, dict(self.headers)))
                replies = outer.script.get(self.path)
                if not replies:
                    reply = Reply(404, b'{"detail":"Not Found"}')
                else:
                    reply = replies.pop(0) if len(replies) > 1 else replies[0]
                if reply.on_request:
                    reply.on_request()
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def paths(self):
        return [p for p, _h in self.requests]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def closed_port_url():
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port


class FakeSystemctl:
    """``run_command`` stand-in: ``systemctl show`` from a property dict, ``journalctl`` from a list."""

    def __init__(self, journal=None, journal_rc=0, **props):
        self.journal = journal or []  # dicts as journalctl -o json prints them
        self.journal_rc = journal_rc
        self.props = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running",
                      "Result": "success", "NRestarts": "0", "MainPID": "4242", "ExecMainStatus": "0",
                      "ExecMainCode": "0", "ExecMainStartTimestampMonotonic": "0"}
        self.props.update({k: str(v) for k, v in props.items()})
        self.calls = []

    def set(self, **props):
        self.props.update({k: str(v) for k, v in props.items()})

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        if argv[0] == "journalctl":
            return self.journal_rc, "".join(json.dumps(e) + "\n" for e in self.journal), ""
        assert argv[:2] == ["systemctl", "show"], argv
        wanted = argv[3].split("=", 1)[1].split(",")
        out = "".join("%s=%s\n" % (k, self.props.get(k, "")) for k in wanted)
        return 0, out, ""
