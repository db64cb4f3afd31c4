# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The figures of the benchmark: per-request formulas, per-level statistics and samples.

Works on ``_bench_stream.RequestResult`` objects after ``finish()``; no I/O.
"""
from __future__ import annotations

import math

# The per-request lists of a level's ``samples``, in this order (the verdict reads these names).
# prompt: the index of the prompt each request sent (the verdict pairs the two sides' requests by it).
SAMPLE_KEYS = ('ttft_ms', 'tpot_ms', 'e2e_ms', 'output_tokens', 'output_tok_s', 'start_ms', 'prompt')


def ns_to_ms(ns):
    return ns / 1e6


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


def stream_tok_s(result):
    """One request's output tokens / its e2e seconds (the rate one user sees); None without an e2e."""
    if not result.last_token_ns or result.output_tokens is None:
        return None
    return result.output_tokens * 1e9 / result.last_token_ns


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


def level_start_ns(results):
    """When the level's first measured request started (None when none started)."""
    return min((r.start_ns for r in results if r.start_ns is not None), default=None)


def request_row(result, start_ns):
    """One request's own figures (the per_request option), times in ms."""
    ok = result.ok
    return {
        'start_ms': ns_to_ms(result.start_ns - start_ns) if result.start_ns is not None else None,
        'prompt': result.prompt,
        'ok': ok,
        'error': result.error,
        'detail': result.detail,
        'ttft_ms': ns_to_ms(result.ttft_ns) if ok else None,
        'tpot_ms': tpot_ms(result) if ok else None,
        'e2e_ms': ns_to_ms(result.last_token_ns) if ok else None,
        'output_tokens': result.output_tokens if ok else None,
        'chunks': result.chunks if ok else None,
        'max_chunk_gap_ms': max(chunk_gaps_ms(result) or [0.0]) if ok else None,
        'bytes': result.kept_bytes,
    }


def _r(value, digits=3):
    return None if value is None else round(value, digits)


def samples(results, max_samples=None):
    """Per-request samples of the successful requests, in start order: (dict of lists, truncated).

    Equal-length lists under SAMPLE_KEYS: ttft_ms, tpot_ms (None for a one-token request), e2e_ms,
    output_tokens, output_tok_s (output_tokens / e2e seconds), start_ms (after the level's first
    request), prompt (the index of the prompt sent). Only the first ``max_samples`` (None: all) are kept;
    truncated says whether more succeeded. Times are rounded to the microsecond, rates to 0.001 tok/s.
    """
    t0 = level_start_ns(results)
    ok = sorted((r for r in results if r.ok), key=lambda r: r.start_ns or 0)
    kept = ok if max_samples is None else ok[:max(0, max_samples)]
    out = dict((k, []) for k in SAMPLE_KEYS)
    for r in kept:
        out['ttft_ms'].append(_r(ns_to_ms(r.ttft_ns)))
        out['tpot_ms'].append(_r(tpot_ms(r), 4))
        out['e2e_ms'].append(_r(ns_to_ms(r.last_token_ns)))
        out['output_tokens'].append(r.output_tokens)
        out['output_tok_s'].append(_r(stream_tok_s(r)))
        out['start_ms'].append(_r(ns_to_ms(r.start_ns - t0)) if r.start_ns is not None else None)
        out['prompt'].append(r.prompt)
    return out, len(kept) < len(ok)


# Errors that say only that nothing came (the client's side of a dead or stalled server): a request that carries
# the server's own words is reported before them. A candidate that crashes mid-run fails one request with its
# error and times the others out; which ends first depends on the host's load (the real tier saw both).
_SILENT_KINDS = ('timeout', 'request_timeout', 'connect', 'deadline')


def first_error(results):
    """The detail of the first failed request that carries the server's words, else of the first failed one."""
    failed = [r for r in results if not r.ok]
    telling = next((r for r in failed if r.error not in _SILENT_KINDS), None)
    return (telling or failed[0]).detail if failed else None


def summarise(results, concurrency, wall_ns, max_samples=None):
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
    kept, truncated = samples(results, max_samples)
    level = {
        'concurrency': concurrency,
        'requests': len(results),
        'ok': len(ok),
        'errors': len(results) - len(ok),
        'error_kinds': errors,
        'first_error': first_error(results),
        'duration_s': wall_s,
        'output_tokens': tokens,
        'output_tok_s': (tokens / wall_s) if wall_s > 0 and ok else None,
        'request_s': (len(ok) / wall_s) if wall_s > 0 and ok else None,
        'stream_tok_s': stats([stream_tok_s(r) for r in ok]),
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
        'samples': kept,
        'samples_truncated': truncated,
    }
    return level
