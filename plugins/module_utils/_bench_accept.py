# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Speculative acceptance around one benchmark level, read from the engine as its adapter says.

Two kinds of reader, named by the adapter's ``ACCEPTANCE_METRICS["kind"]`` (``_engine``):
``counters``: the engine's speculative counters of ``/metrics`` before and after the level, differenced;
``server_info``: a running average since the server started, from a JSON info path, plus a last-batch gauge.
Every read goes through the transport's ``get`` (``_http.http_get``): bounded, and never raising.
"""
from __future__ import annotations

import json

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _http, _prom


def _answer(status, text, err):
    """Words for a GET that did not answer 200."""
    if status is None:
        return 'failed: %s' % err
    return 'returned %s: %s' % (status, (text or err or '')[:200])


def _of_kind(kind):
    return [mod for mod in _engine.ENGINES.values() if mod.ACCEPTANCE_METRICS["kind"] == kind]


def detect_metrics(transport, base_url, timeout=None):
    """The engine whose acceptance the server exports (a registered name), else 'none': an engine with
    counters when /metrics has its series, one with an info path when that path answers JSON, else the
    engine whose series /metrics has."""
    root = _http.server_root(base_url)
    status, text, _err = transport.get(root + '/metrics', timeout)
    for mod in _of_kind('counters'):
        if status == 200 and mod.METRICS_MARKER in text:
            return mod.NAME
    for mod in _of_kind('server_info'):
        status2, text2, _err = transport.get(root + mod.ACCEPTANCE_METRICS['path'], timeout)
        if status2 == 200 and text2.lstrip().startswith('{'):
            return mod.NAME
    for mod in _engine.ENGINES.values():
        if status == 200 and mod.METRICS_MARKER in text:
            return mod.NAME
    return 'none'


class ProbeError(Exception):
    """A metrics read that failed; its text goes into the level's acceptance.error."""


class AcceptanceProbe:
    """Reads the engine's acceptance figures around one level."""

    def __init__(self, transport, base_url, kind):
        self.transport = transport
        self.root = _http.server_root(base_url)
        self.kind = kind
        self.engine = _engine.get(kind) if _engine.known(kind) else None  # None: no acceptance ('none')
        self.before = None
        self.before_error = None
        self.texts = {}  # the /metrics texts read at 'start' and 'finish' (PrefixCacheProbe reads the same)

    def _reads(self, kind):
        return self.engine is not None and self.engine.ACCEPTANCE_METRICS['kind'] == kind

    def _counters(self, timeout, when):
        status, text, err = self.transport.get(self.root + '/metrics', timeout)
        if status != 200:
            raise ProbeError('GET /metrics %s' % _answer(status, text, err))
        self.texts[when] = text
        return _prom.counters(_prom.parse_text(text), self.engine.ACCEPTANCE_METRICS['prefix'])

    def start(self, timeout=None):
        if self._reads('counters'):
            try:
                self.before = self._counters(timeout, 'start')
            except Exception as exc:  # whatever the server sent: an error in the result, never a traceback
                self.before_error = str(exc)

    def skipped(self, why):
        """The acceptance entry of a level whose figures were not read (None without metrics)."""
        if self.engine is not None:
            return {'source': self.engine.ACCEPTANCE_SOURCE, 'error': why}
        return None

    def finish(self, timeout=None):
        if self._reads('counters'):
            source = self.engine.ACCEPTANCE_SOURCE
            if self.before is None:
                return {'source': source, 'error': self.before_error}
            try:
                after = self._counters(timeout, 'finish')
            except Exception as exc:  # as in start()
                return {'source': source, 'error': str(exc)}
            acc = _prom.counter_acceptance(self.before, after, self.engine.ACCEPTANCE_METRICS, source)
            if acc is None:
                return {'source': source, 'error': None,
                        'caveat': 'the server exports no %s* counters '
                                  '(speculative decoding off)' % self.engine.ACCEPTANCE_METRICS['prefix']}
            acc['error'] = None
            return acc
        if self._reads('server_info'):
            return self._server_info(timeout)
        return None

    def _server_info(self, timeout):
        names = self.engine.ACCEPTANCE_METRICS
        out = {'source': self.engine.ACCEPTANCE_SOURCE, 'since_server_start': True,
               'caveat': names['caveat'], 'mean_acceptance_length': None,
               'last_batch_accept_length': None, 'error': None}
        status, text, err = self.transport.get(self.root + names['path'], timeout)
        if status == 200:
            try:
                info = json.loads(text)
                states = info.get('internal_states') or [{}]
                val = states[0].get(names['field'], info.get(names['field']))
                out['mean_acceptance_length'] = float(val) if val is not None else None
            except (ValueError, AttributeError, LookupError, TypeError) as exc:
                out['error'] = 'unreadable %s: %s' % (names['path'], exc)
        else:
            out['error'] = 'GET %s %s' % (names['path'], _answer(status, text, err))
        status, text, err = self.transport.get(self.root + '/metrics', timeout)
        if status == 200:
            self.texts['finish'] = text
            try:
                out['last_batch_accept_length'] = _prom.gauge_mean(_prom.parse_text(text), names['gauge'])
            except _prom.PromParseError:
                pass
        return out


class PrefixCacheProbe:
    """The engine's prefix-cache counters around one level (its adapter's ``PREFIX_CACHE_METRICS``).

    ``finish`` returns ``{"source", "hits", "queries", "hit_rate", "error"}`` (tokens: queried prompt tokens and
    those found in the cache, summed over every series of the counter), or None without an engine's metrics.
    A counter that went down (a restart during the level) or a server that exports no queries counter gives
    an ``error`` and no figures: the verdict's guardrail then has nothing to judge.
    """

    def __init__(self, transport, base_url, kind):
        self.transport = transport
        self.root = _http.server_root(base_url)
        self.engine = _engine.get(kind) if _engine.known(kind) else None
        self.before = None
        self.before_error = None

    def _read(self, timeout, text=None):
        if text is None:
            status, text, err = self.transport.get(self.root + '/metrics', timeout)
            if status != 200:
                raise ProbeError('GET /metrics %s' % _answer(status, text, err))
        names = self.engine.PREFIX_CACHE_METRICS
        sums, seen = {'hits': 0.0, 'queries': 0.0}, set()
        for name, _labels, value in _prom.parse_text(text):
            for key in ('hits', 'queries'):
                if name == names[key]:
                    sums[key] += value
                    seen.add(key)
        if 'queries' not in seen:
            raise ProbeError('the server exports no %s counter' % names['queries'])
        return sums  # no hits series: none yet (a labelled counter has no series before its first increment)

    def start(self, timeout=None, text=None):
        """``text``: a /metrics text read at this moment already (the AcceptanceProbe's), else one is read."""
        if self.engine is None:
            return
        try:
            self.before = self._read(timeout, text)
        except Exception as exc:  # whatever the server sent: an error in the result, never a traceback
            self.before_error = str(exc)

    def skipped(self, why):
        return {'source': 'metrics', 'error': why} if self.engine is not None else None

    def finish(self, timeout=None, text=None):
        if self.engine is None:
            return None
        out = {'source': 'metrics', 'hits': None, 'queries': None, 'hit_rate': None, 'error': None}
        if self.before is None:
            return dict(out, error=self.before_error)
        try:
            after = self._read(timeout, text)
        except Exception as exc:  # as in start()
            return dict(out, error=str(exc))
        hits, queries = after['hits'] - self.before['hits'], after['queries'] - self.before['queries']
        if hits < 0 or queries < 0:
            return dict(out, error='a prefix-cache counter went down during the level (the server restarted)')
        out.update(hits=int(hits), queries=int(queries), hit_rate=(hits / queries) if queries else None)
        return out
