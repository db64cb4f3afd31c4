# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML adapter over pynvml: devices, used memory (v2 struct, v1 fallback), compute processes.

Only this file talks to pynvml. Callers get plain data (``Gpu``, ``{pid: mib}``) and ``NvmlError``.
"""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _optional

# Optional here, required by its callers: gpu_reclaim fails with missing_required_lib("nvidia-ml-py") without it.
PYNVML = _optional.Optional("pynvml")

MIB = 1024 * 1024
# The v1 struct counts driver-reserved memory as used (615 MiB on an idle H200, see
# docs/gpu_reclaim.md); when a driver lacks v2 this much is allowed on top of the tolerance.
V1_RESERVED_ALLOWANCE_MIB = 1024


class NvmlError(Exception):
    """NVML is missing or answered with an error; the message says which and what to do."""


class Gpu:
    """One device: NVML index, UUID, name, the minor number of its ``/dev/nvidia<minor>`` node."""

    def __init__(self, index, uuid, name, minor, handle):
        self.index = index
        self.uuid = uuid
        self.name = name
        self.minor = minor
        self.handle = handle

    def describe(self):
        return {"index": self.index, "uuid": self.uuid, "name": self.name}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


class Nvml:
    """An initialised NVML session. ``lib`` is the pynvml module (a fake in tests)."""

    def __init__(self, lib=None):
        self.lib = lib if lib is not None else PYNVML.get()
        if self.lib is None:
            raise NvmlError("the Python module pynvml (package nvidia-ml-py) is not installed")
        try:
            self.lib.nvmlInit()
        except self.lib.NVMLError as exc:
            if isinstance(exc, getattr(self.lib, "NVMLError_LibraryNotFound", ())):
                raise NvmlError("NVML library libnvidia-ml.so.1 not found: is the NVIDIA driver "
                                "installed on this host? (%s)" % exc)
            raise NvmlError("nvmlInit failed: %s" % exc)
        self._v2 = None  # unknown until the first memory query

    def close(self):
        try:
            self.lib.nvmlShutdown()
        except self.lib.NVMLError:
            pass  # shutting down is best effort; the process exits right after

    def _call(self, what, func, *args, **kwargs):
        try:
            return func(*args, **kwargs)
        except self.lib.NVMLError as exc:
            raise NvmlError("%s failed: %s" % (what, exc))

    def devices(self):
        count = self._call("nvmlDeviceGetCount", self.lib.nvmlDeviceGetCount)
        gpus = []
        for index in range(count):
            handle = self._call("nvmlDeviceGetHandleByIndex(%d)" % index,
                                self.lib.nvmlDeviceGetHandleByIndex, index)
            uuid = _text(self._call("nvmlDeviceGetUUID", self.lib.nvmlDeviceGetUUID, handle))
            name = _text(self._call("nvmlDeviceGetName", self.lib.nvmlDeviceGetName, handle))
            try:
                minor = self.lib.nvmlDeviceGetMinorNumber(handle)
            except (self.lib.NVMLError, AttributeError):
                minor = index  # the node number equals the index on ordinary hosts
            gpus.append(Gpu(index, uuid, name, minor, handle))
        return gpus

    def resolve(self, selection):
        """Select GPUs by index (``"0"``, ``0``) or UUID; an empty selection means all of them."""
        gpus = self.devices()
        if not selection:
            return gpus
        by_key = {}
        for gpu in gpus:
            by_key[str(gpu.index)] = gpu
            by_key[gpu.uuid.lower()] = gpu
        chosen, missing = [], []
        for item in selection:
            gpu = by_key.get(str(item).strip().lower())
            if gpu is None:
                missing.append(str(item))
            elif gpu not in chosen:
                chosen.append(gpu)
        if missing:
            present = ", ".join("%d (%s)" % (g.index, g.uuid) for g in gpus) or "none"
            raise NvmlError("GPU %s not found; this host has: %s" % (", ".join(missing), present))
        return sorted(chosen, key=lambda g: g.index)

    def visible(self, value):
        """The GPUs a ``CUDA_VISIBLE_DEVICES`` value makes visible, in NVML's terms; see visible_devices."""
        return visible_devices(self.devices(), value)

    def memory(self, gpu):
        """``(used_mib, struct)`` where struct is ``"v2"`` (used excludes reserved) or ``"v1"``."""
        if self._v2 is not False:
            version = getattr(self.lib, "nvmlMemory_v2", None)
            try:
                if version is None:
                    raise TypeError("pynvml without nvmlMemory_v2")
                info = self.lib.nvmlDeviceGetMemoryInfo(gpu.handle, version=version)
                self._v2 = True
                return info.used // MIB, "v2"
            except (TypeError, self.lib.NVMLError) as exc:
                if self._v2:  # v2 worked before: this is a real error, not a missing struct
                    raise NvmlError("nvmlDeviceGetMemoryInfo_v2 failed: %s" % exc)
                self._v2 = False
        info = self._call("nvmlDeviceGetMemoryInfo", self.lib.nvmlDeviceGetMemoryInfo, gpu.handle)
        return info.used // MIB, "v1"

    def capacity(self, gpu):
        """``(total_mib, free_mib)``: free as an allocation on the GPU would find it (the v1 struct's free,
        driver-reserved memory not included in it)."""
        info = self._call("nvmlDeviceGetMemoryInfo", self.lib.nvmlDeviceGetMemoryInfo, gpu.handle)
        return info.total // MIB, info.free // MIB

    def compute_processes(self, gpu):
        """``{pid: mib}`` of processes with a compute context on ``gpu`` (mib None if hidden)."""
        procs = self._call("nvmlDeviceGetComputeRunningProcesses",
                           self.lib.nvmlDeviceGetComputeRunningProcesses, gpu.handle)
        found = {}
        for proc in procs:
            used = proc.usedGpuMemory
            mib = None if used is None else used // MIB
            # MIG slices report one entry per instance; keep the sum per pid.
            if proc.pid in found and found[proc.pid] is not None and mib is not None:
                mib += found[proc.pid]
            found[proc.pid] = mib
        return found


def visible_devices(gpus, value):
    """``(gpus, by_index)``: the GPUs ``value`` (a ``CUDA_VISIBLE_DEVICES`` string) names.

    Entries are indices or UUIDs (``GPU-...``, a unique prefix is enough, as CUDA accepts); like CUDA,
    parsing stops at an entry that is not a device number (``-1`` hides everything after it), and an
    empty value shows no GPU. An index is the NVML index only when the unit sets
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default order is fastest first); ``by_index`` says
    whether any entry was an index, so the caller can check that. Raises NvmlError for an index or
    UUID this host does not have, an ambiguous prefix, or a MIG device (name the GPUs instead).
    """
    chosen, by_index = [], False
    by_number = {g.index: g for g in gpus}
    for token in value.split(","):
        token = token.strip()
        if not token:
            break
        lowered = token.lower()
        if lowered.startswith("mig-"):
            raise NvmlError("CUDA_VISIBLE_DEVICES names MIG device %s; give the GPUs explicitly" % token)
        if lowered.startswith("gpu-"):
            found = [g for g in gpus if g.uuid.lower().startswith(lowered)]
            if len(found) != 1:
                raise NvmlError("CUDA_VISIBLE_DEVICES entry %s matches %s" % (
                    token, "no GPU of this host" if not found else "several GPUs (%s)"
                    % ", ".join(g.uuid for g in found)))
            gpu = found[0]
        elif token.isdigit():
            by_index = True
            gpu = by_number.get(int(token))
            if gpu is None:
                raise NvmlError("CUDA_VISIBLE_DEVICES entry %s: this host has no GPU %s (it has %d)"
                                % (token, token, len(gpus)))
        else:
            break  # CUDA ignores this entry and everything after it ("-1" hides all)
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen, by_index
