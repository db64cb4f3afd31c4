# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which variables a playbook reads: Jinja in its own files and in every file it reaches.

Follows import_playbook, import_tasks/include_tasks and llmops.specdec roles (include_role,
import_role, roles:) as Ansible resolves them in this repo; a role counts whole (tasks, defaults,
vars, templates, handlers), since its task files include each other. Only expressions count
(``{{ }}``, ``{% %}``, when/that/until/...): a word in a comment or a quoted dict key is not a read.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE_REF = re.compile(r"llmops\.specdec\.([a-z_]+)")
FILE_REF = re.compile(r"(?:import_playbook|import_tasks|include_tasks):\s*([\w./-]+\.ya?ml)")
JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
BARE_KEYS = {"when", "that", "until", "changed_when", "failed_when", "loop", "with_items", "hosts",
             "serial", "max_fail_percentage"}
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def reachable_files(playbook):
    """Files a playbook reaches, the playbook first."""
    start = (REPO / playbook).resolve()
    seen, todo = [], [start]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.append(path)
        text = path.read_text(encoding="utf-8")
        for ref in FILE_REF.findall(text):
            for base in (path.parent, path.parent.parent / "tasks"):
                if (base / ref).exists():
                    todo.append((base / ref).resolve())
                    break
        for role in ROLE_REF.findall(text):
            role_dir = REPO / "roles" / role
            if role_dir.is_dir():
                todo.extend(sorted(p.resolve() for p in role_dir.rglob("*") if p.is_file()))
    return seen


def _yaml_expressions(node, key=None):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _yaml_expressions(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from _yaml_expressions(v, key)
    elif isinstance(node, str):
        if key in BARE_KEYS:
            yield node
        for match in JINJA.finditer(node):
            yield match.group(1) or match.group(2)


def expressions(path):
    """Every Jinja expression in one file (YAML parsed; other files scanned for {{ }} / {% %})."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yml", ".yaml"):
        for doc in yaml.safe_load_all(text):
            yield from _yaml_expressions(doc)
    else:
        for match in JINJA.finditer(text):
            yield match.group(1) or match.group(2)


def uses_filter(playbook, name):
    """Whether an expression of the playbook applies the collection filter ``name``."""
    pattern = re.compile(r"\|\s*llmops\.specdec\.%s\b" % re.escape(name))
    return any(pattern.search(expr) for path in reachable_files(playbook) for expr in expressions(path))


def read_names(playbook):
    """Identifiers read by the playbook's expressions (attribute names after '.' excluded)."""
    names = set()
    for path in reachable_files(playbook):
        for expr in expressions(path):
            expr = QUOTED.sub("''", expr)
            names.update(re.findall(r"(?<![\w.])([A-Za-z_]\w*)", expr))
    return names
