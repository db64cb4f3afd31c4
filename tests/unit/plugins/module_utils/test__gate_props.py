# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property-based tests of the gate over the request surface (hypothesis, bounded for CI).

For any value of any rendered field: either the gate refuses it with a message naming the field,
or the rendered unit, read back by systemd's rules, holds exactly the intended argv, environment and
user, and no directive the template did not write. A sample of accepted units is read by the real
``systemd-analyze verify`` (the mock host's ``systemctl show`` check is in molecule/hostile).
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _spec, _unit
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.systemd_syntax import (
    parse_environment, parse_exec,
)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.unit_render import (
    directives, render, values,
)

REFUSED = (_gate.GateError, _spec.SpecError, _unit.UnitQuoteError)
BASE = directives(render()[0])
# Text that reaches for every trick: systemd syntax, shell, JSON, specifiers, line breaks, wide Unicode.
HOSTILE = st.text(alphabet=st.sampled_from(list(" \t\n\r\x00\x0b\x1b\x7f\x85\u2028\u2029\"'\\$%;=[]{}#@:-+/.,~`")
                                           + list("abcXYZ019") + ["\u00e9", "\u202e", "\U0001f600"]),
                  max_size=40)
ANY_TEXT = st.one_of(HOSTILE, st.text(max_size=40))


def _field_value():
    """(field name as the error names it, the override for render, a check of the accepted unit)."""
    def spec_draft(v):
        return ("draft_model", {"spec": {"method": "eagle3", "num_speculative_tokens": 3, "draft_model": v}})

    def model(v):
        return ("spec_server_model", {"model": v})

    def served(v):
        return ("spec_server_served_model_name", {"served_model_name": v})

    def env(v):
        return ("spec_server_env", {"env": {"NOTE": v}})

    def extra(v):
        return ("spec_server_extra_args", {"extra_args": ["--note", v]})

    def user(v):
        return ("spec_server_user", {"user": v})

    def device(v):
        return ("spec_server_device_allow", {"device_allow": [v]})

    def workdir(v):
        return ("spec_server_working_dir", {"working_dir": "/srv/" + v})

    makers = [spec_draft, model, served, env, extra, user, device, workdir]
    return st.tuples(st.sampled_from(makers), ANY_TEXT).map(lambda mv: mv[0](mv[1]))


def _check_accepted(field, overrides, text, checked):
    got = directives(text)
    lists = {("[Service]", "DeviceAllow"), ("[Service]", "ReadWritePaths")}
    assert [d for d in got if d not in lists] == [d for d in BASE if d not in lists], field
    assert parse_exec(values(text, "ExecStart")[0]) == checked["argv"]
    env = parse_environment(values(text, "Environment")[0])
    if field == "spec_server_env":
        assert env["NOTE"] == overrides["env"]["NOTE"]
    if field == "spec_server_extra_args":
        assert checked["argv"][-2:] == overrides["extra_args"]
    if field == "spec_server_model":
        assert overrides["model"] in checked["argv"]
    if field == "draft_model":
        assert _spec.engine_args(overrides["spec"], "vllm")[-1] in checked["argv"]
    assert values(text, "User") == [checked["user"]]


@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_field_value())
def test_any_value_is_refused_naming_its_field_or_renders_exactly(case):
    field, overrides = case
    try:
        text, checked = render(**overrides)
    except REFUSED as exc:
        assert field in str(exc), (field, str(exc))
        return
    _check_accepted(field, overrides, text, checked)


# Hostile but printable: what the gate lets through, so that most examples reach systemd-analyze (the
# control characters, line breaks and bidi marks of HOSTILE are refused before a unit exists, and the
# test above proves that for every field).
PRINTABLE_HOSTILE = st.text(alphabet=st.sampled_from(list(" \"'\\$%;=[]{}#@:-+/.,~`") + list("abcXYZ019")
                                                     + ["\u00e9", "\U0001f600"]), min_size=1, max_size=40)
SYSTEMD_EXAMPLES = 25


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)")
def test_accepted_units_are_read_by_systemd_without_a_word(tmp_path):
    tried, reached = [], []

    @hsettings(max_examples=SYSTEMD_EXAMPLES, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow])
    @given(st.tuples(PRINTABLE_HOSTILE, PRINTABLE_HOSTILE, PRINTABLE_HOSTILE))
    def one_unit(words):
        draft, note, arg = words
        tried.append(words)
        try:
            text, _checked = render(executable="/usr/bin/python3", env={"NOTE": note}, extra_args=["--note", arg],
                                    spec={"method": "eagle3", "num_speculative_tokens": 3, "draft_model": "/m/" + draft})
        except REFUSED:
            return
        path = os.path.join(str(tmp_path), "vllm-server.service")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        proc = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, timeout=60,
                              check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), text
        reached.append(words)

    one_unit()
    # The property holds only as far as examples reached systemd: say how many, and require most.
    print("systemd-analyze read %d of %d generated units" % (len(reached), len(tried)))
    assert len(tried) >= SYSTEMD_EXAMPLES and len(reached) >= 0.8 * len(tried), (len(reached), len(tried))
