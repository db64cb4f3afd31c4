# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A switch request from flat vars: nothing the operator typed is dropped without a word."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _request, _spec, _verdict

THRESHOLDS = sorted(_verdict.DEFAULT_THRESHOLDS)
FLAT = dict.fromkeys(list(_spec.PARAMS) + THRESHOLDS, "")


def build(method="ngram", present=(), spec_params=None, **given):
    flat = dict(FLAT, **given)
    return _request.build(method, flat, spec_params, list(present) + list(given), THRESHOLDS)


def test_flat_values_and_survey_blanks():
    req = build(num_speculative_tokens="4", prompt_lookup_max=3, min_speedup="1.1", max_error_rate="")
    assert req == {"spec": {"method": "ngram", "num_speculative_tokens": "4", "prompt_lookup_max": 3},
                   "thresholds": {"min_speedup": "1.1"}}
    assert build(method="")["spec"] == {"method": "none"}


def test_flat_values_override_the_mapping_form():
    req = build(spec_params={"num_speculative_tokens": 2, "prompt_lookup_min": 1}, num_speculative_tokens=6)
    assert req["spec"] == {"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 1}


@pytest.mark.parametrize("typo, closest", [
    ("prompt_lookup_mx", "prompt_lookup_max"), ("num_speculative_token", "num_speculative_tokens"),
    ("min_speed_up", "min_speedup"), ("draft_modle", "draft_model"), ("methd", "method"),
])
def test_a_near_miss_name_is_an_error_with_the_closest_valid_name(typo, closest):
    with pytest.raises(_request.RequestError, match="%s \\(did you mean %s\\?\\)" % (typo, closest)):
        build(present=[typo])


def test_unrelated_and_own_variables_are_not_typos():
    names = ["spec_switch_suite", "spec_server_port", "ansible_host", "inventory_hostname", "specdec_serial",
             "awx_job_id", "molecule_scenario_directory", "mock_engine_profile", "gpus", "hostname", "engine", "sweep",
             # longer names that contain a parameter are not slips of it
             "switch_draft_model", "switch_ngram", "my_num_speculative_tokens", "max_tokens"]
    assert _request.typos(names, list(_spec.PARAMS) + THRESHOLDS + list(_request.REQUEST_NAMES)) == []


def test_unknown_keys_of_the_mapping_form_are_refused():
    with pytest.raises(_request.RequestError, match="unknown parameter 'prompt_lookup_mx' in spec_params "
                                                    "\\(did you mean prompt_lookup_max\\?\\)"):
        build(spec_params={"prompt_lookup_mx": 3})
    with pytest.raises(_request.RequestError, match="spec_params must be a mapping"):
        build(spec_params="num_speculative_tokens=3")
