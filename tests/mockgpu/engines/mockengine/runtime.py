# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What both API processes share: stop handling, the lifetime cap, profile/fault resolution."""
import os
import signal
import sys
import threading
import time

from . import settings, timing
from .metrics import Stats
from .server import EngineState


class Stopper:
    """SIGTERM/SIGINT set an event the main thread waits on (or SIGTERM is ignored: fault)."""

    def __init__(self, ignore_sigterm):
        self.event = threading.Event()
        self.start = time.monotonic()
        self.cap = settings.max_lifetime()
        if ignore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_):
        self.event.set()

    def wait(self, seconds):
        """True when a stop was requested (or the lifetime cap passed)."""
        if self.cap and time.monotonic() - self.start > self.cap:
            return True
        return self.event.wait(seconds)


def resolve(engine, method_key, fault_key):
    """(faults, timing params, load_seconds, profile) for this start."""
    profile = settings.load_profile()
    faults = settings.load_faults(fault_key)
    params = timing.resolve(profile, engine, method_key, faults.get("profile"))
    load = float(faults.get("load_seconds", profile.get("load_seconds", 2.0)))
    return faults, params, load, profile


def make_state(engine, model, served, max_model_len, params, spec, faults, profile, max_running, **kw):
    stats = Stats(spec.depth if spec else 0)
    state = EngineState(engine, model, served, max_model_len, params, spec, stats, faults, max_running, **kw)
    eos = profile.get("eos_tokens") or [64, 768]
    state.eos_range = (int(eos[0]), int(eos[1]))
    return state


def escape_rank(faults, tp):
    """Which rank escapes under the escape_worker fault (true = rank 0), or None."""
    val = faults.get("escape_worker")
    if val is None or val is False:
        return None
    rank = 0 if val is True else int(val)
    return min(max(rank, 0), tp - 1)


def fail_message(faults, default):
    val = faults.get("fail_start")
    if not val:
        return None
    return val if isinstance(val, str) else default


def print_error(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def exit_now(code):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
