from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import patch_exits


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    patch_exits(monkeypatch)
