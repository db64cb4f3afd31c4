# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming decode benchmark against an OpenAI-compatible server (vLLM, SGLang).

Measurement design (see bench/README.md for the figures):
- A closed loop of N worker threads per concurrency level; each worker starts its next request as
  soon as its previous one has ended, so no request waits for another stream.
- While a stream runs the worker only reads: one `read1()` per socket read, a perf_counter_ns()
  stamp right after it, the bytes kept. SSE events and JSON are parsed after the stream has ended,
  so no parsing sits between a byte's arrival and its timestamp.
- Token counts come from the server's `usage` (`stream_options.include_usage`); with
  `continuous_usage_stats` (vLLM, SGLang) each chunk carries the running count, which gives the
  tokens per chunk and so the per-token latency under speculation.
"""
from __future__ import annotations

import http.client
import json
import math
import re
import socket
import sys
import threading
import time


from ansible.module_utils.urls import Request, make_context
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urlsplit

from ansible_collections.llmops.specdec.plugins.module_utils import _prom

EVENT_SEP = re.compile(rb'\r?\n\r?\n')
READ_SIZE = 65536
# Raw stream bytes kept for parsing after a level; beyond this, requests are parsed as they end.
MAX_KEPT_BYTES = 256 * 1024 * 1024
# How long a waiting thread may be kept from the GIL; short so a timestamp is not held back by
# another stream's bookkeeping (CPython's default is 5 ms, a tenth of a typical TTFT).
SWITCH_INTERVAL_S = 0.0002

ERROR_KINDS = ('connect', 'http_4xx', 'http_5xx', 'timeout', 'stream_cut', 'server_error',
               'bad_response', 'no_tokens')


class BenchError(Exception):
    """A failure of the whole benchmark (not of one request)."""


def ns_to_ms(ns):
    return ns / 1e6


# --------------------------------------------------------------------------- request bodies

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
    base = base_url.rstrip('/')
    if base.endswith('/v1'):
        base = base[:-3]
    return base + ('/v1/chat/completions' if api == 'chat' else '/v1/completions')


def server_root(base_url):
    base = base_url.rstrip('/')
    return base[:-3] if base.endswith('/v1') else base


# --------------------------------------------------------------------------- transport

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


class AnsibleTransport:
    """HTTP through ansible.module_utils.urls.Request (what open_url wraps).

    One SSL context is built once and shared: open_url() builds a fresh one per call, loading the
    system CA bundle each time (about 25 ms of CPU per request on the development machine).
    Proxies and .netrc are off by default: a proxy would be measured along with the server.
    """

    name = 'ansible_urls'

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

    def post_stream(self, url, body):
        """Send the request; return (start_ns, response).

        start_ns is stamped when http.client hands the body to the socket (after connect and the
        headers), not before Request.open(): the opener is built per call and costs a few hundred
        microseconds of Python that, under the GIL with many streams, can stretch to milliseconds.
        """
        stamped = StampedBody(body)
        resp = self._request().open('POST', url, data=stamped, headers={
            'Content-Type': 'application/json', 'Accept': 'text/event-stream',
            'Content-Length': str(len(body))})
        return stamped.sent_ns, resp, resp.close

    def get(self, url, timeout=None):
        """GET url; return (status, body text). HTTP errors return their status, not raise."""
        try:
            resp = self._request().open('GET', url, timeout=timeout or self.timeout)
            try:
                return resp.status, resp.read().decode('utf-8', 'replace')
            finally:
                resp.close()
        except HTTPError as exc:
            try:
                text = exc.read().decode('utf-8', 'replace')
            except Exception:
                text = ''
            return exc.code, text


class HTTPStatusError(Exception):
    def __init__(self, code, text):
        super(HTTPStatusError, self).__init__('HTTP %s' % code)
        self.code = code
        self.text = text


class ConnectError(Exception):
    pass


class DirectTransport:
    """Streaming POSTs over http.client, one connection per request; GETs via ansible's urls.

    The default, because it is what keeps TTFT exact at concurrency on a busy host: a request
    costs about 0.1 ms of Python before it is on the wire, against 0.5 to 1 ms for building a urllib
    opener through ansible.module_utils.urls.Request (and 25 ms for open_url(), which also loads
    the CA bundle each call). At 32 streams that opener work piles up at each wave of starts and
    holds the GIL while earlier streams' first tokens arrive (bench/README.md has the figures).
    The socket reads are the same HTTPResponse.read1() either way. TLS uses ansible's make_context().
    """

    name = 'http.client'

    def __init__(self, timeout, validate_certs=True, headers=None):
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.headers.update({'Content-Type': 'application/json', 'Accept': 'text/event-stream'})
        self.validate_certs = validate_certs
        self._context = None
        self._lock = threading.Lock()
        self._get = AnsibleTransport(timeout, validate_certs=validate_certs, use_proxy=False,
                                     headers=headers)

    def _tls(self):
        with self._lock:
            if self._context is None:
                self._context = make_context(validate_certs=self.validate_certs)
            return self._context

    def post_stream(self, url, body):
        """Connect, then stamp, send and wait for the response head; return (start_ns, resp, close)."""
        u = urlsplit(url)
        if u.scheme == 'https':
            conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=self.timeout,
                                               context=self._tls())
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=self.timeout)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise ConnectError(str(exc))
        try:
            start = time.perf_counter_ns()
            conn.request('POST', u.path + ('?' + u.query if u.query else ''), body, self.headers)
            resp = conn.getresponse()
            if resp.status >= 400:
                text = resp.read(2000).decode('utf-8', 'replace')
                raise HTTPStatusError(resp.status, text)
        except BaseException:
            conn.close()
            raise
        return start, resp, conn.close

    def get(self, url, timeout=None):
        return self._get.get(url, timeout)


# --------------------------------------------------------------------------- one request

class RequestResult:
    """Raw timings of one request (ns since its start) and what the server said."""

    __slots__ = ('ok', 'error', 'detail', 'start_ns', 'ttft_ns', 'last_token_ns', 'end_ns',
                 'output_tokens', 'tokens_source', 'chunk_times_ns', 'chunk_tokens',
                 'prompt_tokens', 'chunks', 'reads', 'done')

    def __init__(self):
        self.ok = False
        self.error = None
        self.detail = None
        self.start_ns = 0
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

    def fail(self, kind, detail):
        self.ok = False
        self.error = kind
        self.detail = detail[:300] if detail else detail
        return self


def _choice_text(choice):
    """Text carried by one streamed choice (completions `text`, chat `delta.content`/reasoning)."""
    text = choice.get('text')
    if text:
        return text
    delta = choice.get('delta')
    if delta:
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
            this_usage = int(usage['completion_tokens'])
            usage_tokens = this_usage
            if usage.get('prompt_tokens') is not None:
                result.prompt_tokens = int(usage['prompt_tokens'])
        choices = obj.get('choices') or ()
        has_text = any(_choice_text(c) for c in choices)
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


def run_request(transport, url, body, parse=True):
    """Send one streaming request and measure it. Never raises for server or network faults.

    With parse=False the raw reads are kept on the result and finish() must be called later:
    the closed loop defers parsing until the level is over, so that no stream's bookkeeping holds
    the GIL while another stream's tokens arrive.
    """
    try:
        result = _stream(transport, url, body)
    except Exception as exc:  # whatever else a broken server provokes: an error, never a traceback
        result = RequestResult()
        result.start_ns = time.perf_counter_ns()
        result.fail('bad_response', 'unexpected %s: %s' % (type(exc).__name__, exc))
    if result.end_ns is None:
        result.end_ns = time.perf_counter_ns() - result.start_ns
    if parse:
        finish(result)
    return result


def _stream(transport, url, body):
    result = RequestResult()
    reads = []
    result.reads = reads
    start = time.perf_counter_ns()
    result.start_ns = start
    clock = time.perf_counter_ns
    try:
        sent, resp, close = transport.post_stream(url, body)
        start = sent or start
        result.start_ns = start
        try:
            read1 = resp.read1
            append = reads.append
            while True:
                data = read1(READ_SIZE)
                t = clock()
                if not data:
                    break
                append((t, data))
                if data.endswith(b'[DONE]\n\n'):
                    result.done = True
                    break
        finally:
            close()
    except HTTPStatusError as exc:
        kind = 'http_5xx' if exc.code >= 500 else 'http_4xx'
        return result.fail(kind, 'HTTP %s: %s' % (exc.code, exc.text.strip()))
    except ConnectError as exc:
        return result.fail('connect', 'cannot connect: %s' % exc)
    except HTTPError as exc:
        kind = 'http_5xx' if exc.code >= 500 else 'http_4xx'
        try:
            text = exc.read(2000).decode('utf-8', 'replace')
        except Exception:
            text = ''
        return result.fail(kind, 'HTTP %s: %s' % (exc.code, text.strip()))
    except (socket.timeout, TimeoutError) as exc:
        return result.fail('timeout', 'no data within the timeout (stalled): %s' % exc)
    except URLError as exc:
        reason = getattr(exc, 'reason', exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return result.fail('timeout', 'no answer within the timeout: %s' % reason)
        return result.fail('connect', 'cannot connect: %s' % reason)
    except (http.client.IncompleteRead, ConnectionError, http.client.HTTPException) as exc:
        return result.fail('stream_cut', 'stream ended early (%s: %s)' % (type(exc).__name__, exc))
    except OSError as exc:
        return result.fail('connect', 'network error: %s' % exc)
    result.end_ns = (reads[-1][0] if reads else clock()) - start
    return result


def finish(result):
    """Parse the kept reads of a request into its timings and verdict (idempotent)."""
    reads, result.reads = result.reads, None
    if reads is None:
        return result
    failed = result.error is not None
    try:
        done = parse_stream(reads, result.start_ns, result) or result.done
    except Exception as exc:  # a malformed stream must count as an error, never a traceback
        if not failed:
            result.fail('bad_response', 'cannot parse the stream: %s' % exc)
        return result
    if failed or result.error:
        result.ok = False
        return result
    if not done:
        return result.fail('stream_cut', 'stream closed before data: [DONE] after %d events'
                           % result.chunks)
    if not result.chunk_times_ns or not result.output_tokens:
        return result.fail('no_tokens', 'the stream carried no tokens')
    result.ok = True
    return result


# --------------------------------------------------------------------------- metrics

def percentile(sorted_vals, q):
    """Linear-interpolated percentile (numpy's default) of an ascending list; q in [0, 100]."""
    n = len(sorted_vals)
    if n == 0:
        return None
    if n == 1:
        return sorted_vals[0]
    k = (n - 1) * q / 100.0
    lo = int(math.floor(k))
    hi = min(lo + 1, n - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def stats(values):
    """mean / median / p90 / p99 / min / max of a list of numbers (None when empty)."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    return {'mean': sum(vals) / len(vals), 'median': percentile(vals, 50),
            'p90': percentile(vals, 90), 'p99': percentile(vals, 99),
            'min': vals[0], 'max': vals[-1], 'count': len(vals)}


def tpot_ms(result):
    """TPOT = (e2e - TTFT) / (output tokens - 1); e2e ends at the last token-bearing event."""
    if result.output_tokens is None or result.output_tokens < 2 or result.ttft_ns is None:
        return None
    return ns_to_ms(result.last_token_ns - result.ttft_ns) / (result.output_tokens - 1)


def chunk_gaps_ms(result):
    """Gaps between consecutive token-bearing events (what vLLM bench calls ITL)."""
    t = result.chunk_times_ns
    return [ns_to_ms(t[i] - t[i - 1]) for i in range(1, len(t))]


def token_latencies_ms(result):
    """Per-token latency: each event's gap split evenly over the tokens it carried.

    With per-event counts from the server (continuous usage) this is exact; otherwise the
    request's tokens after the first event are spread evenly over its later events (the mean
    tokens per event), which is what `token_latency_source` reports as `mean_per_chunk`.
    """
    t = result.chunk_times_ns
    if len(t) < 2:
        return []
    out = []
    if result.chunk_tokens is not None:
        for i in range(1, len(t)):
            k = result.chunk_tokens[i]
            if k > 0:
                out.extend([ns_to_ms(t[i] - t[i - 1]) / k] * k)
        return out
    later_tokens = max(result.output_tokens - 1, len(t) - 1)
    per_event = later_tokens / float(len(t) - 1)
    for i in range(1, len(t)):
        out.append(ns_to_ms(t[i] - t[i - 1]) / per_event)
    return out


def request_row(result, level_start_ns):
    """One request's own figures (the per_request option), times in ms."""
    ok = result.ok
    return {
        'start_ms': ns_to_ms(result.start_ns - level_start_ns),
        'ok': ok,
        'error': result.error,
        'detail': result.detail,
        'ttft_ms': ns_to_ms(result.ttft_ns) if ok else None,
        'tpot_ms': tpot_ms(result) if ok else None,
        'e2e_ms': ns_to_ms(result.last_token_ns) if ok else None,
        'output_tokens': result.output_tokens if ok else None,
        'chunks': result.chunks if ok else None,
        'max_chunk_gap_ms': max(chunk_gaps_ms(result) or [0.0]) if ok else None,
    }


def summarise(results, concurrency, wall_ns):
    """The figures of one concurrency level from its measured (non warm-up) requests."""
    ok = [r for r in results if r.ok]
    errors = {}
    for r in results:
        if not r.ok:
            errors[r.error] = errors.get(r.error, 0) + 1
    tokens = sum(r.output_tokens for r in ok)
    wall_s = wall_ns / 1e9
    gaps, tok_lat = [], []
    for r in ok:
        gaps.extend(chunk_gaps_ms(r))
        tok_lat.extend(token_latencies_ms(r))
    sources = sorted(set(r.tokens_source for r in ok))
    per_chunk = [r for r in ok if r.chunk_tokens is not None]
    level = {
        'concurrency': concurrency,
        'requests': len(results),
        'ok': len(ok),
        'errors': len(results) - len(ok),
        'error_kinds': errors,
        'first_error': next((r.detail for r in results if not r.ok), None),
        'duration_s': wall_s,
        'output_tokens': tokens,
        'output_tok_s': (tokens / wall_s) if wall_s > 0 and ok else None,
        'request_s': (len(ok) / wall_s) if wall_s > 0 and ok else None,
        'stream_tok_s': stats([r.output_tokens * 1e9 / r.last_token_ns for r in ok
                               if r.last_token_ns]),
        'ttft_ms': stats([ns_to_ms(r.ttft_ns) for r in ok]),
        'tpot_ms': stats([tpot_ms(r) for r in ok]),
        'itl_ms': stats(gaps),
        'token_latency_ms': stats(tok_lat),
        'token_latency_source': ('usage_per_chunk' if ok and len(per_chunk) == len(ok)
                                 else 'mean_per_chunk' if ok else None),
        'e2e_ms': stats([ns_to_ms(r.last_token_ns) for r in ok]),
        'output_tokens_per_request': stats([r.output_tokens for r in ok]),
        'tokens_per_chunk': (tokens / float(sum(r.chunks for r in ok))) if ok else None,
        'tokens_source': sources[0] if len(sources) == 1 else ('mixed' if sources else None),
    }
    return level


# --------------------------------------------------------------------------- the closed loop

def run_level(transport, url, bodies, concurrency, requests, warmup=0):
    """Run `requests` measured requests (after `warmup` unmeasured ones) with `concurrency`
    workers in a closed loop. bodies is a list of request bodies used round-robin.

    Returns (results, wall_ns) where wall_ns runs from the first measured start to the last end.
    """
    lock = threading.Lock()
    state = {'next': 0, 'limit': warmup, 'kept': 0}
    results = [None] * (warmup + requests)

    def worker():
        while True:
            with lock:
                i = state['next']
                if i >= state['limit']:
                    return
                state['next'] = i + 1
            r = run_request(transport, url, bodies[i % len(bodies)], parse=False)
            results[i] = r
            size = sum(len(read[1]) for read in r.reads)
            with lock:
                state['kept'] += size
                parse_now = state['kept'] > MAX_KEPT_BYTES
            if parse_now:  # bound memory on very long runs: parse in the loop after all
                finish(r)

    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        if warmup:
            # warm-up at the same concurrency, unmeasured, so connections and caches settle
            _run_threads(worker, min(concurrency, warmup))
        state['limit'] = warmup + requests
        _run_threads(worker, concurrency)
    finally:
        sys.setswitchinterval(old)
    for r in results:
        finish(r)
    measured = results[warmup:]
    if not measured:
        return measured, 0
    wall = (max(r.start_ns + r.end_ns for r in measured) - min(r.start_ns for r in measured))
    return measured, wall


def _run_threads(target, n):
    threads = [threading.Thread(target=target, name='spec-bench-%d' % i, daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --------------------------------------------------------------------------- the whole run

SGLANG_CAVEAT = ('SGLang reports avg_spec_accept_length as a running average since the server '
                 'started, so it mixes earlier traffic (warm-up, health checks, other levels) '
                 'into this figure; use a fresh server per run for an exact value')


def discover_model(transport, base_url):
    """The first model id the server lists at /v1/models."""
    status, text = _get_quiet(transport, server_root(base_url) + '/v1/models')
    if status is None:
        raise BenchError('cannot discover the model: GET /v1/models failed: %s' % text)
    if status != 200:
        raise BenchError('cannot discover the model: GET /v1/models returned HTTP %s: %s'
                         % (status, text[:200]))
    try:
        data = json.loads(text).get('data') or []
        return data[0]['id']
    except (ValueError, AttributeError, LookupError, TypeError):
        raise BenchError('cannot discover the model: /v1/models lists no model id: %s' % text[:200])


def _get_quiet(transport, url):
    try:
        return transport.get(url)
    except (URLError, OSError, http.client.HTTPException) as exc:
        return None, str(exc)


def detect_metrics(transport, base_url):
    """'vllm' when /metrics has vllm: series, 'sglang' when /get_server_info answers, else 'none'."""
    root = server_root(base_url)
    status, text = _get_quiet(transport, root + '/metrics')
    if status == 200 and 'vllm:' in text:
        return 'vllm'
    status2, text2 = _get_quiet(transport, root + '/get_server_info')
    if status2 == 200 and text2.lstrip().startswith('{'):
        return 'sglang'
    if status == 200 and 'sglang:' in text:
        return 'sglang'
    return 'none'


class AcceptanceProbe:
    """Reads the engine's acceptance figures around one level."""

    def __init__(self, transport, base_url, kind):
        self.transport = transport
        self.root = server_root(base_url)
        self.kind = kind
        self.before = None
        self.before_error = None

    def _vllm_counters(self):
        status, text = _get_quiet(self.transport, self.root + '/metrics')
        if status != 200:
            raise BenchError('GET /metrics returned %s: %s' % (status, (text or '')[:200]))
        return _prom.counters(_prom.parse_text(text), _prom.VLLM_PREFIX)

    def start(self):
        if self.kind == 'vllm':
            try:
                self.before = self._vllm_counters()
            except Exception as exc:
                self.before_error = str(exc)

    def finish(self):
        if self.kind == 'vllm':
            if self.before is None:
                return {'source': 'vllm_counters', 'error': self.before_error}
            try:
                after = self._vllm_counters()
            except Exception as exc:
                return {'source': 'vllm_counters', 'error': str(exc)}
            acc = _prom.vllm_acceptance(self.before, after)
            if acc is None:
                return {'source': 'vllm_counters', 'error': None,
                        'caveat': 'the server exports no vllm:spec_decode_* counters '
                                  '(speculative decoding off)'}
            acc['error'] = None
            return acc
        if self.kind == 'sglang':
            out = {'source': 'sglang_server_info', 'since_server_start': True,
                   'caveat': SGLANG_CAVEAT, 'mean_acceptance_length': None,
                   'last_batch_accept_length': None, 'error': None}
            status, text = _get_quiet(self.transport, self.root + '/get_server_info')
            if status == 200:
                try:
                    info = json.loads(text)
                    states = info.get('internal_states') or [{}]
                    val = states[0].get('avg_spec_accept_length', info.get('avg_spec_accept_length'))
                    out['mean_acceptance_length'] = float(val) if val is not None else None
                except (ValueError, AttributeError, LookupError, TypeError) as exc:
                    out['error'] = 'unreadable /get_server_info: %s' % exc
            else:
                out['error'] = 'GET /get_server_info returned %s' % status
            status, text = _get_quiet(self.transport, self.root + '/metrics')
            if status == 200:
                try:
                    out['last_batch_accept_length'] = _prom.sglang_gauge(_prom.parse_text(text))
                except _prom.PromParseError:
                    pass
            return out
        return None


def run_benchmark(cfg, transport=None, log=None):
    """Run every concurrency level of cfg (a dict of the module's options, prompts resolved).

    cfg keys: url, api, model, prompts [(category, text)], max_tokens, concurrency, requests,
    warmup, ignore_eos, metrics, temperature, chunk_usage, timeout, validate_certs, use_proxy,
    api_key. Returns the `bench` result; raises BenchError when the run cannot start.
    """
    headers = {}
    if cfg.get('api_key'):
        headers['Authorization'] = 'Bearer %s' % cfg['api_key']
    if transport is None and cfg.get('use_proxy'):
        # http.client does not do proxies: go through ansible's urls, at its per-request cost
        transport = AnsibleTransport(cfg['timeout'], validate_certs=cfg.get('validate_certs', True),
                                     use_proxy=True, headers=headers)
    elif transport is None:
        transport = DirectTransport(cfg['timeout'], validate_certs=cfg.get('validate_certs', True),
                                    headers=headers)
    model = cfg.get('model') or discover_model(transport, cfg['url'])
    metrics = cfg.get('metrics') or 'auto'
    if metrics == 'auto':
        metrics = detect_metrics(transport, cfg['url'])
    url = endpoint(cfg['url'], cfg['api'])
    prompts = cfg['prompts']
    if not prompts:
        raise BenchError('no prompts to send')
    bodies = [request_body(cfg['api'], model, text, cfg['max_tokens'], cfg.get('temperature', 0.0),
                           cfg.get('ignore_eos', True), cfg.get('chunk_usage', True))
              for text in (p[1] for p in prompts)]
    categories = {}
    for cat in (p[0] for p in prompts):
        categories[cat] = categories.get(cat, 0) + 1
    levels = []
    for conc in cfg['concurrency']:
        probe = AcceptanceProbe(transport, cfg['url'], metrics)
        if cfg.get('warmup'):
            run_level(transport, url, bodies, conc, 0, warmup=cfg['warmup'])
        probe.start()
        results, wall = run_level(transport, url, bodies, conc, cfg['requests'])
        level = summarise(results, conc, wall)
        if cfg.get('per_request'):
            t0 = min(r.start_ns for r in results)
            level['per_request'] = [request_row(r, t0) for r in results]
        level['acceptance'] = probe.finish()
        levels.append(level)
        if log:
            log(level)
    ok = sum(lv['ok'] for lv in levels)
    single = next((lv['output_tok_s'] for lv in levels if lv['concurrency'] == 1), None)
    return {
        'url': cfg['url'],
        'api': cfg['api'],
        'model': model,
        'metrics_source': metrics,
        'prompts': len(prompts),
        'categories': categories,
        'max_tokens': cfg['max_tokens'],
        'ignore_eos': cfg.get('ignore_eos', True),
        'temperature': cfg.get('temperature', 0.0),
        'warmup': cfg.get('warmup', 0),
        'requests_per_level': cfg['requests'],
        'transport': getattr(transport, 'name', type(transport).__name__),
        'single_stream_tok_s': single,
        'ok': ok,
        'errors': sum(lv['errors'] for lv in levels),
        'levels': levels,
    }
