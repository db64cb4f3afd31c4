# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_tune.py: the K grid and the schedule of playbooks/tune.yml (docs/tune.md)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_tune = module_util("_tune")


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_tune.TuneError, KeyError, TypeError, ValueError) as exc:
            raise AnsibleFilterError("%s: %s" % (func.__name__, exc))
    call.__name__ = func.__name__
    return call


def tune_settings(overrides=None):
    return _tune.settings(overrides)


def tune_requests(request, tune, engine, tensor_parallel_size=1):
    return _tune.requests(request, _tune.settings(tune), engine, tensor_parallel_size)


def tune_next(tried, tune, levels):
    """The next K to load, 0 when the grid is done (K = 0 is never loaded: it is the baseline)."""
    tune = _tune.settings(tune)
    return _tune.next_k(tune, _tune.cells(_tune.fixed_k(tried)), levels) or 0


def tune_pick(tried, levels, engine, request):
    return _tune.pick(tried, levels, engine, request)


class FilterModule(object):
    def filters(self):
        return {f.__name__: _wrap(f) for f in (tune_settings, tune_requests, tune_next, tune_pick)}
