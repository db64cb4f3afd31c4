# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_fleet.py and _slices.py: the capacity guard, the outcome of a rolling switch, and
slices that keep serving groups whole (docs/fleet.md).

Documentation of each filter lives beside this file in <filter name>.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_fleet = module_util("_fleet")
_slices = module_util("_slices")


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (KeyError, TypeError, ValueError) as exc:  # FleetError and SliceError are ValueErrors
            raise AnsibleFilterError("%s: %s" % (func.__name__, exc))

    call.__name__ = func.__name__
    return call


def fleet_guard_plan(hostvars, hosts, batch, max_out_of_service=None, max_fail_percentage=None, max_failed_hosts=None, serial=None):
    return _fleet.guard_plan(hostvars, hosts, batch, max_out_of_service, max_fail_percentage, max_failed_hosts, serial)


def fleet_guard(plan, hostvars, alive):
    return _fleet.guard(plan, hostvars, alive)


def fleet_outcome(hostvars, hosts):
    return _fleet.outcome(hostvars, hosts)


def fleet_slice(hostvars, hosts, slice_):
    return _slices.pick(hostvars, hosts, slice_)


class FilterModule:
    def filters(self):
        return {func.__name__: _wrap(func) for func in (fleet_guard_plan, fleet_guard, fleet_outcome, fleet_slice)}
