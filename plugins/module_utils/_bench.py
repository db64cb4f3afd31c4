# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark run of spec_bench: concurrency levels, each a closed loop of streaming requests.

Measurement design (see bench/README.md for the figures):
- A closed loop of N worker threads per concurrency level; each worker starts its next request as
  soon as its previous one has ended, so no request waits for another stream. Its connection stays
  open for the next request (``_http.DirectTransport``), and the level's connections are opened
  before its first request, as a production client's pool would hold them.
- One request, its deadline and its SSE parsing: ``_bench_stream``; the figures: ``_bench_stats``;
  acceptance from the engine: ``_bench_accept``; HTTP: ``_http``.
- The run is bounded: ``run_timeout`` for the whole run (requests still running then, or never
  started, count as ``deadline`` errors and the result says so), ``request_timeout`` per request,
  ``timeout`` per stalled read. A worker never dies of an exception: it becomes an error kind.
- No header value (the API key) appears in the result or in an error: a key that could not be sent
  as is is refused before any request, and every text of the result is scrubbed of it.
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
import time

from ansible_collections.llmops.specdec.plugins.module_utils import (
    _bench_accept, _bench_outputs, _bench_stats, _bench_stream, _engine, _http, _levels, _prom, _secrets,
)

# Raw stream bytes kept for parsing after a level; beyond this, requests are parsed as they end.
MAX_KEPT_BYTES = 256 * 1024 * 1024
# How long a waiting thread may be kept from the GIL; short so a timestamp is not held back by
# another stream's bookkeeping (CPython's default is 5 ms, a tenth of a typical TTFT).
SWITCH_INTERVAL_S = 0.0002

# The spec_bench options that bound a run; the module's argument_spec takes them from here, and
# run_benchmark() falls back to these defaults for a cfg without them, so they live in one place.
LIMIT_OPTIONS = {
    'timeout': {'type': 'float', 'default': 60},
    'request_timeout': {'type': 'float', 'default': 600},
    'run_timeout': {'type': 'float', 'default': 3600},
    'max_samples': {'type': 'int', 'default': 1000},
    'lossless_prompts': {'type': 'int', 'default': _bench_outputs.DEFAULT_PROMPTS},
    # Levels from the engine's running-request gauge (_levels): seconds it is watched before the first level
    # when no concurrency is named, the seconds between two reads, and the highest level it may give.
    'observe_seconds': {'type': 'float', 'default': 10.0},
    'observe_interval': {'type': 'float', 'default': 0.5},
    'max_concurrency': {'type': 'int', 'default': 64},
}


class BenchError(Exception):
    """A failure of the whole benchmark (not of one request)."""


def limit(cfg, name):
    """cfg[name], or its argument_spec default when cfg has none (library callers)."""
    value = cfg.get(name)
    return LIMIT_OPTIONS[name]['default'] if value is None else value


# --------------------------------------------------------------------------- the closed loop

def run_level(transport, url, bodies, concurrency, requests, warmup=0, watchdog=None, max_bytes=None,
              max_tokens=None):
    """Run `requests` measured requests (after `warmup` unmeasured ones) with `concurrency`
    workers in a closed loop. bodies is a list of request bodies used round-robin, warm-up included:
    every result's ``prompt`` is the index of the body it sent, so a verdict can pair the requests of two
    runs by prompt (docs/verdict.md, the paired design).

    With a ``watchdog`` every request has its deadline, and no request starts once the run's
    deadline has passed: those left unsent are results of kind ``deadline``.
    ``max_tokens``: what each request asks for; a server whose usage reports more fails the request
    (``bad_usage``, see ``_bench_stream.finish``).
    Returns (results, wall_ns) where wall_ns runs from the first measured start to the last end.
    """
    lock = threading.Lock()
    state = {'next': 0, 'limit': warmup, 'kept': 0}
    results = [None] * (warmup + requests)

    def worker():
        while True:
            with lock:
                i = state['next']
                if i >= state['limit'] or (watchdog is not None and watchdog.run_over()):
                    return
                state['next'] = i + 1
            try:
                r = _bench_stream.run_request(transport, url, bodies[i % len(bodies)], parse=False,
                                              watchdog=watchdog, max_bytes=max_bytes)
                r.prompt = i % len(bodies)
                results[i] = r
                with lock:
                    state['kept'] += r.kept_bytes
                    parse_now = state['kept'] > MAX_KEPT_BYTES
                if parse_now:  # bound memory on very long runs: parse in the loop after all
                    _bench_stream.finish(r, max_tokens)
            except Exception as exc:  # never lose a worker: the request is counted, the loop goes on
                results[i] = _bench_stream.client_error(exc)
                results[i].prompt = i % len(bodies)

    _prime(transport, url, concurrency, watchdog)
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
    measured = []
    for r in results[warmup:]:
        if r is None:
            r = _bench_stream.not_started(_not_started_detail(watchdog))
        _bench_stream.finish(r, max_tokens)
        measured.append(r)
    started = [r for r in measured if r.start_ns is not None]
    if not started:
        return measured, 0
    wall = (max(r.start_ns + r.end_ns for r in started) - min(r.start_ns for r in started))
    return measured, wall


def _prime(transport, url, concurrency, watchdog):
    """Open the level's connections before its first request, on a transport that keeps them alive.

    Every wave after the first reuses its streams' connections; primed, the first wave does too, so
    no request of the level makes the server accept a connection while it is timed.
    """
    prime = getattr(transport, 'prime', None)
    if prime is None or (watchdog is not None and watchdog.run_over()):
        return
    timeout = getattr(transport, 'timeout', None)
    prime(url, concurrency, watchdog.bound(timeout) if watchdog is not None and timeout else timeout)


def _not_started_detail(watchdog):
    return 'not started: %s' % watchdog.run_end_why() if watchdog is not None else 'not started'


def _run_threads(target, n):
    threads = [threading.Thread(target=target, name='spec-bench-%d' % i, daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --------------------------------------------------------------------------- levels from production's batch

def running_now(transport, base_url, engine, timeout=None):
    """(running requests, error): the engine's running-request gauge now (its adapter's ``RUNNING_GAUGE``)."""
    gauge = engine.RUNNING_GAUGE
    status, text, err = transport.get(_http.server_root(base_url) + '/metrics', timeout)
    if status != 200:
        return None, 'GET /metrics %s' % _bench_accept._answer(status, text, err)
    try:
        value = _prom.gauge_sum(_prom.parse_text(text), gauge['name'], gauge.get('only'))
    except _prom.PromParseError as exc:
        return None, 'unreadable /metrics: %s' % exc
    return value, (None if value is not None else '/metrics has no %s' % gauge['name'])


def observe_running(transport, base_url, metrics, seconds, interval, watchdog=None, sleep=time.sleep,
                    clock=time.monotonic):
    """Sample the running-request gauge of the engine ``metrics`` names for ``seconds`` (every ``interval``)
    while production is served, before any request of the benchmark; the levels they give (_levels)."""
    engine = _engine.get(metrics) if _engine.known(metrics) else None
    if engine is None:
        return _levels.from_running([], None, seconds=0, error='no engine metrics (%s)' % metrics)
    samples, error = [], None
    end = clock() + max(0.0, seconds)
    while True:
        if watchdog is not None and watchdog.run_over():
            error = watchdog.run_end_why()
            break
        value, why = running_now(transport, base_url, engine, watchdog.bound(interval * 4 + 1) if watchdog else None)
        samples.append(value)
        error = why or error
        left = end - clock()
        if left <= 0:
            break
        sleep(min(interval, left))
    return {'samples': samples, 'error': error, 'gauge': engine.RUNNING_GAUGE['name']}


def choose_levels(cfg, transport, metrics, watchdog=None):
    """The levels to run: cfg's ``concurrency`` as named, else from the running-request gauge (_levels)."""
    if cfg.get('concurrency'):
        return _levels.named(cfg['concurrency'])
    seconds = limit(cfg, 'observe_seconds')
    max_level = limit(cfg, 'max_concurrency')
    if seconds <= 0:
        return _levels.from_running([], None, max_level, seconds=0, error='observe_seconds is 0')
    seen = observe_running(transport, cfg['url'], metrics, seconds, limit(cfg, 'observe_interval'), watchdog)
    if 'levels' in seen:  # no engine to read the gauge of
        return seen
    return _levels.from_running(seen['samples'], seen['gauge'], max_level, seconds=seconds, error=seen['error'])


# --------------------------------------------------------------------------- the whole run

def discover_model(transport, base_url, timeout=None):
    """The first model id the server lists at /v1/models."""
    status, text, err = transport.get(_http.server_root(base_url) + '/v1/models', timeout)
    if status is None:
        raise BenchError('cannot discover the model: GET /v1/models failed: %s' % err)
    if status != 200:
        raise BenchError('cannot discover the model: GET /v1/models returned HTTP %s: %s'
                         % (status, (text or err or '')[:200]))
    try:
        data = json.loads(text).get('data') or []
        return data[0]['id']
    except (ValueError, AttributeError, LookupError, TypeError):
        raise BenchError('cannot discover the model: /v1/models lists no model id: %s' % text[:200])


def level_requests(cfg, conc):
    """Measured requests at one level: ``requests``, and at least ``min_waves`` waves of ``conc`` streams.

    Requests that run together are not independent (the verdict takes blocks of ``conc`` consecutive
    requests, and needs three): 24 requests at 32 streams would be less than one wave.
    """
    return max(cfg['requests'], (cfg.get('min_waves') or 0) * conc)


def _level_not_run(conc, requests, detail, probe):
    level = _bench_stats.summarise([_bench_stream.not_started(detail) for _i in range(requests)], conc, 0)
    level['acceptance'] = probe.skipped('not read: the level did not run')
    level['prefix_cache'] = None
    return level


def run_benchmark(cfg, transport=None, on_start=None):
    """Run every concurrency level of cfg (a dict of the module's options, prompts resolved).

    cfg keys: url, api, model, prompts [(category, text)], max_tokens, concurrency, requests,
    warmup, ignore_eos, metrics, temperature, chunk_usage, timeout, request_timeout, run_timeout,
    max_samples, per_request, validate_certs, use_proxy, api_key. ``on_start(end_run)``, when given, is called
    once the run's clock starts, with a function that ends the run early from another thread (the
    lease watch of ``_lease.Watch``). Returns the `bench` result;
    raises BenchError when the run cannot start (its message scrubbed of the key, as the result is).
    """
    api_key = cfg.get('api_key')
    secrets = [api_key] if api_key else []
    try:
        headers = _secrets.auth_headers(api_key)
    except _secrets.BadHeaderValue as exc:
        raise BenchError(str(exc)) from None
    try:
        bench = _run(cfg, transport, headers, on_start)
    except BenchError as exc:
        raise BenchError(_secrets.scrub(str(exc), secrets)) from None
    return _secrets.scrub(bench, secrets)


def _run(cfg, transport, headers, on_start=None):
    t_start = time.perf_counter_ns()
    stall = limit(cfg, 'timeout')
    run_timeout = limit(cfg, 'run_timeout')
    validate_certs = cfg.get('validate_certs')
    if validate_certs is None:
        validate_certs = _http.ENGINE_API_ARGSPEC['validate_certs']['default']
    if transport is None and cfg.get('use_proxy'):
        # http.client does not do proxies: go through ansible's urls, at its per-request cost
        transport = _http.AnsibleTransport(stall, validate_certs=validate_certs, use_proxy=True, headers=headers)
    elif transport is None:
        transport = _http.DirectTransport(stall, validate_certs=validate_certs, headers=headers)
    prompts = cfg['prompts']
    if not prompts:
        raise BenchError('no prompts to send')
    watchdog = _bench_stream.Watchdog(limit(cfg, 'request_timeout'), run_timeout)
    if on_start is not None:
        on_start(watchdog.end_run)
    try:
        model = cfg.get('model') or discover_model(transport, cfg['url'], watchdog.bound(stall))
        metrics = cfg.get('metrics') or 'auto'
        if metrics == 'auto':
            metrics = _bench_accept.detect_metrics(transport, cfg['url'], watchdog.bound(stall))
        choice = choose_levels(cfg, transport, metrics, watchdog)
        cfg = dict(cfg, concurrency=choice['levels'])
        levels, cut, lowest = _run_levels(cfg, transport, watchdog, model, metrics)
    finally:
        watchdog.stop()
        close = getattr(transport, 'close', None)
        if close is not None:
            close()  # the kept-alive connections of the streams
    categories = {}
    for cat in (p[0] for p in prompts):
        categories[cat] = categories.get(cat, 0) + 1
    single = next((lv['output_tok_s'] for lv in levels if lv['concurrency'] == 1), None)
    return {
        'url': cfg['url'],
        'api': cfg['api'],
        'model': model,
        'metrics_source': metrics,
        'prompts': len(prompts),
        # Which prompts, in which order: the samples' ``prompt`` indexes pair two runs only when this is equal.
        'prompts_sha256': prompts_digest(prompts),
        'categories': categories,
        'max_tokens': cfg['max_tokens'],
        'ignore_eos': cfg.get('ignore_eos', True),
        'temperature': cfg.get('temperature', 0.0),
        'warmup': cfg.get('warmup', 0),
        'requests_per_level': cfg['requests'],
        'transport': getattr(transport, 'name', type(transport).__name__),
        'single_stream_tok_s': single,
        'ok': sum(lv['ok'] for lv in levels),
        'errors': sum(lv['errors'] for lv in levels),
        'duration_s': round((time.perf_counter_ns() - t_start) / 1e9, 3),
        'run_timeout_reached': cut,
        'levels': levels,
        # Which levels ran and why: named, or from the engine's running-request gauge (_levels.from_running).
        'level_choice': choice,
        # Digests of the greedy outputs of the lowest level, per prompt: the verdict's lossless check.
        'outputs': _bench_outputs.collect(lowest, min(cfg['concurrency']), prompts, limit(cfg, 'lossless_prompts'),
                                          cfg.get('temperature', 0.0)),
    }


def prompts_digest(prompts):
    """SHA-256 (16 hex digits) of the run's prompts [(category, text)] in the order sent."""
    text = json.dumps([[p[0], p[1]] for p in prompts], ensure_ascii=False, separators=(',', ':'))
    return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]


def _run_levels(cfg, transport, watchdog, model, metrics):
    stall = limit(cfg, 'timeout')
    url = _bench_stream.endpoint(cfg['url'], cfg['api'])
    bodies = [_bench_stream.request_body(cfg['api'], model, text, cfg['max_tokens'], cfg.get('temperature', 0.0),
                                         cfg.get('ignore_eos', True), cfg.get('chunk_usage', True))
              for text in (p[1] for p in cfg['prompts'])]
    max_bytes = _bench_stream.max_request_bytes(cfg['max_tokens'])
    levels = []
    lowest = []   # the measured results of the lowest level, for the output digests
    cut = False   # whether run_timeout left something unmeasured
    for conc in cfg['concurrency']:
        probe = _bench_accept.AcceptanceProbe(transport, cfg['url'], metrics)
        prefix = _bench_accept.PrefixCacheProbe(transport, cfg['url'], metrics)
        if watchdog.run_over():
            levels.append(_level_not_run(conc, level_requests(cfg, conc), _not_started_detail(watchdog), probe))
            cut = True
            continue
        if cfg.get('warmup'):
            run_level(transport, url, bodies, conc, 0, warmup=cfg['warmup'], watchdog=watchdog, max_bytes=max_bytes)
        probe.start(watchdog.bound(stall))
        prefix.start(watchdog.bound(stall), probe.texts.get('start'))
        results, wall = run_level(transport, url, bodies, conc, level_requests(cfg, conc), watchdog=watchdog,
                                  max_bytes=max_bytes, max_tokens=cfg['max_tokens'])
        level = _bench_stats.summarise(results, conc, wall, limit(cfg, 'max_samples'))
        if conc == min(cfg['concurrency']):
            lowest = results
        if cfg.get('per_request'):
            t0 = _bench_stats.level_start_ns(results)
            level['per_request'] = [_bench_stats.request_row(r, t0) for r in results]
        cut = cut or bool(level['error_kinds'].get('deadline'))
        if watchdog.run_over():
            level['acceptance'] = probe.skipped('not read: %s' % watchdog.run_end_why())
            level['prefix_cache'] = prefix.skipped('not read: %s' % watchdog.run_end_why())
            cut = cut or probe.engine is not None  # an engine's acceptance was due
        else:
            level['acceptance'] = probe.finish(watchdog.bound(stall))
            level['prefix_cache'] = prefix.finish(watchdog.bound(stall), probe.texts.get('finish'))
        levels.append(level)
    return levels, cut, lowest


def describe(bench, run_timeout=None):
    """One line on the run for the module's msg; says plainly when run_timeout cut it short."""
    levels = bench['levels']
    text = '%d level(s) (concurrency %s): %d request(s) ok, %d failed, in %.1f s' % (
        len(levels), ', '.join(str(lv['concurrency']) for lv in levels), bench['ok'], bench['errors'],
        bench['duration_s'])
    if bench['run_timeout_reached']:
        cut = sum(lv['error_kinds'].get('deadline', 0) for lv in levels)
        lost = [str(lv['concurrency']) for lv in levels
                if lv['requests'] and lv['error_kinds'].get('deadline', 0) == lv['requests']]
        text = 'run_timeout%s reached: %d request(s) unfinished counted as deadline errors%s; %s' % (
            ' of %g s' % run_timeout if run_timeout else '', cut,
            ' (no request finished at concurrency %s)' % ', '.join(lost) if lost else '', text)
    return text
