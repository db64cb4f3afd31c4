# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parking an engine without stopping it: vLLM's sleep mode and SGLang's memory saver.

The routes, as the pinned engines define them (tests/contracts/test_park_contracts.py holds the mock to them):
- vLLM 0.33, registered only with VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/serve/dev/sleep/api_router.py):
  ``POST /sleep?level=1|2&mode=abort`` -> ``{"status": "sleeping", "level": L}``; ``POST /wake_up[?tags=T]``
  -> ``{"status": "awake", "tags": null}``; ``GET /is_sleeping`` -> ``{"is_sleeping": bool}``. Only
  ``--enable-sleep-mode`` allocates through the cumem pool that sleeping frees: without it vLLM still
  answers "sleeping" and frees nothing ("Sleep mode freed 0.00 GiB memory"), and so does the mock.
- SGLang 0.5.23 (sglang/srt/entrypoints/http_server.py): ``GET|POST /release_memory_occupation`` and
  ``/resume_memory_occupation`` with body ``{"tags": [...] | null}``, 200 with a ``null`` body. Only
  ``--enable-memory-saver`` makes releasing free anything.

On the mock, each rank process keeps ``residual_mib`` of its GPU while parked (its CUDA context and
allocator pools: 2.8 GiB per process on the lent H200), the rest is given back; moving the weights to
CPU memory and back takes ``weights`` / ``gib_per_s`` seconds (profile ``park``; 54 GB/s each way was
measured on the H200). Level 2 drops the weights: waking reloads them like a load. A wake-up on a GPU
without room fails like CUDA (the rank exits, the engine with it). Completions while parked get 503:
the mock's choice, not checked against the engines.

Fault ``wake_oom`` (the faults file, read when the wake-up comes, so a test can set it while the engine is
parked): the wake-up fails like CUDA on a GPU another tenant filled meanwhile: the ranks exit with
``torch.OutOfMemoryError`` and the engine with them. Fault ``draft_lost_on_wake`` (read when the wake-up
comes): the engine wakes and serves, but its draft did not come back: every drafted token is rejected from
then on (acceptance 0, vLLM issue 52479 after sleep level 2), so it serves at the cost of drafting with
nothing accepted.
"""
import glob
import json
import os
import signal
import threading
import time

from . import gpumem
from . import settings as settings_mod

DEFAULTS = {"residual_mib": 2867, "weights_share": 0.6, "gib_per_s": 50.0}


def settings(profile):
    """The park section of the timing profile, over the defaults above."""
    out = dict(DEFAULTS)
    out.update(profile.get("park") or {})
    return out


def held_mib(pid, gpu):
    """MiB that process `pid` holds on `gpu` by the holder registry, or None without an entry."""
    for path in glob.glob(os.path.join(gpumem.registry_dir(), "%d.%d" % (pid, gpu))):
        try:
            with open(path, encoding="utf-8") as f:
                return int(json.loads(f.readline())["mib"])
        except (OSError, ValueError, KeyError):
            return None
    return None


class Parker:
    """The engine's ranks (pid, gpu, mib as loaded) and whether they are parked."""

    def __init__(self, ranks, profile, enabled, load_seconds, report=None, fault_key="none", log=None):
        self.ranks = [r for r in ranks if r.get("pid") and r.get("gpu") is not None]
        self.cfg = settings(profile)
        self.enabled = enabled  # --enable-sleep-mode / --enable-memory-saver
        self.report = report  # called with (freed MiB, MiB still held) after parking
        self.load_seconds = load_seconds
        self.fault_key = fault_key  # the faults file's entry of this start (wake_oom)
        self.log = log
        self.parked = False
        self.level = 0
        self.lock = threading.Lock()
        # Fault draft_lost_on_wake: the wake-up does not bring the draft back; from then on no drafted token is
        # accepted (vLLM issue 52479: an MTP draft not reloaded after sleep level 2 and wake, a silent 2x slowdown).
        self.draft_lost = False

    def _weights_gib(self):
        return max((r["mib"] for r in self.ranks), default=0) * self.cfg["weights_share"] / 1024.0

    def _signal_and_wait(self, sig, target_of, timeout=30.0):
        """Signal every rank, then wait until the registry shows each one's target (False: a rank died)."""
        for r in self.ranks:
            os.kill(r["pid"], sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(held_mib(r["pid"], r["gpu"]) == target_of(r) for r in self.ranks):
                return True
            if any(held_mib(r["pid"], r["gpu"]) is None for r in self.ranks):
                return False
            time.sleep(0.05)
        return False

    def fail(self, msg):
        """A rank dies of ``msg`` (logged), and the engine with it (its supervisor sees the rank gone)."""
        if self.log:
            self.log.error(msg)
        for r in self.ranks:
            try:
                os.kill(r["pid"], signal.SIGKILL)
            except OSError:
                pass

    def park(self, level):
        """Give the GPU memory back (nothing without the engine's flag). Returns the seconds it took."""
        with self.lock:
            t0 = time.monotonic()
            if self.enabled and not self.parked:
                # Level 1 copies the weights to CPU memory first; level 2 drops them.
                if level == 1:
                    time.sleep(self._weights_gib() / self.cfg["gib_per_s"])
                self._signal_and_wait(signal.SIGUSR1, lambda r: min(r["mib"], int(self.cfg["residual_mib"])))
            freed = sum(r["mib"] - (held_mib(r["pid"], r["gpu"]) or 0) for r in self.ranks) if self.enabled else 0
            kept = sum(held_mib(r["pid"], r["gpu"]) or 0 for r in self.ranks)
            if self.report:
                self.report(freed, kept)
            self.parked, self.level = True, level
            return time.monotonic() - t0

    def wake(self):
        """Take the memory back. Returns True when every rank has it again (False: a rank died)."""
        with self.lock:
            if not self.parked:
                return True
            ok = True
            if self.enabled and settings_mod.load_faults(self.fault_key).get("wake_oom"):
                self.fail("torch.OutOfMemoryError: CUDA out of memory while waking up (fault wake_oom)")
                return False
            if self.enabled:
                ok = self._signal_and_wait(signal.SIGUSR2, lambda r: r["mib"])
                if ok:
                    seconds = self.load_seconds if self.level == 2 else self._weights_gib() / self.cfg["gib_per_s"]
                    time.sleep(seconds)
            if ok:
                self.parked, self.level = False, 0
                if settings_mod.load_faults(self.fault_key).get("draft_lost_on_wake"):
                    self.draft_lost = True
            return ok
