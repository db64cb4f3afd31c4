# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every YAML file of the tree parses, and every conditional in it is a string: an unquoted
`- a == ['x: y']` is a mapping to YAML, which ansible-core 2.19 refuses only when the task runs (a
Molecule run much later), not at syntax check."""
from __future__ import annotations

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
DIRS = ("roles", "playbooks", "molecule", "awx", "plugins", "meta", "inventory", "changelogs", "tests/install", "tests/awx")
KEYS = ("that", "when", "failed_when", "changed_when", "until")


def _files():
    for top in DIRS:
        yield from sorted((ROOT / top).rglob("*.yml"))


def _bad(node, where):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, (str, bool)):
                        yield "%s: %s: %r" % (where, key, item)
            yield from _bad(value, where)
    elif isinstance(node, list):
        for item in node:
            yield from _bad(item, where)


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_conditionals_are_strings(path):
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        pytest.fail("%s is not YAML: %s" % (path, exc))
    assert list(_bad(data, path.relative_to(ROOT))) == []
