# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Optional third-party libraries, one way for all: imported on first use, None when absent.

Ansible forks a fresh worker for every task and imports a collection's filter files anew in each, so
an import at the top of a module_util is paid by every set_fact that uses any of the collection's
filters: matplotlib alone took about 0.8 s of each. Importing on first use keeps that cost with the
one task that draws. Modules report a missing library with ``missing_required_lib`` and ``error``.
"""

from __future__ import annotations

import importlib
import traceback


class Optional:
    """``module`` (or its attribute ``name``), imported by the first ``get()``; None if it cannot be."""

    def __init__(self, module, name=None):
        self.module = module
        self.name = name
        self.error = None  # the ImportError's traceback, once get() has failed
        self._tried = False
        self._value = None

    def get(self):
        if not self._tried:
            self._tried = True
            try:
                found = importlib.import_module(self.module)
                self._value = getattr(found, self.name) if self.name else found
            except ImportError:
                self.error = traceback.format_exc()
        return self._value
