# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import patch_exits


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)
