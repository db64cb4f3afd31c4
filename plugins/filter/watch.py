# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_watch.py (the nightly acceptance watch), its textfile lines in _prom.py, and
module_utils/_park_probe.py (the wake probe of a parked engine, the same test)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_prom = module_util("_prom")
_watch = module_util("_watch")
_park_probe = module_util("_park_probe")


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_watch.WatchError, KeyError, TypeError, ValueError) as exc:
            raise AnsibleFilterError("%s: %s" % (func.__name__, exc))
    call.__name__ = func.__name__
    return call


def acceptance_summary(bench):
    return _watch.summarize(bench)


def acceptance_watch(now, stored, running_unit=None, settings=None):
    return _watch.watch(stored, now, running_unit, settings)


def wake_probe(before, after, settings=None):
    return _park_probe.compare(before, after, settings)


def acceptance_textfile(watch, labels=None, timestamp=None):
    return _prom.acceptance_textfile(watch, labels, timestamp)


class FilterModule:
    def filters(self):
        return {func.__name__: _wrap(func) for func in (acceptance_summary, acceptance_watch, acceptance_textfile, wake_probe)}
