# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the mock GPU host tests: the shim built once from source, a fresh mock host per test."""
from __future__ import annotations

import os
import subprocess

import pytest

from mockgpu_testhost import MOCKGPU, MockHost


@pytest.fixture(scope="session")
def shim(tmp_path_factory):
    """Path of libnvidia-ml.so.1 freshly built from tests/mockgpu/nvml with build.sh."""
    out = tmp_path_factory.mktemp("shim") / "libnvidia-ml.so.1"
    subprocess.run([os.path.join(MOCKGPU, "nvml", "build.sh"), str(out)], check=True, timeout=120)
    return str(out)


@pytest.fixture
def host(tmp_path, shim):
    h = MockHost(str(tmp_path), shim)
    yield h
    h.cleanup()
