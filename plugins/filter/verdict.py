# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_verdict.py: the keep-or-rollback decision for playbooks."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_verdict.VerdictError, KeyError, TypeError) as exc:
            raise AnsibleFilterError("%s: %s" % (func.__name__, exc))
    return call


def verdict_thresholds(overrides):
    return _verdict.thresholds(overrides)


def verdict_summary(bench):
    # Keys as strings: the summary travels through JSON (host files, set_stats, reports).
    summary = _verdict.summarize(bench)
    return {"levels": {str(k): v for k, v in summary["levels"].items()}}


def verdict_decide(candidate, baseline, thresholds=None):
    return _verdict.decide(baseline, candidate, thresholds)


class FilterModule:
    def filters(self):
        return {
            "verdict_thresholds": _wrap(verdict_thresholds),
            "verdict_summary": _wrap(verdict_summary),
            "verdict_decide": _wrap(verdict_decide),
        }
