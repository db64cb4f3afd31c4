# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module_util imported on its first use, for the filter plugins.

Ansible finds a collection's filter by importing the collection's filter files in name order until one
has it, in every forked worker (every task) anew, and its collection loader compiles each source
every time (it keeps no bytecode). A filter file that imported its module_utils at the top made each
``set_fact`` with one of our filters compile most of them; each file now names its module_utils with
``module_util("_name")`` and only the filter that runs imports what it needs (bench/README.md,
"Filters on first use").

Standard library only.
"""

from __future__ import annotations

import importlib

__all__ = ["module_util"]

_PACKAGE = "ansible_collections.llmops.specdec.plugins.module_utils."


class _LazyModule:
    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attr):  # only for what the instance itself does not have: the module's names
        if self._module is None:
            self._module = importlib.import_module(_PACKAGE + self._name)
        return getattr(self._module, attr)

    def __repr__(self):
        return "<module_util %s%s>" % (self._name, "" if self._module else " (not imported yet)")


def module_util(name):
    """The collection's module_util ``name`` (``"_verdict"``), imported when one of its names is first used."""
    return _LazyModule(name)
