# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs hold no template in their texts: validate_argument_spec templates the spec it is given,
so a ``{{ ... }}`` in a description is evaluated at every role start (one naming an inventory group in
spec_server_nodes' failed every deploy). Defaults may be templates: they are meant to be."""
from __future__ import annotations

import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPECS = sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")))


def _strings(node, where=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, "%s.%s" % (where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, "%s[%d]" % (where, i))
    elif isinstance(node, str):
        yield where, node


def test_every_role_has_a_spec():
    assert len(SPECS) >= 2


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.split(os.sep)[-3])
def test_no_template_in_an_argument_spec(path):
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    found = [(where, text) for where, text in _strings(spec)
             if ".description" in where or ".short_description" in where
             if "{{" in text or "{%" in text]
    assert not found, found
