# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_nvml: real pynvml on the NVML shim with real holders; error paths through a pynvml stand-in."""
from __future__ import annotations

import pynvml
import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _nvml, _optional
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import UUIDS


@pytest.fixture
def host(gpu_host):
    return gpu_host(2)


@pytest.fixture
def nvml(host):
    session = _nvml.Nvml()
    yield session
    session.close()


class WithoutV2:
    """pynvml as an older nvidia-ml-py sees it: no nvmlMemory_v2, everything else real."""

    def __getattr__(self, name):
        if name == "nvmlMemory_v2":
            raise AttributeError(name)
        return getattr(pynvml, name)


def test_devices_memory_and_processes_from_the_shim(host, nvml):
    pid = host.hold((1, 3000))
    gpus = nvml.devices()
    assert [(g.index, g.uuid, g.name, g.minor) for g in gpus] == [
        (0, UUIDS[0], "NVIDIA H200", 0), (1, UUIDS[1], "NVIDIA H200", 1)]
    assert nvml.memory(gpus[1]) == (3000, "v2")  # v2: reserved memory is not "used"
    assert nvml.memory(gpus[0]) == (0, "v2")
    assert nvml.compute_processes(gpus[1]) == {pid: 3000}
    assert nvml.compute_processes(gpus[0]) == {}


def test_v1_fallback_counts_reserved_memory(host):
    host.hold((0, 100))
    session = _nvml.Nvml(WithoutV2())
    try:
        gpu = session.devices()[0]
        assert session.memory(gpu) == (100 + 615, "v1")
    finally:
        session.close()


def test_resolve_by_index_or_uuid(host, nvml):
    assert [g.index for g in nvml.resolve([])] == [0, 1]
    assert [g.index for g in nvml.resolve(["1", UUIDS[0].upper(), "0"])] == [0, 1]
    with pytest.raises(_nvml.NvmlError) as err:
        nvml.resolve(["0", "5", "GPU-nope"])
    assert "GPU 5, GPU-nope not found" in str(err.value)
    assert "0 (%s), 1 (%s)" % (UUIDS[0], UUIDS[1]) in str(err.value)


class StandIn:
    """A pynvml stand-in for answers the shim does not give: no driver, hidden usage, no minor."""

    NVMLError = pynvml.NVMLError
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    nvmlMemory_v2 = object()

    def __init__(self, init_error=None):
        self.init_error = init_error

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return "h%d" % index

    def nvmlDeviceGetUUID(self, handle):
        return b"GPU-x"

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlDeviceGetMinorNumber(self, handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        class P:
            def __init__(self, pid, used):
                self.pid, self.usedGpuMemory = pid, used
        return [P(7, None), P(8, 2 * _nvml.MIB), P(8, 3 * _nvml.MIB)]


def test_missing_driver_library_gives_a_clear_error():
    with pytest.raises(_nvml.NvmlError, match="libnvidia-ml.so.1 not found: is the NVIDIA driver installed"):
        _nvml.Nvml(StandIn(pynvml.NVMLError_LibraryNotFound(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)))
    with pytest.raises(_nvml.NvmlError, match="nvmlInit failed: Driver Not Loaded"):
        _nvml.Nvml(StandIn(pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)))


def test_hidden_usage_bytes_strings_minor_fallback_and_mig_sums():
    session = _nvml.Nvml(StandIn())
    gpu = session.devices()[0]
    assert (gpu.uuid, gpu.name, gpu.minor) == ("GPU-x", "NVIDIA H200", 0)
    assert session.compute_processes(gpu) == {7: None, 8: 5}


def test_missing_pynvml_module_is_reported(monkeypatch):
    monkeypatch.setattr(_nvml, "PYNVML", _optional.Optional("pynvml_absent_in_this_test"))
    with pytest.raises(_nvml.NvmlError, match="nvidia-ml-py"):
        _nvml.Nvml()


def test_cuda_visible_devices_by_index_uuid_and_prefix(host, nvml):
    gpus = nvml.devices()

    def pick(value):
        chosen, by_index = _nvml.visible_devices(gpus, value)
        return [g.index for g in chosen], by_index

    assert pick("1") == ([1], True)
    assert pick("1,0,1") == ([1, 0], True)
    assert pick(" %s , 0" % UUIDS[1]) == ([1, 0], True)
    assert pick(UUIDS[0][:10].lower()) == ([0], False)        # a unique prefix, as CUDA accepts
    assert pick("") == ([], False)                             # empty: no GPU visible
    assert pick("-1") == ([], False) and pick("0,-1,1") == ([0], True)  # CUDA stops at an invalid entry
    assert [g.index for g in nvml.visible("0")[0]] == [0]
    for bad, match in [("5", "no GPU 5"), ("GPU-nope", "matches no GPU"), ("GPU-", "several GPUs"),
                       ("MIG-1234", "MIG device")]:
        with pytest.raises(_nvml.NvmlError, match=match):
            _nvml.visible_devices(gpus, bad)
