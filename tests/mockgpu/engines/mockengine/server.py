# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenAI-compatible HTTP front end shared by both mock engines (stdlib ThreadingHTTPServer).

Each request runs in its own thread and paces itself against absolute deadlines
(time.monotonic), so pacing error does not accumulate; the number of requests in
decode at each step sets the batch slow-down.
"""
import hmac
import json
import random
import socket
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import textmodel
from .timing import Decoder


# vLLM 0.33 vllm/entrypoints/serve/middleware/authenticate.py: only these path prefixes need the key
# (/health, /metrics, /version, /ping stay open); OPTIONS is never checked.
VLLM_GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
# SGLang 0.5.23 sglang/srt/utils/auth.py decide_request_auth: every path needs the key except these
# prefixes (so /health_generate is open, /v1/models and /get_server_info are not).
SGLANG_OPEN_PREFIX = ("/health", "/ready", "/metrics")


def bearer_matches(header, keys):
    """`Authorization: Bearer KEY` with KEY one of `keys` (scheme case-insensitive, compared in constant time)."""
    if not header:
        return False
    scheme, _sep, param = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    found = False
    for key in keys:
        found |= hmac.compare_digest(param.encode("utf-8"), key.encode("utf-8"))
    return found


class EngineState:
    """What the handlers need: identity, readiness, timing, stats, faults."""

    def __init__(self, engine, model, served_names, max_model_len, params, spec, stats, faults,
                 max_running, stream_interval=1, log=None, enable_metrics=True, server_info=None, api_keys=None):
        self.engine = engine
        self.model = model
        self.served_names = served_names
        self.max_model_len = max_model_len
        self.params = params
        self.spec = spec
        self.stats = stats
        self.faults = faults
        self.slots = threading.BoundedSemaphore(max(1, max_running))
        self.stream_interval = max(1, int(stream_interval))
        self.log = log
        self.enable_metrics = enable_metrics
        self.server_info = server_info or {}
        self.ready = False
        self.shutting_down = False
        self.eos_range = (64, 768)
        self.fault_rng = random.Random(0)
        self.fault_lock = threading.Lock()
        self.created = int(time.time())
        self.api_keys = [k for k in (api_keys or []) if k]
        self.draining = False  # a sleep with mode=wait lets the requests in flight finish first
        # SGLang's pause_generation: new requests wait until continue_generation; mode=abort ends those in
        # flight (each generation loop compares the epoch it started in).
        self.resumed = threading.Event()
        self.resumed.set()
        self.abort_epoch = 0
        self.park = None  # park.Parker once loaded; its routes answer 404 without one (vLLM: no dev mode)
        # dies_on_request fault: set once the first completion killed the engine core; on_core_death (set by the
        # CLI) ends the EngineCore process, after which the API server exits as with any dead core.
        self.core_dead = False
        self.on_core_death = None

    def needs_key(self, path):
        if not self.api_keys:
            return False
        if self.engine == "vllm":
            return path.startswith(VLLM_GUARDED_PREFIX)
        return not path.startswith(SGLANG_OPEN_PREFIX)


class _Dropped(Exception):
    """The client went away, or the drop_stream_after fault cut the stream."""


def make_server(state, host, port):
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
    server.daemon_threads = True
    server.allow_reuse_address = True
    server.request_queue_size = 1024  # listen() backlog: a benchmark opens many connections at once
    server.server_bind()
    return server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    state = None  # set by make_server

    def log_message(self, fmt, *args):  # uvicorn's access log format
        pass

    def _access(self, code):
        msg = 'INFO:     %s:%d - "%s %s HTTP/1.1" %d' % (self.client_address[0], self.client_address[1],
                                                         self.command, self.path, code)
        if self.state.log:
            try:
                print(msg, flush=True)
            except (OSError, ValueError):
                pass

    # -- plumbing -------------------------------------------------------------
    def _send(self, code, body=b"", ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._access(code)

    def _refused(self, path):
        """401 as both engines' auth middleware answers it (before routing: unknown paths too)."""
        if not self.state.needs_key(path) or bearer_matches(self.headers.get("Authorization"), self.state.api_keys):
            return False
        if self.command == "POST":
            self._read_body()
        self._send(401, b'{"error":"Unauthorized"}')
        return True

    def _error(self, code, message, etype="BadRequestError", param=None):
        self._send(code, {"error": {"message": message, "type": etype, "param": param, "code": code}})

    def _chunk(self, data):
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (OSError, ValueError):
            raise _Dropped()

    def _sse(self, obj):
        self._chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()) + b"\n\n")

    # -- routing --------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        st = self.state
        if self._refused(path):
            return None
        if path in ("/health", "/health_generate", "/ping"):
            if st.ready and not st.shutting_down and not st.core_dead:
                return self._send(200, b"")
            return self._send(503, b"")
        if path == "/version":
            from . import SGLANG_VERSION, VLLM_VERSION
            return self._send(200, {"version": VLLM_VERSION if st.engine == "vllm" else SGLANG_VERSION})
        if path == "/metrics":
            if not st.enable_metrics:
                return self._send(404, {"detail": "Not Found"})
            text = (st.stats.vllm_text if st.engine == "vllm" else st.stats.sglang_text)(st.served_names[0], st.spec is not None)
            return self._send(200, text, "text/plain; version=0.0.4; charset=utf-8")
        if path == "/v1/models":
            return self._send(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": st.created, "owned_by": st.engine,
                 "root": st.model, "parent": None, "max_model_len": st.max_model_len}
                for name in st.served_names]})
        if st.park is not None and self._park_route("GET", path):
            return None
        if st.engine == "sglang" and path in ("/get_server_info", "/server_info"):
            return self._send(200, self._server_info())
        if st.engine == "sglang" and path == "/get_model_info":
            return self._send(200, {"model_path": st.model, "tokenizer_path": st.model, "is_generation": True})
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if self._refused(path):
            return None
        if self.state.park is not None and self._park_route("POST", path):
            return None
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._read_body()
            return self._send(404, {"detail": "Not Found"})
        try:
            body = json.loads(self._read_body() or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as exc:
            return self._error(400, "Invalid JSON body: %s" % exc)
        st = self.state
        if not st.ready or st.shutting_down:
            return self._error(503, "The server is not ready.", "ServiceUnavailableError")
        # SGLang after pause_generation: held in the tokenizer manager until continue_generation.
        st.resumed.wait(3600)
        if st.park is not None and (st.park.parked or st.draining):
            return self._error(503, "The engine is parked (sleeping).", "ServiceUnavailableError")
        if st.faults.get("dies_on_request") or st.core_dead:
            return self._core_died(bool(body.get("stream", False)))
        if self._fault_5xx():
            return
        self._completion(body, chat=path.endswith("chat/completions"))

    # What a real vLLM 0.32 answered when its engine core died on the first request (a draft head of the
    # wrong shape, measured with the real tier: docs/real-engine.md): that request's stream HTTP 200 with the
    # error as an event and [DONE]; every later request 500 with the same error; /health 503; the server
    # gone about 2 s later.
    _CORE_DIED = "EngineCore encountered an issue. See stack trace (above) for the root cause."

    def _core_died(self, stream):
        st = self.state
        first, st.core_dead = not st.core_dead, True
        if first and st.on_core_death is not None:
            st.on_core_death()
        if not (first and stream):
            return self._error(500, self._CORE_DIED, "InternalServerError")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)
        try:
            self._sse({"error": {"message": self._CORE_DIED, "type": "InternalServerError", "param": None,
                                 "code": 500}})
            self._sse(b"[DONE]")
            self._chunk(b"")
        except _Dropped:
            pass
        return None

    # -- parking (park.py) --------------------------------------------------------
    def _park_route(self, method, path):
        """Answer a park route and return True, or return False for any other path."""
        st = self.state
        query = urllib.parse.parse_qs(self.path.split("?", 1)[1] if "?" in self.path else "")
        if st.engine == "vllm":
            if method == "POST" and path == "/sleep":
                self._read_body()
                try:
                    level = int((query.get("level") or ["1"])[0])
                except ValueError:
                    level = -1
                mode = (query.get("mode") or ["abort"])[0]
                if mode not in ("abort", "wait", "keep"):
                    self._send(422, {"detail": [{"type": "literal_error", "loc": ["query", "mode"],
                                                 "msg": "Input should be 'abort', 'wait' or 'keep'"}]})
                    return True
                if not 0 <= level <= 2:
                    self._send(422, {"detail": [{"type": "less_than_equal", "loc": ["query", "level"],
                                                 "msg": "Input should be between 0 and 2"}]})
                    return True
                if mode == "wait":
                    self._drain()
                st.park.park(level)
                st.draining = False
                self._send(200, {"status": "sleeping", "level": level})
                return True
            if method == "POST" and path == "/wake_up":
                self._read_body()
                tags = query.get("tags") or None
                if not st.park.wake():
                    self._send(500, {"error": {"message": "wake_up failed: a worker died", "type": "InternalServerError"}})
                    return True
                self._send(200, {"status": "awake", "tags": tags})
                return True
            if method == "GET" and path == "/is_sleeping":
                self._send(200, {"is_sleeping": st.park.parked})
                return True
            return False
        if method == "POST" and path == "/pause_generation":
            mode = (json.loads(self._read_body() or b"{}") or {}).get("mode", "abort")
            st.resumed.clear()
            if mode == "abort":
                st.abort_epoch += 1
                while st.stats.running > 0:
                    time.sleep(0.02)
            self._send(200, {"message": "Generation paused successfully.", "status": "ok"})
            return True
        if method == "POST" and path == "/continue_generation":
            self._read_body()
            st.resumed.set()
            self._send(200, {"message": "Generation continued successfully.", "status": "ok"})
            return True
        if path in ("/release_memory_occupation", "/resume_memory_occupation"):
            self._read_body()
            if path.startswith("/release") and st.stats.running > 0 and st.resumed.is_set():
                # The scheduler asserts it is idle; a busy one dies of it, and the server with it.
                st.park.fail("AssertionError: release_memory_occupation should be called only when server is idle.")
                self._send(500, {"error": {"message": "release_memory_occupation: the scheduler died"}})
                return True
            if path.startswith("/release"):
                st.park.park(1)
            elif not st.park.wake():
                self._send(500, {"error": {"message": "resume_memory_occupation failed: a scheduler died"}})
                return True
            self._send(200, b"null")
            return True
        return False

    def _drain(self, timeout=600.0):
        """mode=wait: refuse new requests (the mock's choice: 503), let those in flight finish."""
        st = self.state
        st.draining = True  # until parked: park() is called right after
        deadline = time.monotonic() + timeout
        while st.stats.running > 0 and time.monotonic() < deadline:
            time.sleep(0.02)

    def _read_body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _fault_5xx(self):
        prob = float(self.state.faults.get("http_5xx") or 0)
        if prob <= 0:
            return False
        with self.state.fault_lock:
            hit = self.state.fault_rng.random() < prob
            code = self.state.fault_rng.choice((500, 503))
        if hit:
            self._error(code, "Internal Server Error" if code == 500 else "Service Unavailable",
                        "InternalServerError" if code == 500 else "ServiceUnavailableError")
        return hit

    def _server_info(self):
        st = self.state
        with st.stats.lock:
            internal = {"last_gen_throughput": st.stats.gauges()[0], "memory_usage": {}, "load": st.stats.running}
            if st.spec is not None:
                internal["avg_spec_accept_length"] = st.stats.avg_accept_length()
        from . import SGLANG_VERSION
        return dict(st.server_info, internal_states=[internal], version=SGLANG_VERSION)

    # -- completions ----------------------------------------------------------
    def _prompt(self, body, chat):
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise ValueError("messages must be a non-empty list")
            parts = []
            for m in msgs:
                content = m.get("content") if isinstance(m, dict) else None
                if isinstance(content, list):  # content parts
                    content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
                parts.append(str(content or ""))
            text = "\n".join(parts)
            # the chat template adds a few tokens per message
            return text, textmodel.count_tokens(text) + 3 * len(msgs) + 3
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return " ".join(str(t) for t in prompt), len(prompt)
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string (one prompt per request in the mock)")
        return prompt, textmodel.count_tokens(prompt)

    def _completion(self, body, chat):
        st = self.state
        model = body.get("model")
        if model is not None and model not in st.served_names and st.engine == "vllm":
            return self._error(404, "The model `%s` does not exist." % model, "NotFoundError", "model")
        try:
            text, prompt_tokens = self._prompt(body, chat)
        except ValueError as exc:
            return self._error(400, str(exc))
        max_tokens = body.get("max_completion_tokens") if chat else None
        max_tokens = max_tokens if max_tokens is not None else body.get("max_tokens")
        if max_tokens is None:
            max_tokens = max(1, st.max_model_len - prompt_tokens) if chat else 16
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return self._error(400, "max_tokens must be at least 1, got %s." % max_tokens)
        if prompt_tokens + max_tokens > st.max_model_len:
            return self._error(400, "This model's maximum context length is %d tokens. However, you requested %d "
                               "tokens (%d in the messages, %d in the completion). Please reduce the length of "
                               "the messages or completion." % (st.max_model_len, prompt_tokens + max_tokens,
                                                                prompt_tokens, max_tokens))
        ignore_eos = bool(body.get("ignore_eos", False))
        stream = bool(body.get("stream", False))
        opts = body.get("stream_options") or {}
        rng = textmodel.request_rng(text, body.get("seed"))
        eos_at = textmodel.eos_position(text, *st.eos_range)
        limit = max_tokens if ignore_eos else min(max_tokens, eos_at)
        finish = "stop" if (not ignore_eos and eos_at <= max_tokens) else "length"
        req = _Request(self, st, chat, body, stream, opts, prompt_tokens)
        gen = _Generation(st, Decoder(st.params, st.spec, text, rng, collapse_above=st.faults.get("collapse_above")),
                          rng, prompt_tokens, limit, finish,
                          _Text(text, body.get("seed"), st.faults), prompt=text)
        gen.run(req)


class _Text:
    """The output text of one request: token i is the same whatever the engine's speculation (lossless, as a real
    engine's greedy output), from a stream of its own so chunking (tokens per step) cannot change it.

    Fault ``diverge_after`` N: from output token N on, every token differs from the one the engine writes without
    the fault, for the prompts ``diverge_share`` (default 1, all) picks by their hash: a candidate that is not
    lossless (a broken draft's tokens accepted, a lossy rejection sampler).
    """

    def __init__(self, prompt, seed, faults):
        self.rng = textmodel.request_rng(prompt, "text/%s" % (seed,))
        self.position = 0
        after = faults.get("diverge_after")
        share = float(faults.get("diverge_share", 1.0))
        self.diverge_at = int(after) if after is not None and textmodel.prompt_share(prompt) < share else None
        self.other = textmodel.request_rng(prompt, "diverge/%s" % (seed,))

    def words(self, count):
        out = []
        for _i in range(count):
            word = textmodel.words(self.rng, 1)[0]
            if self.diverge_at is not None and self.position >= self.diverge_at:
                word = textmodel.other_word(word, self.other)
            self.position += 1
            out.append(word)
        return out


class _Request:
    """Writes one response: SSE chunks (stream) or one JSON body at the end.

    Chunk layout (keys and their order) as the engines serialise them: vLLM 0.33
    `completion/serving.py` (`model_dump_json(exclude_unset=True)`, the usage chunk with
    `exclude_none=True`) and `chat_completion/serving.py` (a first `role` chunk with empty content);
    SGLang 0.5.23 `serving_completions.py` and `sse_utils.build_sse_content` (chat).
    """

    def __init__(self, handler, state, chat, body, stream, opts, prompt_tokens):
        self.h = handler
        self.st = state
        self.vllm = state.engine == "vllm"
        self.chat = chat
        self.stream = stream
        self.include_usage = bool(opts.get("include_usage"))
        # vLLM's should_include_usage: continuous stats only together with include_usage;
        # SGLang's: continuous_usage_stats on its own.
        self.continuous_usage = bool(opts.get("continuous_usage_stats")) and (self.include_usage or not self.vllm)
        self.model = body.get("model") or state.served_names[0]
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.prompt_tokens = prompt_tokens
        self.text = []
        self.drop_after = state.faults.get("drop_stream_after")
        self.sent_tokens = 0
        self.role_sent = False

    def _usage(self, completion, details=False):
        if self.vllm:
            usage = {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
                     "completion_tokens": completion}
            if details:
                usage["completion_tokens_details"] = None
            return usage
        return {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
                "completion_tokens": completion, "prompt_tokens_details": None, "reasoning_tokens": 0,
                "completion_tokens_details": None}

    def _head(self):
        return {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.model}

    def _role_chunk(self):
        """The chat stream's first chunk: the role, no text, completion_tokens 0."""
        obj = self._head()
        if self.vllm:
            obj["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                               "finish_reason": None}]
            if self.continuous_usage:
                obj["usage"] = self._usage(0, details=True)
            obj.update(prompt_token_ids=None, prompt_text=None)
        else:
            obj["choices"] = [{"index": 0, "delta": {"reasoning_content": None, "role": "assistant", "content": ""},
                               "logprobs": None, "finish_reason": None, "matched_stop": None}]
        return obj

    def _chunk_obj(self, text, finish, completion):
        obj = self._head()
        if self.vllm and self.chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = None
            choice["token_ids"] = None
            if finish is not None:
                choice["weight_versions"] = None
        elif self.vllm:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None,
                      "prompt_token_ids": None, "token_ids": None, "weight_versions": None}
        elif self.chat:
            choice = {"index": 0, "delta": {"reasoning_content": None, "content": text}, "logprobs": None,
                      "finish_reason": finish, "matched_stop": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        obj["choices"] = [choice]
        if self.continuous_usage:
            obj["usage"] = self._usage(completion, details=self.chat)
        elif not self.vllm and not self.chat:
            obj["usage"] = None  # SGLang's model_dump_json() keeps the unset usage
        if self.vllm:
            obj["kv_transfer_params"] = None
        return obj

    def _usage_chunk(self, completion):
        obj = self._head()
        obj["choices"] = []
        if self.vllm:
            obj["usage"] = self._usage(completion)
        else:  # exclude_none=True
            obj["usage"] = {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
                            "completion_tokens": completion, "reasoning_tokens": 0}
        return obj

    def begin(self):
        if self.stream:
            h = self.h
            h.send_response(200)
            h.send_header("content-type", "text/event-stream; charset=utf-8")
            h.send_header("transfer-encoding", "chunked")
            h.send_header("cache-control", "no-cache")
            h.end_headers()
            h._access(200)

    def emit(self, tokens, finish, completion_so_far):
        """Send the tokens of one engine step (several under speculation) as one chunk."""
        self.text.extend(tokens)
        if not self.stream:
            return
        if self.drop_after is not None and self.sent_tokens >= int(self.drop_after):
            self._cut()
        if self.chat and not self.role_sent:
            self.role_sent = True
            self.h._sse(self._role_chunk())
        self.h._sse(self._chunk_obj("".join(tokens), finish, completion_so_far))
        self.sent_tokens = completion_so_far

    def _cut(self):
        """drop_stream_after fault: close the socket mid-stream, no terminating chunk, no [DONE]."""
        self.h.close_connection = True
        try:
            self.h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise _Dropped()

    def finish(self, completion, finish):
        if self.stream:
            if self.drop_after is not None and self.sent_tokens >= int(self.drop_after):
                self._cut()
            if self.include_usage:
                self.h._sse(self._usage_chunk(completion))
            self.h._sse(b"[DONE]")
            self.h._chunk(b"")
            return
        text = "".join(self.text)
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                      "logprobs": None, "finish_reason": finish}
            obj = {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                   "choices": [choice], "usage": self._usage(completion)}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            obj = {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                   "choices": [choice], "usage": self._usage(completion)}
        if self.drop_after is not None and completion >= int(self.drop_after):
            self._cut()
        self.h._send(200, obj)


class _Generation:
    """Prefill then decode steps for one request, paced to absolute deadlines."""

    def __init__(self, state, decoder, rng, prompt_tokens, limit, finish, text, prompt=""):
        self.st = state
        self.prompt = prompt
        self.dec = decoder
        self.rng = rng
        self.text = text
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        self.finish = finish

    @staticmethod
    def _sleep_until(deadline):
        left = deadline - time.monotonic()
        if left > 0:
            time.sleep(left)

    def run(self, req):
        st, stats = self.st, self.st.stats
        arrival = time.monotonic()
        with stats.lock:
            stats.waiting += 1
        st.slots.acquire()
        with stats.lock:
            stats.waiting -= 1
            stats.running += 1
            stats.prompt_tokens += self.prompt_tokens
            stats.record_prefix(self.prompt, self.prompt_tokens, bool(st.faults.get("prefix_cache_collapse")))
        produced = 0
        reason = "abort"
        epoch = st.abort_epoch
        try:
            req.begin()
            deadline = time.monotonic() + self.dec.prefill_seconds(self.prompt_tokens)
            self._sleep_until(deadline)
            with stats.lock:
                stats.ttft.observe(time.monotonic() - arrival)
                stats.record_tokens(1)
            produced = 1
            # The decoder's draws stay as they were when the text came from its stream (timing unchanged).
            textmodel.words(self.rng, 1)
            pending = self.text.words(1)
            first = last = time.monotonic()
            while True:
                if st.abort_epoch != epoch:  # pause_generation(mode=abort)
                    req.finish(produced, "abort")
                    break
                done = produced >= self.limit
                if pending and (done or len(pending) >= st.stream_interval):
                    req.emit(pending, self.finish if done else None, produced)
                    pending = []
                if done:
                    break
                with stats.lock:
                    running = stats.running
                seconds, accepted = self.dec.step(running)
                if st.park is not None and st.park.draft_lost:  # fault draft_lost_on_wake: every draft rejected
                    accepted = 0
                emit = min(1 + accepted, self.limit - produced)
                deadline += seconds
                self._sleep_until(deadline)
                with stats.lock:
                    if self.dec.spec:
                        stats.record_spec_step(self.dec.spec.depth, emit - 1)
                    stats.record_tokens(emit)
                    now = time.monotonic()
                    stats.itl.observe(now - last)
                    last = now
                produced += emit
                textmodel.words(self.rng, emit)
                pending.extend(self.text.words(emit))
            if st.abort_epoch != epoch:
                return
            req.finish(produced, self.finish)
            reason = self.finish
            with stats.lock:
                stats.e2e.observe(time.monotonic() - arrival)
                if produced > 1:
                    stats.tpot.observe((last - first) / (produced - 1))
        except (_Dropped, OSError):  # the client went away (or the drop fault cut it)
            pass
        finally:
            with stats.lock:
                stats.running -= 1
                stats.success[reason] = stats.success.get(reason, 0) + 1
            st.slots.release()
