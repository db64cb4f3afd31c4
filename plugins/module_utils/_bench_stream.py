# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One streaming request of the benchmark: its body, its deadline, its socket reads, its SSE parsing.

- While a stream runs the worker only reads: one ``read1()`` per socket read, a perf_counter_ns()
  stamp right after it, the bytes kept. SSE events and JSON are parsed after the stream has ended
  (``finish``), so no parsing sits between a byte's arrival and its timestamp.
- Every request is bounded: ``timeout`` per socket read (a stall), a deadline per request and per run
  (a ``Watchdog`` thread shuts the socket down when one passes, so a server that trickles a token
  within every stall limit still ends), ``max_bytes`` kept per request and ``max_event_bytes`` per SSE
  event (an endless line is abandoned as ``oversize``, not kept).
- Token counts come from the server's ``usage`` (``stream_options.include_usage``); with
  ``continuous_usage_stats`` (vLLM, SGLang) each chunk carries the running count, which gives the
  tokens per chunk and so the per-token latency under speculation.
- Every failure, also an unexpected exception of ours or of the transport, ends as an error kind on
  the request's result (``client_error`` for the unexpected), never as a traceback.
"""
from __future__ import annotations

import http.client
import json
import math
import re
import socket
import threading
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

from ansible_collections.llmops.specdec.plugins.module_utils import _http

EVENT_SEP = re.compile(rb'\r?\n\r?\n')
READ_SIZE = 65536
# An SSE event (the bytes between two blank lines) longer than this is abandoned: a token event is
# a few hundred bytes, so only a broken or hostile server sends one this long.
MAX_EVENT_BYTES = 1024 * 1024
# Bytes kept per request: a fixed allowance plus a generous per-token one (an event with its
# running usage is ~300 bytes), so memory stays in proportion to the request asked for.
BASE_REQUEST_BYTES = 1024 * 1024
BYTES_PER_TOKEN = 4096
DONE_TAILS = (b'[DONE]\n\n', b'[DONE]\r\n\r\n')


def max_request_bytes(max_tokens):
    """Bytes one request of ``max_tokens`` may keep before it is abandoned as ``oversize``."""
    return BASE_REQUEST_BYTES + BYTES_PER_TOKEN * max(1, int(max_tokens or 1))


# --------------------------------------------------------------------------- request bodies and URLs

def request_body(api, model, prompt, max_tokens, temperature=0.0, ignore_eos=True,
                 chunk_usage=True):
    """The JSON body of one streaming request, as bytes."""
    body = {'model': model, 'max_tokens': max_tokens, 'temperature': temperature, 'stream': True,
            'stream_options': {'include_usage': True}}
    if chunk_usage:
        body['stream_options']['continuous_usage_stats'] = True
    if ignore_eos:
        body['ignore_eos'] = True
    if api == 'chat':
        body['messages'] = [{'role': 'user', 'content': prompt}]
    else:
        body['prompt'] = prompt
    return json.dumps(body).encode('utf-8')


def endpoint(base_url, api):
    return _http.server_root(base_url) + ('/v1/chat/completions' if api == 'chat' else '/v1/completions')


# --------------------------------------------------------------------------- deadlines

def _shutdown(sock):
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):
        pass  # already closed, or an SSL socket mid-teardown: the read ends either way


class Guard:
    """The deadline of one request; expired by its Watchdog, which then shuts its socket down."""

    __slots__ = ('watchdog', 'deadline_ns', 'reason', 'expired', 'sock')

    def __init__(self, watchdog, deadline_ns, reason):
        self.watchdog = watchdog
        self.deadline_ns = deadline_ns
        self.reason = reason          # 'request_timeout' or 'deadline' (the run's)
        self.expired = False
        self.sock = None

    def attach(self, sock):
        """The request's socket, once it has one; shut down at once if the deadline already passed."""
        with self.watchdog.cond:
            self.sock = sock
            late = self.expired
        if late:
            _shutdown(sock)

    def detach(self):
        """Take the socket back from the deadline, to reuse it; False if the deadline already shut it down."""
        with self.watchdog.cond:
            if self.expired:
                return False
            self.sock = None
            return True

    def timeout(self, stall):
        """A socket timeout for a blocking step: the stall limit, or less when the deadline is nearer."""
        left = (self.deadline_ns - self.watchdog.clock()) / 1e9
        return max(0.001, min(stall, left))

    def kind(self):
        """The error kind when the deadline has passed ('request_timeout' or 'deadline'), else None."""
        if self.expired or self.watchdog.clock() >= self.deadline_ns:
            return self.reason
        return None

    def detail(self, kept_bytes):
        w = self.watchdog
        if self.reason == 'deadline':
            return '%s while the request ran (%d bytes received)' % (w.run_end_why(), kept_bytes)
        return 'request_timeout: not complete %g s after it started (%d bytes received)' % (w.request_timeout_s, kept_bytes)


class Watchdog:
    """Ends requests past their deadline: one thread per run, asleep until the nearest deadline.

    A request's deadline is ``request_timeout_s`` after it starts, or the run's deadline when that
    comes first. At the deadline the request's socket is shut down, so its blocked read returns at
    once and the request counts ``request_timeout`` or ``deadline``. The thread is woken only when a
    new deadline is nearer than the one it sleeps towards, which at a fixed request_timeout happens
    only when no request is running: request starts pay a lock, not a thread switch.
    """

    def __init__(self, request_timeout_s, run_timeout_s=None, clock=time.perf_counter_ns):
        self.clock = clock
        self.request_timeout_s = request_timeout_s
        self.run_timeout_s = run_timeout_s
        self.run_deadline_ns = (clock() + int(run_timeout_s * 1e9)) if run_timeout_s else None
        self.cond = threading.Condition()
        self._active = set()
        self._wake_ns = None
        self._stopped = False
        self.ended = None             # why end_run() ended the run before run_timeout, or None
        self._thread = threading.Thread(target=self._loop, name='spec-bench-watchdog', daemon=True)
        self._thread.start()

    def run_left_s(self):
        """Seconds left of the run (None without a run deadline)."""
        if self.run_deadline_ns is None:
            return None
        return (self.run_deadline_ns - self.clock()) / 1e9

    def run_over(self):
        return self.run_deadline_ns is not None and self.clock() >= self.run_deadline_ns

    def bound(self, timeout):
        """``timeout`` cut to what is left of the run (at least 1 ms), for a GET between levels."""
        left = self.run_left_s()
        return timeout if left is None else max(0.001, min(timeout, left))

    def guard(self):
        deadline, reason = self.clock() + int(self.request_timeout_s * 1e9), 'request_timeout'
        if self.run_deadline_ns is not None and self.run_deadline_ns <= deadline:
            deadline, reason = self.run_deadline_ns, 'deadline'
        g = Guard(self, deadline, reason)
        with self.cond:
            self._active.add(g)
            if self._wake_ns is None or deadline < self._wake_ns:
                self.cond.notify()
        return g

    def release(self, guard):
        with self.cond:
            self._active.discard(guard)

    def run_end_why(self):
        """What ended (or ends) the run: ``end_run``'s reason, or the run_timeout."""
        if self.ended:
            return self.ended
        return 'run_timeout of %g s reached' % self.run_timeout_s if self.run_timeout_s else 'run ended'

    def end_run(self, why='run ended early'):
        """End the run now, from another thread (the guard's lease ran out): the run's deadline becomes now,
        so the requests running are ended and those not started are not sent, as at ``run_timeout``."""
        with self.cond:
            self.ended = self.ended or why
            now = self.clock()
            if self.run_deadline_ns is None or self.run_deadline_ns > now:
                self.run_deadline_ns = now
            for g in self._active:
                g.deadline_ns, g.reason = min(g.deadline_ns, now), 'deadline'
            self.cond.notify()

    def stop(self):
        with self.cond:
            self._stopped = True
            self.cond.notify()
        self._thread.join(5)

    def _loop(self):
        with self.cond:
            while not self._stopped:
                now = self.clock()
                for g in [g for g in self._active if g.deadline_ns <= now]:
                    self._active.discard(g)
                    g.expired = True
                    _shutdown(g.sock)
                self._wake_ns = min((g.deadline_ns for g in self._active), default=None)
                self.cond.wait(None if self._wake_ns is None else max(0.0, (self._wake_ns - now) / 1e9))


# --------------------------------------------------------------------------- one request

class RequestResult:
    """Raw timings of one request (ns since its start) and what the server said."""

    __slots__ = ('ok', 'error', 'detail', 'start_ns', 'ttft_ns', 'last_token_ns', 'end_ns',
                 'output_tokens', 'tokens_source', 'chunk_times_ns', 'chunk_tokens',
                 'prompt_tokens', 'chunks', 'reads', 'done', 'kept_bytes', 'text', 'prompt')

    def __init__(self):
        self.ok = False
        self.error = None
        self.detail = None
        self.start_ns = None         # perf_counter_ns when sent; None for a request never started
        self.ttft_ns = None
        self.last_token_ns = None
        self.end_ns = None
        self.output_tokens = None
        self.tokens_source = None
        self.chunk_times_ns = []     # arrival of every token-bearing event, ns after start
        self.chunk_tokens = None     # tokens in each of those events, when the server says
        self.prompt_tokens = None
        self.chunks = 0
        self.reads = None            # raw (t_ns, bytes) socket reads until parsed
        self.done = False
        self.kept_bytes = 0          # bytes read from the response body
        self.text = None             # the text the stream carried, in pieces (parse_stream), for _bench_outputs
        self.prompt = None           # index of the prompt sent (in the run's prompts), set by the closed loop

    def fail(self, kind, detail):
        self.ok = False
        self.error = kind
        self.detail = detail[:300] if detail else detail
        return self


def not_started(detail):
    """The result of a measured request that the run's deadline left unsent."""
    return RequestResult().fail('deadline', detail)


def client_error(exc):
    """The result of a request that an unexpected exception (ours, or the transport's) ended."""
    result = RequestResult()
    result.start_ns = time.perf_counter_ns()
    result.end_ns = 0
    return result.fail('client_error', 'unexpected %s: %s' % (type(exc).__name__, exc))


def run_request(transport, url, body, parse=True, watchdog=None, max_bytes=None,
                max_event_bytes=MAX_EVENT_BYTES):
    """Send one streaming request and measure it. Never raises for anything but BaseException.

    With parse=False the raw reads are kept on the result and finish() must be called later:
    the closed loop defers parsing until the level is over, so that no stream's bookkeeping holds
    the GIL while another stream's tokens arrive. ``watchdog`` gives the request its deadline;
    ``max_bytes`` (default: for 256 tokens) and ``max_event_bytes`` bound what it keeps.
    """
    guard = watchdog.guard() if watchdog is not None else None
    try:
        result = _stream(transport, url, body, guard, max_bytes or max_request_bytes(256), max_event_bytes)
    except Exception as exc:  # a bug of ours or of the transport: counted, never a traceback
        result = client_error(exc)
    finally:
        if guard is not None:
            watchdog.release(guard)
    if result.start_ns is None:
        result.start_ns = time.perf_counter_ns()
    if result.end_ns is None:
        result.end_ns = time.perf_counter_ns() - result.start_ns
    if parse:
        finish(result)
    return result


def _stream(transport, url, body, guard, max_bytes, max_event_bytes):
    result = RequestResult()
    reads = []
    result.reads = reads
    clock = time.perf_counter_ns
    start = clock()
    result.start_ns = start
    try:
        if guard is not None and getattr(transport, 'guarded', False):
            sent, resp, close = transport.post_stream(url, body, guard=guard)
        else:
            sent, resp, close = transport.post_stream(url, body)
            if guard is not None:
                guard.attach(_http.response_socket(resp))
        start = sent or start
        result.start_ns = start
        try:
            read1 = resp.read1
            append = reads.append
            size = 0
            pending = 0   # bytes since the last blank line: the SSE event still open
            tail = b''
            while True:
                data = read1(READ_SIZE)
                t = clock()
                if not data:
                    break
                append((t, data))
                n = len(data)
                size += n
                cut = max(data.rfind(b'\n\n'), data.rfind(b'\n\r\n'))
                pending = pending + n if cut < 0 else n - cut - 2
                if size > max_bytes or pending > max_event_bytes:
                    result.kept_bytes = size
                    del reads[:]   # the bytes kept so far are no use now: free them at once
                    if pending > max_event_bytes:
                        return result.fail('oversize', 'an SSE event grew past %d bytes without a blank line '
                                           '(%d read); abandoned' % (max_event_bytes, size))
                    return result.fail('oversize', 'response larger than %d bytes (%d read); abandoned'
                                       % (max_bytes, size))
                tail = (tail + data)[-16:]
                if tail.endswith(DONE_TAILS):
                    result.done = True
                    break
            result.kept_bytes = size
        finally:
            # a stream that ended with [DONE] may leave its connection to the next request (_http.Lease)
            keep = getattr(close, 'keep', None) if result.done else None
            (keep or close)()
    except Exception as exc:
        result.kept_bytes = result.kept_bytes or _kept(reads)
        kind = guard.kind() if guard is not None else None
        if kind:
            return result.fail(kind, guard.detail(result.kept_bytes))
        return _failure(result, exc)
    if not result.done and guard is not None and guard.kind():
        return result.fail(guard.kind(), guard.detail(result.kept_bytes))
    result.end_ns = (reads[-1][0] if reads else clock()) - start
    return result


def _kept(reads):
    return sum(len(r[1]) for r in reads)


def _failure(result, exc):
    """The error kind and detail of an exception that ended a request."""
    if isinstance(exc, _http.HTTPStatusError):
        kind = 'http_5xx' if exc.code >= 500 else 'http_4xx'
        return result.fail(kind, 'HTTP %s: %s' % (exc.code, exc.text.strip()))
    if isinstance(exc, _http.ConnectError):
        return result.fail('connect', 'cannot connect: %s' % exc)
    if isinstance(exc, HTTPError):
        kind = 'http_5xx' if exc.code >= 500 else 'http_4xx'
        try:
            text = exc.read(_http.ERROR_BODY_BYTES).decode('utf-8', 'replace')
        except Exception:  # the body only decorates the message
            text = ''
        return result.fail(kind, 'HTTP %s: %s' % (exc.code, text.strip()))
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return result.fail('timeout', 'no data within the timeout (stalled): %s' % exc)
    if isinstance(exc, URLError):
        reason = getattr(exc, 'reason', exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return result.fail('timeout', 'no answer within the timeout: %s' % reason)
        return result.fail('connect', 'cannot connect: %s' % reason)
    if isinstance(exc, (http.client.IncompleteRead, ConnectionError, http.client.HTTPException)):
        return result.fail('stream_cut', 'stream ended early (%s: %s)' % (type(exc).__name__, exc))
    if isinstance(exc, OSError):
        return result.fail('connect', 'network error: %s' % exc)
    return result.fail('client_error', 'unexpected %s: %s' % (type(exc).__name__, exc))


# --------------------------------------------------------------------------- SSE parsing

def _choice_text(choice):
    """Text carried by one streamed choice (completions `text`, chat `delta.content`/reasoning)."""
    if not isinstance(choice, dict):
        return ''
    text = choice.get('text')
    if text:
        return text
    delta = choice.get('delta')
    if isinstance(delta, dict):
        return (delta.get('content') or delta.get('reasoning_content')
                or delta.get('reasoning') or '')
    return ''


def parse_stream(reads, start_ns, result):
    """Turn the socket reads [(t_ns, bytes)] of one SSE stream into timings on result.

    An event's time is the time of the read that delivered its last byte (its blank line).
    Returns whether the stream ended with `data: [DONE]`.
    """
    buf = b''.join(read[1] for read in reads)
    ends = []
    pos = 0
    for t, data in reads:
        pos += len(data)
        ends.append((pos, t))
    ri = 0
    prev_usage_tokens = 0
    usage_tokens = None
    per_chunk_known = True
    chunk_tokens = []
    text = []
    result.text = text
    done = False
    last = 0
    for m in EVENT_SEP.finditer(buf):
        block = buf[last:m.start()]
        end_off = m.end()
        last = end_off
        payload = _event_data(block)
        if payload is None:
            continue
        if payload == b'[DONE]':
            done = True
            continue
        while ends[ri][0] < end_off:
            ri += 1
        t = ends[ri][1] - start_ns
        try:
            obj = json.loads(payload)
        except ValueError:
            result.fail('bad_response', 'invalid JSON in event: %r' % payload[:120])
            return done
        if not isinstance(obj, dict):
            continue
        if obj.get('error') is not None or obj.get('object') == 'error':
            err = obj.get('error') or obj
            msg = err.get('message') if isinstance(err, dict) else err
            result.fail('server_error', 'server error in stream: %s' % (msg,))
            return done
        usage = obj.get('usage')
        this_usage = None
        if isinstance(usage, dict) and usage.get('completion_tokens') is not None:
            this_usage = usage_count(usage['completion_tokens'])
            if this_usage is None or this_usage < prev_usage_tokens:
                result.fail('bad_usage', "the server's usage says completion_tokens=%s%s: not a count of tokens; "
                            "the run's token figures cannot be trusted" % (
                                _shown(usage['completion_tokens']),
                                '' if this_usage is None else ' after %d' % prev_usage_tokens))
                return done
            usage_tokens = this_usage
            if usage.get('prompt_tokens') is not None:
                result.prompt_tokens = usage_count(usage['prompt_tokens'])
                if result.prompt_tokens is None:
                    result.fail('bad_usage', "the server's usage says prompt_tokens=%s: not a count of tokens"
                                % _shown(usage['prompt_tokens']))
                    return done
        choices = obj.get('choices') or ()
        pieces = [_choice_text(c) for c in choices]
        has_text = any(pieces)
        if has_text:
            text.extend(pieces)
        n_tok = None
        if this_usage is not None and choices:
            n_tok = this_usage - prev_usage_tokens
            prev_usage_tokens = this_usage
        if has_text or (n_tok is not None and n_tok > 0):
            result.chunk_times_ns.append(t)
            if n_tok is None:
                per_chunk_known = False
            chunk_tokens.append(n_tok)
    result.chunks = len(result.chunk_times_ns)
    if result.chunk_times_ns:
        result.ttft_ns = result.chunk_times_ns[0]
        result.last_token_ns = result.chunk_times_ns[-1]
    if usage_tokens is not None:
        result.output_tokens = usage_tokens
        result.tokens_source = 'usage'
    else:
        # A server without usage: count token-bearing events (exact without speculation, a lower
        # bound with it); flagged so it is never mistaken for the server's count.
        result.output_tokens = result.chunks
        result.tokens_source = 'chunks'
    if per_chunk_known and chunk_tokens and sum(chunk_tokens) == result.output_tokens:
        result.chunk_tokens = chunk_tokens
    return done


# A token count from the server's usage: a non-negative integer no larger than any context (2^24 tokens,
# the gate's bound on max_model_len). Anything else (negative, fractional, a boolean, text, 1e300) is
# a server that cannot be measured by its own counts.
MAX_USAGE_TOKENS = 1 << 24


def usage_count(value):
    """``value`` as a token count, or None when it cannot be one (see MAX_USAGE_TOKENS)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_USAGE_TOKENS:
        return None
    return value


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + '...'


def _event_data(block):
    """The `data:` payload of one SSE event block (several data lines joined), or None."""
    if not block:
        return None
    if block.startswith(b'data:') and b'\n' not in block:
        return block[5:].strip()
    parts = []
    for line in block.splitlines():
        if line.startswith(b'data:'):
            parts.append(line[5:].strip())
    return b'\n'.join(parts) if parts else None


def finish(result, max_tokens=None):
    """Parse the kept reads of a request into its timings and verdict (idempotent).

    ``max_tokens``: what the request asked for; a server whose usage reports more output tokens than
    that (the request sets ignore_eos, never more) fails the request as ``bad_usage``.
    """
    reads, result.reads = result.reads, None
    if reads is None:
        return result
    failed = result.error is not None
    try:
        done = parse_stream(reads, result.start_ns, result) or result.done
    except Exception as exc:  # a malformed stream must count as an error, never a traceback
        if not failed:
            result.fail('bad_response', 'cannot parse the stream: %s: %s' % (type(exc).__name__, exc))
        return result
    if failed or result.error:
        result.ok = False
        return result
    if not done:
        return result.fail('stream_cut', 'stream closed before data: [DONE] after %d events'
                           % result.chunks)
    if not result.chunk_times_ns or not result.output_tokens:
        return result.fail('no_tokens', 'the stream carried no tokens')
    if max_tokens is not None and result.tokens_source == 'usage' and result.output_tokens > max_tokens:
        return result.fail('bad_usage', "the server's usage says %d output tokens for a request of max_tokens %d; "
                           "the run's token figures cannot be trusted" % (result.output_tokens, max_tokens))
    result.ok = True
    return result
