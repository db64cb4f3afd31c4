# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_verdict.py: the keep-or-rollback decision for playbooks (docs/verdict.md).

verdict_summary is _verdict_stats.summarize, verdict_line _verdict_explain.verdict_line.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_verdict = module_util("_verdict")
_verdict_stats = module_util("_verdict_stats")
_verdict_explain = module_util("_verdict_explain")
_verdict_guardrails = module_util("_verdict_guardrails")


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_verdict.VerdictError, KeyError, TypeError, ValueError) as exc:
            raise AnsibleFilterError("%s: %s" % (func.__name__, exc))
    call.__name__ = func.__name__
    return call


def _string_keys(result):
    # Keys as strings: summaries and verdicts travel through JSON (host files, set_stats, reports).
    if isinstance(result.get("levels"), dict):
        result = dict(result, levels={str(k): v for k, v in result["levels"].items()})
    if isinstance(result.get("requests"), dict):
        result = dict(result, requests={str(k): v for k, v in result["requests"].items()})
    return result


def verdict_thresholds(overrides):
    return _verdict.thresholds(overrides)


def verdict_plan(overrides=None):
    return _verdict.plan(overrides)


def verdict_summary(bench, max_tokens=None):
    return _string_keys(_verdict_stats.summarize(bench, max_tokens))


def verdict_decide(candidate, baseline, thresholds=None, plan=None, max_tokens=None, lossy=False, prior_acceptance=None):
    return _string_keys(_verdict.decide(baseline, candidate, thresholds, plan, max_tokens, final=True, lossy=lossy,
                                        prior_acceptance=prior_acceptance))


def verdict_round(candidate, baseline, thresholds=None, plan=None, max_tokens=None, lossy=False, prior_acceptance=None):
    return _string_keys(_verdict.decide(baseline, candidate, thresholds, plan, max_tokens, final=False, lossy=lossy,
                                        prior_acceptance=prior_acceptance))


def verdict_prior_acceptance(records, engine, model, suite, spec):
    return _verdict_guardrails.prior_acceptance(records, engine, model, suite, spec)


def verdict_problems(measurement, thresholds=None, max_tokens=None, side="baseline"):
    return _verdict.problems(measurement, thresholds, max_tokens, side)


def verdict_drift(after, before, plan=None):
    return _verdict.drift(before, after, plan)


def verdict_baseline(stored, settings, max_age=None, thresholds=None, min_requests=None, now=None, missing=None,
                     key=None, state_dir=None, host=None):
    return _verdict.baseline_check(stored, settings, max_age, now, thresholds, min_requests, missing, key, state_dir, host)


def verdict_line(record):
    return _verdict_explain.verdict_line(record)


class FilterModule:
    def filters(self):
        return {func.__name__: _wrap(func) for func in (
            verdict_thresholds, verdict_plan, verdict_summary, verdict_decide, verdict_round, verdict_problems,
            verdict_drift, verdict_baseline, verdict_line, verdict_prior_acceptance)}
