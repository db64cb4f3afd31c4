# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a start's minutes went, from the engine's own start-up lines (issue 34, docs/load.md).

The engine's adapter names the lines (``LOAD_FIGURES``, ``LOAD_PROGRESS``, ``LOAD_STAGES``) and how its figures
make the phases (``load_phases``); this reads them from the journal lines of one start: what it is doing now
(for the readiness wait's progress line) and, once it serves, the breakdown: weights, compilation, graph capture,
KV profile, and the rest of the time from the unit's start to ready as ``other``. Standard library only.
"""
from __future__ import annotations

import re

from ansible_collections.llmops.specdec.plugins.module_utils import _engine

__all__ = ["PHASES", "figures", "spans", "compile_cache", "stage", "breakdown", "ready_after"]

PHASES = ("weights", "compile", "graph_capture", "kv_profile")


def _compiled(engine):
    mod = _engine.get(engine)
    return ([(key, re.compile(rx)) for key, rx in mod.LOAD_FIGURES], re.compile(mod.LOAD_PROGRESS),
            [(re.compile(rx), name) for rx, name in mod.LOAD_STAGES])


def figures(engine, lines):
    """{figure: seconds}: per figure the first of its patterns that matches; ranks side by side count once (the
    largest), distinct graph runners (a `what` group) one after the other (summed); a cache hit is ``compile_cached``."""
    found = {}
    for key, rx in _compiled(engine)[0]:
        if key in found:
            continue
        groups = {}
        for line in lines:
            m = rx.search(line)
            if m:
                what = m.groupdict().get("what")
                groups[what] = max(groups.get(what, 0.0), float(m.group("s")))
        if groups:
            found[key] = round(sum(groups.values()), 3)
    return found


def stage(engine, lines):
    """What the engine is doing, from the last stage line it logged: 'loading weights 41 %' while the bar runs."""
    _figs, progress, stages = _compiled(engine)
    now, pct = "starting", None
    for line in lines:
        for rx, name in stages:
            if rx.search(line):
                now, pct = name, None
        m = progress.search(line)
        if m and now in ("starting", "loading weights"):
            now, pct = "loading weights", int(m.group("pct"))
    return now if pct is None else "%s %d %%" % (now, pct)


def spans(engine, entries):
    """{figure: seconds} of the phases the engine logs no figure for (``LOAD_SPANS``), from ``[(seconds, message)]``:
    from the first start line to the first end line after it."""
    out = {}
    for key, start_rx, end_rx in _engine.get(engine).LOAD_SPANS:
        start = next((t for t, msg in entries if re.search(start_rx, msg)), None)
        end = None if start is None else next((t for t, msg in entries if t >= start and re.search(end_rx, msg)), None)
        if end is not None:
            out[key] = round(end - start, 3)
    return out


def compile_cache(engine, lines):
    """What the engine said of its compiled graphs in the cache (``COMPILE_CACHE_LINES``): ``("hit", None)``,
    ``("load_failed", why)`` (found, not loadable, compiled again), or ``(None, None)`` (none found, or not said)."""
    said = {}
    for state, rx in _engine.get(engine).COMPILE_CACHE_LINES:
        for line in lines:
            m = re.search(rx, line)
            if m:
                said.setdefault(state, (m.groupdict().get("why") or "").strip()[:300] or None)
    for state in ("load_failed", "hit"):  # a rank that failed to load compiled again: the start paid for it
        if state in said:
            return state, said[state]
    return None, None


def breakdown(engine, lines, total, entries=None):
    """The phases of a start that took ``total`` seconds (None when unknown): each phase's seconds (None where the
    engine reports none; from ``entries`` ``[(seconds, message)]`` where only two lines time it), ``other`` the
    rest, and what became of the compiled graphs in the cache: ``compile_cache`` ``hit`` / ``load_failed`` /
    ``miss`` (none found: a cold cache) / None (nothing compiled, or the engine does not say), with
    ``compile_cache_error`` when the engine could not load them, and ``compile_cache_hit``."""
    figs = figures(engine, lines)
    for key, seconds in spans(engine, entries or []).items():
        figs.setdefault(key, seconds)
    phases = _engine.get(engine).load_phases(figs)
    out = {name: (None if phases.get(name) is None else round(phases[name], 3)) for name in PHASES}
    known = sum(v for v in out.values() if v is not None)
    out["total"] = None if total is None else round(total, 3)
    out["other"] = None if total is None else round(max(0.0, total - known), 3)
    state, why = compile_cache(engine, lines)
    if "compile_cached" in figs and "compile" not in figs:
        state = "hit"
    elif state is None and out["compile"] is not None and _engine.get(engine).COMPILE_CACHE_LINES:
        state = "miss"
    out["compile_cache"] = state
    out["compile_cache_hit"] = state == "hit"
    if why:
        out["compile_cache_error"] = why
    return out


def ready_after(engine, entries):
    """Seconds from the unit's start to the engine's ready line, from ``[(seconds since the start, message)]``;
    None when it has not logged it."""
    rx = re.compile(_engine.get(engine).READY_LINE)
    return next((round(t, 3) for t, msg in entries if rx.search(msg)), None)
