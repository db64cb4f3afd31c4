# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request from flat vars: the canonical parameter names, and the request built from them."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_request = module_util("_request")
_spec = module_util("_spec")
_verdict = module_util("_verdict")


def spec_param_names(_ignored=None):
    # Every name, whatever the method: a parameter that does not fit is then refused by
    # spec_normalize with the allowed list, instead of being silently dropped here.
    return sorted(_spec.PARAMS)


def spec_request(flat, method=None, spec_params=None, present=()):
    try:
        return _request.build(method, flat, spec_params, present, sorted(_verdict.DEFAULT_THRESHOLDS))
    except _request.RequestError as exc:
        raise AnsibleFilterError("spec_request: %s" % exc)


class FilterModule:
    def filters(self):
        return {"spec_param_names": spec_param_names, "spec_request": spec_request}
