# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Speculative acceptance around one benchmark level, read from the engine (vLLM counters, SGLang info).

vLLM: the ``vllm:spec_decode_*_total`` counters of ``/metrics`` before and after the level, differenced.
SGLang: ``avg_spec_accept_length`` of ``/get_server_info``, a running average since the server started.
Every read goes through the transport's ``get`` (``_http.http_get``): bounded, and never raising.
"""
from __future__ import annotations

import json

from ansible_collections.llmops.specdec.plugins.module_utils import _http, _prom

SGLANG_CAVEAT = ('SGLang reports avg_spec_accept_length as a running average since the server '
                 'started, so it mixes earlier traffic (warm-up, health checks, other levels) '
                 'into this figure; use a fresh server per run for an exact value')


def _answer(status, text, err):
    """Words for a GET that did not answer 200."""
    if status is None:
        return 'failed: %s' % err
    return 'returned %s: %s' % (status, (text or err or '')[:200])


def detect_metrics(transport, base_url, timeout=None):
    """'vllm' when /metrics has vllm: series, 'sglang' when /get_server_info answers, else 'none'."""
    root = _http.server_root(base_url)
    status, text, _err = transport.get(root + '/metrics', timeout)
    if status == 200 and 'vllm:' in text:
        return 'vllm'
    status2, text2, _err = transport.get(root + '/get_server_info', timeout)
    if status2 == 200 and text2.lstrip().startswith('{'):
        return 'sglang'
    if status == 200 and 'sglang:' in text:
        return 'sglang'
    return 'none'


class ProbeError(Exception):
    """A metrics read that failed; its text goes into the level's acceptance.error."""


class AcceptanceProbe:
    """Reads the engine's acceptance figures around one level."""

    def __init__(self, transport, base_url, kind):
        self.transport = transport
        self.root = _http.server_root(base_url)
        self.kind = kind
        self.before = None
        self.before_error = None

    def _vllm_counters(self, timeout):
        status, text, err = self.transport.get(self.root + '/metrics', timeout)
        if status != 200:
            raise ProbeError('GET /metrics %s' % _answer(status, text, err))
        return _prom.counters(_prom.parse_text(text), _prom.VLLM_PREFIX)

    def start(self, timeout=None):
        if self.kind == 'vllm':
            try:
                self.before = self._vllm_counters(timeout)
            except Exception as exc:  # whatever the server sent: an error in the result, never a traceback
                self.before_error = str(exc)

    def skipped(self, why):
        """The acceptance entry of a level whose figures were not read (None without metrics)."""
        if self.kind == 'vllm':
            return {'source': 'vllm_counters', 'error': why}
        if self.kind == 'sglang':
            return {'source': 'sglang_server_info', 'error': why}
        return None

    def finish(self, timeout=None):
        if self.kind == 'vllm':
            if self.before is None:
                return {'source': 'vllm_counters', 'error': self.before_error}
            try:
                after = self._vllm_counters(timeout)
            except Exception as exc:  # as in start()
                return {'source': 'vllm_counters', 'error': str(exc)}
            acc = _prom.vllm_acceptance(self.before, after)
            if acc is None:
                return {'source': 'vllm_counters', 'error': None,
                        'caveat': 'the server exports no vllm:spec_decode_* counters '
                                  '(speculative decoding off)'}
            acc['error'] = None
            return acc
        if self.kind == 'sglang':
            return self._sglang(timeout)
        return None

    def _sglang(self, timeout):
        out = {'source': 'sglang_server_info', 'since_server_start': True,
               'caveat': SGLANG_CAVEAT, 'mean_acceptance_length': None,
               'last_batch_accept_length': None, 'error': None}
        status, text, err = self.transport.get(self.root + '/get_server_info', timeout)
        if status == 200:
            try:
                info = json.loads(text)
                states = info.get('internal_states') or [{}]
                val = states[0].get('avg_spec_accept_length', info.get('avg_spec_accept_length'))
                out['mean_acceptance_length'] = float(val) if val is not None else None
            except (ValueError, AttributeError, LookupError, TypeError) as exc:
                out['error'] = 'unreadable /get_server_info: %s' % exc
        else:
            out['error'] = 'GET /get_server_info %s' % _answer(status, text, err)
        status, text, err = self.transport.get(self.root + '/metrics', timeout)
        if status == 200:
            try:
                out['last_batch_accept_length'] = _prom.sglang_gauge(_prom.parse_text(text))
            except _prom.PromParseError:
                pass
        return out
