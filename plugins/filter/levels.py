# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_levels.py: the concurrency level that decided a verdict (issue 32, item 4)."""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_levels = module_util("_levels")


def verdict_decided_by(verdict):
    return _levels.deciding(verdict)


class FilterModule:
    def filters(self):
        return {"verdict_decided_by": verdict_decided_by}
