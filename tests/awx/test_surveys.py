# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The surveys: valid for AWX, generated from the spec model, and wired to the playbooks they launch."""
from __future__ import annotations

import subprocess

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _spec, _verdict
from conftest import REPO, template_for
import controller_rules as awx
import playbook_vars

SWITCH = "playbooks/switch_spec.yml"
THRESHOLDS = sorted(_verdict.DEFAULT_THRESHOLDS)
# What an operator must be able to set from each template's survey (the playbook's inputs).
MUST_ASK = {
    "playbooks/switch_spec.yml": ["specdec_hosts", "engine", "method", "spec_switch_suite", "spec_switch_prompts_file"]
    + sorted(_spec.PARAMS) + THRESHOLDS,
    "playbooks/baseline.yml": ["specdec_hosts", "spec_switch_suite"],
    "playbooks/sweep.yml": ["specdec_hosts", "spec_switch_suite"],
    "playbooks/rollback.yml": ["specdec_hosts"],
    "playbooks/reclaim.yml": ["specdec_hosts", "scope"],
}
# Survey variables the switch playbook does not read yet: the lead maps them in
# playbooks/tasks/request.yml (engine guard; flat thresholds over spec_switch_thresholds).


def _surveyed(templates):
    return {t["playbook"]: t for t in templates.values() if t.get("survey_enabled")}


def _questions(template):
    return {q["variable"]: q for q in template["survey_spec"]["spec"]}


def test_committed_surveys_equal_the_generated_ones():
    proc = subprocess.run([str(REPO / "awx" / "surveys" / "generate"), "--check"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_survey_is_accepted_by_awx(templates):
    surveyed = _surveyed(templates)
    assert sorted(surveyed) == sorted(MUST_ASK)
    for playbook, template in surveyed.items():
        assert awx.spec_errors(template["survey_spec"]) == [], playbook


@pytest.mark.parametrize("playbook", sorted(MUST_ASK))
def test_survey_asks_for_every_input_of_its_playbook(templates, playbook):
    asked = set(_questions(template_for(templates, playbook)))
    assert set(MUST_ASK[playbook]) <= asked, sorted(set(MUST_ASK[playbook]) - asked)


def _survey_variables(templates):
    out = []
    for playbook, template in sorted(_surveyed(templates).items()):
        out.extend((playbook, variable) for variable in _questions(template))
    return out


def _wired(pair):
    return pytest.param(*pair, id="%s:%s" % (pair[0].split("/")[-1], pair[1]))


# The parameters are collected from the generated switch survey, so a new question is checked too.
_ALL_SURVEY_VARIABLES = [(pb, v) for pb in MUST_ASK for v in MUST_ASK[pb]]


@pytest.mark.parametrize("playbook,variable", [_wired(p) for p in _ALL_SURVEY_VARIABLES])
def test_every_survey_variable_is_read_by_the_playbook(templates, playbook, variable):
    assert variable in _questions(template_for(templates, playbook))
    names = playbook_vars.read_names(playbook)
    if variable in _spec.PARAMS:
        # playbooks/tasks/request.yml reads the spec parameters by the names the spec model lists.
        assert playbook_vars.uses_filter(playbook, "spec_param_names"), "%s does not collect spec parameters" % playbook
    elif variable in _verdict.DEFAULT_THRESHOLDS:
        # ... and the thresholds by the names the verdict model lists.
        assert playbook_vars.uses_filter(playbook, "verdict_thresholds"), "%s does not collect thresholds" % playbook
    else:
        assert variable in names, "%s never reads %s" % (playbook, variable)


def test_no_survey_question_outside_the_checked_inputs(templates):
    for playbook, template in _surveyed(templates).items():
        assert set(_questions(template)) == set(MUST_ASK[playbook]), playbook


def test_switch_survey_mirrors_the_spec_model(templates):
    questions = _questions(template_for(templates, SWITCH))
    assert questions["method"]["choices"] == list(_spec.METHODS)
    assert questions["engine"]["choices"] == list(_spec.ENGINES)
    for name, info in _spec.PARAMS.items():
        q = questions[name]
        assert not q["required"], name  # required-ness depends on the method; _spec decides at run time
        assert "default" not in q, name  # a default would be sent for every method
        if info["type"] is int:
            assert (q["type"], q["min"], q["max"]) == ("integer", info["min"], info["max"])
        elif info["type"] is float:
            assert q["type"] == "float" and q["min"] <= info["min"] and q["max"] >= info["max"]
        elif "choices" in info:
            assert (q["type"], q["choices"]) == ("multiplechoice", list(info["choices"]))
        else:
            assert q["type"] == "text"
    for name in THRESHOLDS:
        assert questions[name]["type"] == "float" and "default" not in questions[name]


def test_blank_optional_answers_send_nothing(templates):
    """Questions left blank reach the playbook as undefined, so inventory values and method defaults apply."""
    extra = awx.launch_extra_vars(template_for(templates, SWITCH), {"method": "ngram", "num_speculative_tokens": 4})
    assert extra == {"specdec_hosts": "inference", "engine": "vllm", "method": "ngram",
                     "num_speculative_tokens": 4, "spec_switch_suite": "reasoning"}


@pytest.mark.parametrize("answers,why", [
    ({"method": "bogus"}, "expected to be one of"),
    ({"method": "ngram", "num_speculative_tokens": 0}, "too small"),
    ({"method": "ngram", "num_speculative_tokens": "4"}, "expected to be an integer"),
    ({"method": "ngram", "min_speedup": 500.0}, "too large"),
    ({"method": "ngram", "ngram_match_type": "DFS"}, "expected to be one of"),
    ({"method": "ngram", "specdec_hosts": ""}, "too small"),
    ({"method": "ngram", "spec_switch_thresholds": {"min_speedup": 2}}, "not allowed on launch"),
])
def test_switch_survey_refuses_bad_answers(templates, answers, why):
    with pytest.raises(awx.LaunchRejected, match=why):
        awx.launch_extra_vars(template_for(templates, SWITCH), answers)


@pytest.mark.parametrize("engine", _spec.ENGINES)
def test_every_method_can_be_requested_through_the_survey(templates, engine):
    """For each method an engine has, answering its required parameters yields a request that the
    spec model accepts (as request.yml builds it: method plus the parameters given)."""
    template = template_for(templates, SWITCH)
    samples = {int: lambda i: max(i["min"], min(4, i["max"])), float: lambda i: float(i["min"]),
               str: lambda i: i["choices"][0] if "choices" in i else "org/draft-model"}
    for method in _spec.methods_for(engine):
        required = [p for p, d in _spec.METHODS[method][engine]["params"].items() if d is _spec.REQUIRED]
        # "at least one of" groups (vLLM dspark: a draft or k; SGLang uno: k or the tree): answer the first.
        required += [group[0] for group in _spec.METHODS[method][engine].get("one_of", []) if group[0] not in required]
        answers = {"engine": engine, "method": method}
        answers.update({p: samples[_spec.PARAMS[p]["type"]](_spec.PARAMS[p]) for p in required})
        extra = awx.launch_extra_vars(template, answers)
        request = {k: v for k, v in extra.items() if k == "method" or k in _spec.PARAMS}
        _spec.normalize(request, engine)
