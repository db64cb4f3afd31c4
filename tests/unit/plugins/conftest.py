# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for tests that run the collection on the NVML shim with real holder processes."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.guard_host import FakeSystemd
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import GpuHost, build_shim


@pytest.fixture(scope="session")
def shim(tmp_path_factory):
    # Compiled once per test session, whichever test file asks first.
    return build_shim(tmp_path_factory.mktemp("shim"))


@pytest.fixture
def gpu_host(tmp_path, shim, monkeypatch):
    """``gpu_host(gpus)`` -> a temporary mock GPU host, cleaned up after the test."""
    hosts = []

    def make(gpus=3):
        hosts.append(GpuHost(tmp_path, shim, monkeypatch, gpus=gpus))
        return hosts[-1]

    yield make
    for h in hosts:
        h.cleanup()


@pytest.fixture
def gpus(gpu_host):
    """A mock GPU host of two GPUs (the guard's and the restore's tests: production and its candidate)."""
    return gpu_host(2)


@pytest.fixture
def sd(tmp_path, monkeypatch, shim):
    """A fake systemd that runs the units' ExecStart as real processes (guard_host.FakeSystemd)."""
    fake = FakeSystemd(tmp_path, monkeypatch, shim)
    yield fake
    fake.cleanup()
