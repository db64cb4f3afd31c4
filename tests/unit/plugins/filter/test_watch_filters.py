# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""acceptance_* filters through Jinja2 as playbooks call them (errors wrapped, docs beside each filter)."""
from __future__ import annotations

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from jinja2 import Environment

from ansible_collections.llmops.specdec.plugins.filter.watch import FilterModule
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.test__watch import KEPT, UNIT, bench, level, stored

FILTER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "plugins", "filter")


@pytest.fixture(name="env")
def env_fixture():
    env = Environment()
    env.filters.update(FilterModule().filters())
    return env


def test_filter_names_and_their_docs():
    names = sorted(FilterModule().filters())
    assert names == ["acceptance_summary", "acceptance_textfile", "acceptance_watch", "wake_probe"]
    for name in names:
        doc = yaml.safe_load(open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8"))
        assert doc["DOCUMENTATION"]["name"] == name and doc["RETURN"]["_value"]["type"]


def test_watch_and_textfile_in_a_template(env):
    out = env.from_string("{% set w = now | acceptance_watch(kept, unit) %}{{ w.line }}|"
                          "{{ w | acceptance_textfile({'host': 'h'}) }}").render(
        now=bench(level(1, 12000, [0.6, 0.38, 0.3])), kept=stored(KEPT), unit=UNIT)
    line, text = out.split("|", 1)
    assert line.startswith("acceptance dropped at position 1: 0.45 -> 0.38")
    assert 'llmops_specdec_acceptance_drop{host="h",position="1"} 1' in text
    assert env.from_string("{{ (b | acceptance_summary).accepted_per_position }}").render(b=bench(level(1, 10, [0.5]))) == "[5]"


def test_errors_surface_as_filter_errors(env):
    with pytest.raises(AnsibleFilterError, match="acceptance_watch: unknown acceptance watch setting 'x'"):
        env.from_string("{{ n | acceptance_watch(k, none, {'x': 1}) }}").render(n=bench(level(1, 100, [0.5])), k=stored(KEPT))
