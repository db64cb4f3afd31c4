# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Digests of the benchmark's greedy outputs, per prompt, for the verdict's lossless check (docs/verdict.md).

Speculative decoding is lossless: at temperature 0 the candidate must write what the baseline writes.
The benchmark's own requests are greedy (``temperature`` 0, ``ignore_eos``), so their outputs are digested
as they are: no extra request, no extra time with production on a candidate.

- Which requests: those of the run's lowest concurrency level (1 by default), the first request that
  succeeded for each of the first ``lossless_prompts`` prompts. Both sides of a verdict run the same
  prompts in the same order at the same levels, so the two digests of a prompt come from the same shape
  of batch; requests that ran beside others can flip a near tie and are not used.
- What is digested: the text the stream carried (completions ``text``, chat ``delta.content``). The
  OpenAI-compatible streams of vLLM and SGLang carry text, not token ids, without extra request fields
  that would change what is measured, so positions are in characters, not tokens.
- The digest: SHA-256 of the whole text (16 hex digits kept), its length, and a short digest of every
  block of ``BLOCK_CHARS`` characters, so two digests tell where the texts first differ to within a
  block, without the text itself being stored (benchmark prompts may be an operator's real requests).
- ``stable``: whether every successful request of the prompt at that level wrote the same text; a
  prompt whose own side is not repeatable says so in the verdict.

Standard library only (spec_bench runs on the target).
"""
from __future__ import annotations

import hashlib

BLOCK_CHARS = 32
DEFAULT_PROMPTS = 8
SHA_HEX = 16
BLOCK_HEX = 8


def _hex(text, size):
    return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:size]


def digest(text):
    """``{"sha256", "chars", "blocks"}`` of one output text."""
    text = text or ''
    return {
        'sha256': _hex(text, SHA_HEX),
        'chars': len(text),
        'blocks': [_hex(text[i:i + BLOCK_CHARS], BLOCK_HEX) for i in range(0, len(text), BLOCK_CHARS)],
    }


def collect(results, level, prompts, limit=DEFAULT_PROMPTS, temperature=0.0):
    """The ``outputs`` of a run from the measured results of its lowest level (in the order sent).

    ``prompts``: the run's [(category, text)], sent round-robin; ``limit``: how many of the first prompts to
    digest (0: none). Returns ``{"skipped": None, "level", "temperature", "block_chars", "prompts": [...]}``;
    ``skipped`` says why when no digest can stand for a greedy output (then ``prompts`` is empty).
    """
    out = {'skipped': None, 'level': level, 'temperature': temperature, 'block_chars': BLOCK_CHARS, 'prompts': []}
    if not limit:
        return dict(out, skipped='lossless_prompts is 0')
    if temperature is None or float(temperature) != 0.0:
        return dict(out, skipped='temperature %s is not greedy (0): outputs are not comparable' % temperature)
    count = min(int(limit), len(prompts))
    seen = {}
    for i, result in enumerate(results):
        index = i % len(prompts)
        if index >= count or not getattr(result, 'ok', False) or result.text is None:
            continue
        seen.setdefault(index, []).append(''.join(result.text))
    rows = []
    for index in sorted(seen):
        texts = seen[index]
        row = {'index': index, 'category': prompts[index][0], 'prompt_sha256': _hex(prompts[index][1], SHA_HEX),
               'stable': len(set(texts)) == 1}
        row.update(digest(texts[0]))
        rows.append(row)
    return dict(out, temperature=0.0, prompts=rows)


def usable(outputs):
    """Whether ``outputs`` (a bench's or a summary's) holds digests to compare."""
    return isinstance(outputs, dict) and not outputs.get('skipped') and isinstance(outputs.get('prompts'), list)


def first_difference(one, two, block_chars=BLOCK_CHARS):
    """Where two digests (of :func:`digest`) first differ: None when equal, else ``[first, last]``, the range
    of characters (0-based, inclusive) the first difference lies in (a block, or where the shorter ends)."""
    if one.get('sha256') == two.get('sha256') and one.get('chars') == two.get('chars'):
        return None
    blocks_one, blocks_two = one.get('blocks') or [], two.get('blocks') or []
    for k, (a, b) in enumerate(zip(blocks_one, blocks_two)):
        if a != b:
            end = min(one.get('chars') or 0, two.get('chars') or 0, (k + 1) * block_chars) - 1
            return [k * block_chars, max(k * block_chars, end)]
    # every common block equal: one text is a prefix of the other (to within the last, partial block)
    shorter = min(one.get('chars') or 0, two.get('chars') or 0)
    return [shorter, shorter]
