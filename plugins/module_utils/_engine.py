# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry of engines: one adapter module per engine (``_engine_<name>.py``), resolved here once.

Everything the collection knows about an engine lives in its adapter; the rest of the collection asks
``get(name)`` (or iterates ``ENGINES``) instead of naming an engine. An adapter is a plain module (stdlib
only, so the guard's payload and AnsiballZ carry it) that defines every name in ``FACTS``:

``NAME`` / ``TITLE`` / ``RELEASE``
    the registry key, the name people read, the pinned release messages cite
``DOCS_URL`` / ``UNIT_DESCRIPTION`` / ``EXECUTABLE`` / ``DEFAULT_PORT``
    the unit's ``Documentation=`` and ``Description=``, the role's defaults
``API_KEY_VAR`` / ``KEY_LAUNCHER`` / ``serve_argv(executable, model, key_in_env)``
    where the API key waits in the environment file; the argv up to the model
``TP_FLAG`` / ``MEMORY_FLAG`` / ``MAX_LEN_FLAG``
    the spellings of the base flags the collection renders
``LOAD_FORMAT_FLAG`` / ``LOAD_FORMATS`` / ``DIRECT_IO_LOAD_FORMATS``
    how the weights are read: the flag, the formats accepted, those that read past the page cache
``GROUP_FLAGS`` / ``GROUP_DEFAULT_PORT`` / ``group_args(rank, nnodes, address, port)``
    a serving group across nodes: the flags that make one, the rendezvous port when none is set, one node's flags
    (_group.py)
``OWNED_FLAGS`` / ``FLAG_SPELLING`` / ``SECRET_FLAGS`` / ``SCHEDULE_OFF`` / ``SCHEDULE_OFF_UNLESS_ONE``
    the flags the collection sets itself, how the parser reads a name (underscores, abbreviations), the
    credential flags and what to use instead, the flags that switch a schedule off
``cache_env(cache_dir)``
    the environment that puts the engine's compilation caches (its own, Inductor's, Triton's, ...) in one directory
``HEALTH_PATH`` / ``READY_LISTS_MODEL``
    readiness: the path that must answer 200, and whether /v1/models must list the model too
``LOG_PREFIX``
    a regular expression for what the engine's logger puts before a line (a crash's root cause is reported)
``LOAD_FIGURES`` / ``LOAD_SPANS`` / ``COMPILE_CACHE_LINES`` / ``LOAD_PROGRESS`` / ``READY_LINE`` / ``LOAD_STAGES`` /
``load_phases(figures)``
    the start-up lines that time the load (with a figure, or between two lines), what the engine says of its
    compile cache, the weights' progress bar, the line that ends the start, what it is doing after a line, and the
    phases from the figures
``PARK``
    parking: the flag that makes it free memory, the environment its routes need, the routes
``METRICS_MARKER`` / ``ACCEPTANCE_SOURCE`` / ``ACCEPTANCE_METRICS``
    where speculative acceptance is read from
``RUNNING_GAUGE``
    the running-request gauge of /metrics (the batch it runs now) and the label values a series must have
``PREFIX_CACHE_METRICS``
    the /metrics counters of prompt tokens queried in the prefix cache and of those it had (``hits``, ``queries``)
``TUNE_BATCH_ENDS``
    the batch sizes a schedule band may end at as given (None: any)

``METHODS`` / ``METHOD_ALIASES`` / ``QUANTIZATIONS``
    the engine's side of each canonical method (``_spec.METHOD_DOCS``): its own name, the parameters it takes
    (``_specdef.REQUIRED``, ``ENGINE`` or a fixed default); deprecated names it rewrites; draft quantizations
``CHECKS`` / ``NO_SCHEDULE`` / ``SCHEDULE_TOP_K``
    per method, the engine's own rules beyond the table (``check(out, tp, given)``, raising
    ``_specdef.SpecError``); why a method cannot take a schedule; what k means beside a schedule
``render_spec(spec, schedule_dir)`` / ``SCHEDULE_FILES`` / ``schedule_file(schedule, schedule_dir)`` / ``schedule_warnings(schedule)``
    a normalized spec as argv; whether (and which) file a schedule needs; bands the engine reads differently

``_spec`` validates a request once, engine-neutrally (types, ranges, schedules), and asks the adapter for
the rest; ``_spec.METHODS`` joins the adapters' tables method by method.
"""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_sglang, _engine_vllm

__all__ = ["ENGINES", "NAMES", "FACTS", "DEFAULT", "UnknownEngine", "get", "known", "facts"]

# Every fact an adapter supplies (tests/unit/plugins/module_utils/test__engine.py walks the registry).
FACTS = ("NAME", "TITLE", "RELEASE", "DOCS_URL", "UNIT_DESCRIPTION", "EXECUTABLE", "DEFAULT_PORT",
         "API_KEY_VAR", "KEY_LAUNCHER", "serve_argv", "TP_FLAG", "MEMORY_FLAG", "MAX_LEN_FLAG",
         "LOAD_FORMAT_FLAG", "LOAD_FORMATS", "DIRECT_IO_LOAD_FORMATS", "GROUP_FLAGS", "GROUP_DEFAULT_PORT", "group_args",
         "OWNED_FLAGS", "FLAG_SPELLING", "SECRET_FLAGS", "SCHEDULE_OFF", "SCHEDULE_OFF_UNLESS_ONE", "schedule_env_conflict",
         "cache_env", "HEALTH_PATH", "READY_LISTS_MODEL", "LOG_PREFIX",
         "LOAD_FIGURES", "LOAD_SPANS", "COMPILE_CACHE_LINES", "LOAD_PROGRESS", "READY_LINE", "LOAD_STAGES",
         "load_phases", "PARK", "METRICS_MARKER", "ACCEPTANCE_SOURCE", "ACCEPTANCE_METRICS",
         "RUNNING_GAUGE", "PREFIX_CACHE_METRICS", "TUNE_BATCH_ENDS", "METHODS", "METHOD_ALIASES", "NO_SCHEDULE", "SCHEDULE_TOP_K", "QUANTIZATIONS", "CHECKS",
         "SCHEDULE_FILES", "schedule_file", "schedule_warnings", "render_spec")

# The registry, in the order docs and choices list the engines; the first is the default.
ENGINES = dict((mod.NAME, mod) for mod in (_engine_vllm, _engine_sglang))
NAMES = tuple(ENGINES)
DEFAULT = NAMES[0]


class UnknownEngine(ValueError):
    """An engine name that is not in the registry."""


def known(name):
    """Whether ``name`` is a registered engine."""
    return isinstance(name, str) and name in ENGINES


def get(name):
    """The adapter of ``name``; raises UnknownEngine naming the registered engines."""
    if not known(name):
        raise UnknownEngine("unknown engine %r; supported engines: %s" % (name, ", ".join(NAMES)))
    return ENGINES[name]


def facts(name):
    """The plain facts of ``name`` (no functions) as a dict, for templates and playbooks."""
    mod = get(name)
    return dict((fact.lower(), getattr(mod, fact)) for fact in FACTS if not callable(getattr(mod, fact)))
