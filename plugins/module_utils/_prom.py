# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition parsing and counter deltas (speculative-decoding acceptance), and the
node_exporter textfile lines of the nightly acceptance watch (:func:`acceptance_textfile`) and of a
switch's outcome (:func:`switch_textfile`).

prometheus_client's own text parser is used when the target has it; otherwise a small parser
that handles what the engines emit (comments, labels with escapes, exponent / NaN / Inf values,
optional timestamps).
"""

from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import _optional

# Optional: without it parse_text uses parse_text_small.
PARSER = _optional.Optional("prometheus_client.parser", "text_string_to_metric_families")


class PromParseError(ValueError):
    pass


def _parse_value(text):
    low = text.lower()
    if low in ('nan',):
        return math.nan
    if low in ('+inf', 'inf'):
        return math.inf
    if low == '-inf':
        return -math.inf
    try:
        return float(text)
    except ValueError:
        raise PromParseError('bad sample value %r' % text)


def _parse_labels(text, pos):
    """Parse `{a="b",c="d"}` starting after the `{` at pos; return (labels, index after `}`)."""
    labels = {}
    n = len(text)
    while True:
        while pos < n and text[pos] in ' \t,':
            pos += 1
        if pos >= n:
            raise PromParseError('unterminated label set')
        if text[pos] == '}':
            return labels, pos + 1
        eq = text.find('=', pos)
        if eq < 0:
            raise PromParseError('label without value')
        name = text[pos:eq].strip()
        pos = eq + 1
        while pos < n and text[pos] == ' ':
            pos += 1
        if pos >= n or text[pos] != '"':
            raise PromParseError('label value must be quoted')
        pos += 1
        out = []
        while True:
            if pos >= n:
                raise PromParseError('unterminated label value')
            ch = text[pos]
            if ch == '\\' and pos + 1 < n:
                nxt = text[pos + 1]
                out.append({'n': '\n', '\\': '\\', '"': '"'}.get(nxt, '\\' + nxt))
                pos += 2
                continue
            if ch == '"':
                pos += 1
                break
            out.append(ch)
            pos += 1
        labels[name] = ''.join(out)


def parse_text_small(text):
    """The fallback parser: return a list of (name, labels, value) samples."""
    samples = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        brace = line.find('{')
        space = line.find(' ')
        try:
            if brace >= 0 and (space < 0 or brace < space):
                name = line[:brace]
                labels, pos = _parse_labels(line, brace + 1)
                rest = line[pos:].split()
            else:
                parts = line.split()
                name, labels, rest = parts[0], {}, parts[1:]
            if not rest:
                raise PromParseError('sample without value')
            samples.append((name, labels, _parse_value(rest[0])))
        except PromParseError as exc:
            raise PromParseError('line %d: %s' % (lineno, exc))
    return samples


def parse_text(text):
    """Return [(name, labels, value)]; prometheus_client's parser when importable."""
    parse = PARSER.get()
    if parse is not None:
        try:
            return [(s.name, dict(s.labels), float(s.value)) for fam in parse(text) for s in fam.samples]
        except ValueError as exc:
            raise PromParseError(str(exc))
    return parse_text_small(text)


def counters(samples, prefix):
    """Sum samples whose name starts with prefix, keyed by (name, position label or None).

    Several engines (data parallel) or models export one series each; their sum is the server's.
    """
    out = {}
    for name, labels, value in samples:
        if not name.startswith(prefix) or math.isnan(value):
            continue
        key = (name, labels.get('position'))
        out[key] = out.get(key, 0.0) + value
    return out


def delta(before, after):
    """Counter differences after - before; a series that went down was reset (server restart).

    After a reset the increase since the restart is the after value itself: the part counted before
    the restart is lost, exactly as Prometheus' increase() treats it. A changed `<name>_created`
    sample (prometheus_client exports one per counter) also marks that counter as restarted, even
    when it has already climbed past its old value. Returns (deltas, reset_keys).
    """
    out, resets = {}, []
    restarted = set()
    for (name, pos), new in after.items():
        if name.endswith('_created') and (name, pos) in before and before[(name, pos)] != new:
            restarted.add((name[: -len('_created')] + '_total', pos))
    for key, new in after.items():
        if key[0].endswith('_created'):
            continue
        old = before.get(key, 0.0)
        if new < old or key in restarted:
            resets.append(key)
            out[key] = new
        else:
            out[key] = new - old
    return out, resets


def counter_acceptance(before, after, names, source):
    """Acceptance over the window between two scrapes of an engine's speculative counters, or None.

    ``names``: the engine's counter names (its adapter's ``ACCEPTANCE_METRICS``: ``drafts``, ``draft_tokens``,
    ``accepted``, ``per_pos``); ``source``: the adapter's ``ACCEPTANCE_SOURCE``, which the result carries.
    """
    d, resets = delta(before, after)
    drafts = d.get((names['drafts'], None), 0.0)
    draft_tokens = d.get((names['draft_tokens'], None), 0.0)
    accepted = d.get((names['accepted'], None), 0.0)
    if (names['drafts'], None) not in after:
        return None
    positions = sorted(((int(pos), v) for (name, pos), v in d.items() if name == names['per_pos'] and pos is not None),
                       key=lambda kv: kv[0])
    return {
        'source': source,
        'drafts': int(drafts),
        'draft_tokens': int(draft_tokens),
        'accepted_tokens': int(accepted),
        'acceptance_rate': (accepted / draft_tokens) if draft_tokens else None,
        'mean_acceptance_length': (1.0 + accepted / drafts) if drafts else None,
        'per_position': [pv[1] / drafts for pv in positions] if drafts else [],
        'counter_reset': bool(resets),
        'caveat': ('counters went down during the run (server restarted): only the part since the restart is counted') if resets else None,
    }


def gauge_mean(samples, name):
    """The mean of the gauge ``name`` over its series (e.g. an engine's last-batch accept length), else None."""
    vals = [s[2] for s in samples if s[0] == name and not math.isnan(s[2])]
    return (sum(vals) / len(vals)) if vals else None


def gauge_sum(samples, name, only=None):
    """The sum of the gauge ``name`` over its series whose labels match ``only`` (where they have that label),
    e.g. the running requests of every engine of a data-parallel server; None when no such series."""
    only = only or {}
    vals = [s[2] for s in samples if s[0] == name and not math.isnan(s[2])
            and all(s[1].get(k, v) == v for k, v in only.items())]
    return math.fsum(vals) if vals else None


# --------------------------------------------------------------------------- textfile (node_exporter)

def _escape_label(value):
    """A label value in the text exposition format: backslash, double quote and line feed escaped."""
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _series(name, labels, value):
    if not labels:
        return '%s %s' % (name, _number(value))
    text = ','.join('%s="%s"' % (key, _escape_label(val)) for key, val in labels)
    return '%s{%s} %s' % (name, text, _number(value))


def _number(value):
    value = float(value)
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    return repr(round(value, 6)) if value != int(value) else '%d' % value


def _family(out, name, help_text, rows):
    if not rows:
        return
    out.append('# HELP %s %s' % (name, help_text))
    out.append('# TYPE %s gauge' % name)
    out.extend(_series(name, labels, value) for labels, value in rows)


def acceptance_textfile(watch, labels=None, timestamp=None):
    """node_exporter textfile lines for one acceptance watch (``_watch.watch``'s answer), newline-terminated.

    ``labels``: a mapping or (name, value) pairs put on every series first (host, unit, suite). Series:
    ``llmops_specdec_acceptance_judged`` (1 when compared, 0 when not judged), ``..._dropped`` (1 when any
    position dropped beyond noise; 0 also when not judged, so a missing record never raises an alert),
    ``..._drop{position}`` (0/1 per judged position), ``..._rate{position,when="kept|now"}`` (accepted / drafts
    per draft position, ``position="all"``: the overall rate when the engine exposes no positions),
    ``..._length{when}`` (mean acceptance length) and ``..._watch_timestamp_seconds`` when given.
    """
    if isinstance(labels, dict):
        base = sorted((str(k), v) for k, v in labels.items())
    else:
        base = [(str(k), v) for k, v in (labels or [])]
    watch = watch or {}
    out = ['# Managed by llmops.specdec: the nightly acceptance watch (speculative decoding).']
    if timestamp is not None:
        _family(out, 'llmops_specdec_acceptance_watch_timestamp_seconds', 'When the nightly acceptance watch last ran.',
                [(base, int(float(timestamp)))])
    judged = bool(watch.get('judged'))
    _family(out, 'llmops_specdec_acceptance_judged',
            '1 when tonight\'s acceptance was compared with the one stored when the configuration was kept.',
            [(base, 1 if judged else 0)])
    _family(out, 'llmops_specdec_acceptance_dropped',
            '1 when acceptance dropped beyond noise at any draft position since the configuration was kept.',
            [(base, 1 if judged and watch.get('dropped') else 0)])
    rows = watch.get('positions') or []
    _family(out, 'llmops_specdec_acceptance_drop',
            '1 when this draft position\'s acceptance dropped beyond noise since the configuration was kept.',
            [(base + [('position', row['position'])], 1 if row.get('dropped') else 0) for row in rows])
    rates = []
    for row in rows:
        for when in ('kept', 'now'):
            if row.get(when) is not None:
                rates.append((base + [('position', row['position']), ('when', when)], row[when]))
    if not rows:  # not judged: tonight's own figures still tell what runs
        now = watch.get('now_acceptance') or {}
        rates = [(base + [('position', i), ('when', 'now')], rate)
                 for i, rate in enumerate(now.get('per_position') or []) if rate is not None]
    _family(out, 'llmops_specdec_acceptance_rate',
            'Accepted / drafts per draft position (position "all": accepted / draft tokens), when kept and tonight.', rates)
    length = watch.get('mean_acceptance_length') or {}
    _family(out, 'llmops_specdec_acceptance_length', 'Mean acceptance length (tokens per verification step), when kept and tonight.',
            [(base + [('when', when)], length[when]) for when in ('kept', 'now')
             if isinstance(length.get(when), (int, float)) and not isinstance(length.get(when), bool)])
    return '\n'.join(out) + '\n'


def _figure(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def switch_textfile(record, timestamp):
    """node_exporter textfile lines for one switch's outcome record (``spec_switch_record``), newline-terminated.

    Series: ``llmops_specdec_switch_timestamp_seconds``, ``..._switch_kept{method,suite}`` (1 only when the
    candidate was kept, or was already running and judged a keep), ``..._switch_speedup{method,suite}``,
    ``..._switch_speedup_ci{method,suite,bound}``, ``llmops_specdec_output_tokens_per_second{role,concurrency}``
    (candidate and baseline), ``..._switch_output_divergence{method,suite}`` (the lossless check),
    ``..._switch_load_seconds{method,suite,phase}`` (the candidate's start, docs/load.md),
    ``..._switch_guardrail_fired{method,suite,concurrency,guardrail}`` and
    ``..._switch_prefix_cache_hit_ratio{method,suite,concurrency,role}`` (the verdict's guardrails),
    ``..._switch_wake_probe_collapsed{suite}`` (the wake probe of a parked baseline, when judged),
    ``..._switch_host_unstable{suite}`` and ``..._switch_drift_ratio{suite,concurrency}``
    (the restored configuration over the baseline, after a rollback).
    """
    method = (record.get('candidate') or {}).get('method') or 'none'
    suite = [('suite', record.get('suite', ''))]
    judged = [('method', method)] + suite
    out = ['# Managed by llmops.specdec; written after each switch on %s.' % record.get('host', '')]
    _family(out, 'llmops_specdec_switch_timestamp_seconds', 'When the last switch finished.',
            [([], int(round(float(timestamp))))])
    kept = record.get('outcome') in ('kept', 'unchanged') and record.get('decision') == 'keep'
    _family(out, 'llmops_specdec_switch_kept', '1 when the last candidate was kept, 0 when rolled back or failed.',
            [(judged, 1 if kept else 0)])
    if _figure(record.get('speedup')):
        _family(out, 'llmops_specdec_switch_speedup', 'Candidate output tok/s over baseline at the lowest concurrency.',
                [(judged, record['speedup'])])
    ci = record.get('speedup_ci')
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_figure(v) for v in ci):
        _family(out, 'llmops_specdec_switch_speedup_ci',
                'Confidence interval of the speed-up at the lowest concurrency (bound="lower" or "upper").',
                [(judged + [('bound', 'lower')], ci[0]), (judged + [('bound', 'upper')], ci[1])])
    rates = []
    for role, key in (('candidate', 'result'), ('baseline', 'baseline')):
        for level, fig in ((record.get(key) or {}).get('levels') or {}).items():
            if _figure((fig or {}).get('output_tok_s')):
                rates.append(([('role', role), ('concurrency', level)], fig['output_tok_s']))
    _family(out, 'llmops_specdec_output_tokens_per_second', 'Output tok/s of the candidate and of the baseline, per concurrency.',
            rates)
    lossless = record.get('lossless') or {}
    if _figure(lossless.get('rate')):
        _family(out, 'llmops_specdec_switch_output_divergence', 'Share of the prompts whose greedy output differed from '
                'the baseline\'s (the lossless check).', [(judged, lossless['rate'])])
    guardrails = record.get('guardrails') or {}
    rows = [row for row in guardrails.get('checks') or [] if isinstance(row, dict) and row.get('figure')]
    _family(out, 'llmops_specdec_switch_guardrail_fired', '1 when the guardrail stopped the candidate (always-valid bound '
            'for errors and the TTFT tail), 0 when it held (docs/verdict.md, Guardrails).',
            [(judged + [('concurrency', row.get('level')), ('guardrail', str(row['figure']).replace('guardrail_', ''))],
              1 if row.get('status') == 'fail' else 0) for row in rows])
    hits = [(judged + [('concurrency', row.get('level')), ('role', role)], row[key])
            for row in rows if row.get('figure') == 'guardrail_prefix_cache'
            for role, key in (('candidate', 'candidate'), ('baseline', 'baseline')) if _figure(row.get(key))]
    _family(out, 'llmops_specdec_switch_prefix_cache_hit_ratio', 'Prefix-cache hit rate over the benchmark, from the '
            'engine\'s own counters (hit tokens / queried tokens).', hits)
    probe = (record.get('park') or {}).get('wake_probe') if isinstance(record.get('park'), dict) else None
    if isinstance(probe, dict) and probe.get('judged'):
        _family(out, 'llmops_specdec_switch_wake_probe_collapsed', '1 when the woken baseline\'s speculative acceptance '
                'collapsed against the probe before parking (it was restarted instead), 0 when it held.',
                [(suite, 1 if probe.get('collapsed') else 0)])
    load = record.get('load') or {}
    phases = [(judged + [('phase', phase)], load[phase])
              for phase in ('weights', 'compile', 'graph_capture', 'kv_profile', 'other', 'total') if _figure(load.get(phase))]
    _family(out, 'llmops_specdec_switch_load_seconds', 'Seconds of the candidate\'s start, per phase the engine reported '
            '(phase="total": the unit\'s start to ready).', phases)
    _family(out, 'llmops_specdec_switch_host_unstable', '1 when the configuration measured again after a rollback moved '
            'beyond the verdict\'s host shift.', [(suite, 1 if record.get('host_unstable') else 0)])
    drift = [(suite + [('concurrency', row.get('level'))], row['ratio'])
             for row in (record.get('drift') or {}).get('levels') or []
             if row.get('figure') == 'output_tok_s' and _figure(row.get('ratio'))]
    _family(out, 'llmops_specdec_switch_drift_ratio',
            'Output tok/s of the restored configuration over the baseline\'s, after a rollback.', drift)
    _judged_on(out, record, judged, suite)
    return '\n'.join(out) + '\n'


def _judged_on(out, record, judged, suite):
    """Issue 32: the levels judged (and where they came from), the level that decided, the running requests the levels
    were read from, and the prompts (synthetic or the operator's)."""
    choice = record.get('levels') if isinstance(record.get('levels'), dict) else {}
    source = [('source', str(choice.get('source') or ''))]
    _family(out, 'llmops_specdec_switch_level', 'The concurrency levels the verdict judged (source="named", "observed" '
            'from the running-request gauge, "fallback" or "stored"); the value is the level.',
            [(judged + source + [('concurrency', str(level))], level) for level in choice.get('levels') or [] if _figure(level)])
    _family(out, 'llmops_specdec_switch_observed_running', 'Running requests the engine ran while busy before the '
            'baseline was measured (quantile="0.5" or "0.9"), the batch sizes the levels came from.',
            [(suite + [('quantile', q)], choice[key]) for q, key in (('0.5', 'median'), ('0.9', 'p90')) if _figure(choice.get(key))])
    decided = record.get('decided_by') if isinstance(record.get('decided_by'), dict) else {}
    if _figure(decided.get('level')):
        _family(out, 'llmops_specdec_switch_decided_level', 'The concurrency level that decided the verdict (a rollback: '
                'the highest failing level).', [(judged + [('figure', str(decided.get('figure') or ''))], decided['level'])])
    prompts = record.get('prompts') if isinstance(record.get('prompts'), dict) else {}
    if prompts:
        _family(out, 'llmops_specdec_switch_synthetic_prompts', '1 when the verdict ran on a shipped (synthetic) suite, 0 '
                'on the operator\'s prompts file or request log (source).',
                [(suite + [('source', str(prompts.get('source') or ''))], 1 if prompts.get('synthetic') else 0)])
