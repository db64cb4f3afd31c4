# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one speculative-decoding model: methods, parameters, validation; rendering through the engine's adapter.

An operator names a method once, with canonical parameters, e.g.
``{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}``.
Every method is described once, in ``METHOD_DOCS`` below, every parameter once in ``PARAMS`` (type,
range, meaning). Which engines have a method, under which name, with which parameters (required,
defaults), the engine's own checks, its spelling and its rendering live in the engine's adapter
(``_engine_<name>.py``, through the registry ``_engine``); ``METHODS`` joins the adapters' tables. The
engines' names were read from the pinned packages and are judged by their real parsers in ``tests/engines``.

API (stdlib only, runs on controller and targets):

``normalize(spec, engine, tensor_parallel_size=1, warnings=None) -> dict``
    Validate ``spec`` for ``engine`` (a name in ``_engine.NAMES``) and return a new dict with the method
    first, then its parameters with types coerced (``"5"`` -> ``5``, as ``-e`` extra vars arrive as
    text) and engine defaults filled where the engine's default is a fixed value, so the unit file
    and reports say exactly what runs. Idempotent. Raises ``SpecError`` naming what is allowed.
    A deprecated alias (an engine's ``METHOD_ALIASES``, e.g. the model-specific ``deepseek_mtp`` ...
    names) becomes its canonical method; what the operator should know but may run anyway is appended
    to ``warnings`` (a list).
``spec_warnings(spec, engine, tensor_parallel_size=1) -> list``
    Those warnings alone (``[]`` for a clean request), for a role to show.
``engine_args(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR) -> list``
    The argv fragment for the engine (normalizes first; the adapter's ``render_spec``). ``none`` gives ``[]``.
``schedule_file(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR) -> dict | None``
    The file an engine reads a spec's ``schedule`` from: ``{"path": ..., "text": ...}``, the file
    ``engine_args`` refers to; ``None`` when the engine needs no file (or there is no schedule).
``describe(spec) -> str``
    A short label for reports, e.g. ``ngram k=5 lookup=2..4``.
``methods_for(engine) -> list``, ``engines_for(method) -> list``, ``schedule_text(schedule) -> str``
    What the table holds, for error messages and docs; a schedule in its compact form.

Canonical semantics: ``num_speculative_tokens`` is the number of tokens drafted per step; an engine
that counts the verify window including the root token renders ``k`` as ``k+1`` (its adapter says
how). Engines with a draft tree can instead take the trio ``eagle_steps`` / ``eagle_topk`` / ``num_draft_tokens``.

``schedule``: K per band of concurrent requests (batch size), ``[{"batch": [1, 8], "k": 4},
{"batch": [9, 32], "k": 2}, {"batch": [33, None], "k": 0}]`` or compactly ``"1-8:4,9-32:2,33+:0"``.
Bands start at 1 and follow each other without gaps or overlaps; the last one is open (the engines
keep its K for every larger batch). ``k: 0`` stops speculating in that band. Each adapter renders it
in the engine's own form (inside its config, or a file the unit names).
"""
from __future__ import annotations

import math
import re

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate, _specdef

__all__ = ["SpecError", "ENGINES", "METHODS", "ALIASES", "PARAMS", "QUANTIZATIONS", "MODEL_REFS", "SCHEDULE_DIR",
           "normalize", "spec_warnings",
           "engine_args", "schedule_file", "schedule_text", "describe", "methods_for", "engines_for"]

ENGINES = _engine.NAMES  # the registry's engines (_engine), in its order
# Where the role installs the schedule files an engine reads (``SCHEDULE_FILES``) (root-owned, named by their content so a
# rolled-back unit still finds its own schedule).
SCHEDULE_DIR = "/etc/llmops-specdec/schedules"


SpecError = _specdef.SpecError
REQUIRED = _specdef.REQUIRED  # the operator must give it
ENGINE = _specdef.ENGINE  # optional; when absent the engine chooses (model-dependent, so not filled in)

_K_MAX = _specdef.K_MAX
_BATCH_MAX = _specdef.BATCH_MAX
_BANDS_MAX = 64

# Every canonical parameter: type, range, meaning. Ranges are the engines' own where they check;
# the upper bounds on sizes are ours, to catch typos (documented in docs/spec-methods.md).
PARAMS = {
    "num_speculative_tokens": {"type": int, "min": 1, "max": _K_MAX, "doc": "tokens drafted per step"},
    "prompt_lookup_min": {"type": int, "min": 1, "max": 128, "doc": "shortest n-gram matched in the prompt"},
    "prompt_lookup_max": {"type": int, "min": 1, "max": 128, "doc": "longest n-gram matched in the prompt"},
    "draft_model": {"type": str, "doc": "draft model / EAGLE head / MTP weights: HF id or local path"},
    "draft_tensor_parallel_size": {"type": int, "min": 1, "max": 64, "doc": "TP of the draft: 1 or the target's TP"},
    "draft_quantization": {"type": str, "doc": "quantization of the draft weights (engine's own names, e.g. fp8)"},
    "eagle_steps": {"type": int, "min": 1, "max": 64, "doc": "EAGLE tree depth (draft forward passes per step)"},
    "eagle_topk": {"type": int, "min": 1, "max": 64, "doc": "EAGLE tree branching per step"},
    "num_draft_tokens": {"type": int, "min": 2, "max": 1024, "doc": "EAGLE tree size verified per step, root included"},
    "ngram_min_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "n-gram tree: minimum BFS breadth"},
    "ngram_max_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "n-gram tree: maximum BFS breadth"},
    "ngram_match_type": {"type": str, "choices": ("BFS", "PROB"), "doc": "n-gram tree match type"},
    "ngram_max_trie_depth": {"type": int, "min": 1, "max": 1024, "doc": "n-gram trie depth"},
    "suffix_max_tree_depth": {"type": int, "min": 1, "max": 128, "doc": "suffix tree depth (prefix match + speculation)"},
    "suffix_max_cached_requests": {"type": int, "min": 0, "max": 10 ** 9, "doc": "responses kept in the global suffix tree (0: off)"},
    "suffix_max_spec_factor": {"type": float, "min": 0.0, "max": 1000.0, "doc": "speculation length per matched prefix token"},
    "suffix_min_token_prob": {"type": float, "min": 0.0, "max": 1.0, "doc": "lowest estimated token probability drafted"},
    "uno_lora_path": {"type": str, "doc": "UNO: the draft LoRA checkpoint on the target (HF id or local path)"},
    "schedule": {"type": "schedule", "doc": "K per batch-size band, e.g. 1-8:4,9-32:2,33+:0 (0: no drafting there)"},
}

# Every method, once: what it is. Which engines run it, under which name, with which parameters (each
# REQUIRED, ENGINE: optional, the engine decides, or a fixed default that normalize() fills in), is each
# engine's own table (``METHODS`` of ``_engine_<name>``); METHODS below joins them, method by method:
# ``{method: {"doc": ..., ENGINE_NAME: {"name", "params"[, "one_of"]}, ...}}``.
METHOD_DOCS = {
    "none": "no speculative decoding (the baseline)",
    "ngram": "prompt lookup: draft by matching the last n-gram against the prompt/output so far",
    "ngram_gpu": "prompt lookup matched on the GPU (the engine's GPU n-gram proposer)",
    "eagle": "EAGLE draft head on the target's hidden states",
    "eagle3": "EAGLE-3 draft head (multi-layer hidden states)",
    "mtp": "the model's own multi-token-prediction layers (DeepSeek-style MTP / NEXTN)",
    "draft_model": "a separate small LLM drafts (same vocabulary as the target)",
    "suffix": "suffix decoding (Arctic Inference): suffix trees over the prompt and past outputs",
    "dflash": "DFlash: a block-diffusion draft fills a block of tokens in one parallel pass",
    "dspark": "DSpark: parallel block drafting with a confidence head (weights in the draft or the target checkpoint)",
    "uno": "UNO: the target drafts through a LoRA adapter (no separate draft model; TP 1)",
    "frozen_kv_mtp": "Frozen-KV MTP: a Gemma-4 assistant draft reading the target's KV cache",
}
METHODS = dict((method, dict([("doc", doc)] + [(name, mod.METHODS[method]) for name, mod in _engine.ENGINES.items()
                                               if method in mod.METHODS]))
               for method, doc in METHOD_DOCS.items())
# Deprecated method names -> canonical method, from every engine that deprecated some (the canonical
# method exists on each engine, so the alias works everywhere, with a warning).
ALIASES = {}
for _mod in _engine.ENGINES.values():
    ALIASES.update(_mod.METHOD_ALIASES)
# The quantization names each engine takes for the draft (``draft_quantization``); plugins that register
# their own methods are not supported here.
QUANTIZATIONS = dict((name, mod.QUANTIZATIONS) for name, mod in _engine.ENGINES.items())

# Parameters that name a model: a hub id (``org/name`` or a bare legacy ``name``, the hub's own rules:
# letters, digits, '-', '_', '.', at most 96 each, no '--' or '..') or an absolute local path without a
# '.' or '..' part. URLs, relative paths and '~' are refused: the engines would read them as something else.
MODEL_REFS = ("draft_model", "uno_lora_path")
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HUB_ID = re.compile(r"(?:%s/)?%s\Z" % (_HUB_PART, _HUB_PART))

_INT = re.compile(r" *[+-]?[0-9]+ *\Z")  # plain spaces around only: "5\n" is refused, never coerced
_FLOAT = re.compile(r" *[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)? *\Z")
_BAND = re.compile(r"\s*([0-9]+)\s*(?:(-)\s*([0-9]+)|(\+))?\s*\Z")


def methods_for(engine):
    """Methods the engine supports, in table order."""
    return [m for m, d in METHODS.items() if engine in d]


def engines_for(method):
    """Engines that support the method."""
    method = ALIASES.get(method, method)
    return [e for e in ENGINES if e in METHODS.get(method, {})]


def _where_param_applies(param):
    return ["%s/%s" % (e, m) for m, d in METHODS.items() for e in ENGINES
            if e in d and param in d[e]["params"]]


def _int(name, value, lo, hi):
    """An integer in [lo, hi]; numeric text and integral floats accepted, booleans never."""
    bad = SpecError("%s must be an integer, got %r" % (name, value))
    if isinstance(value, bool):  # bool is an int subclass; true/false is never meant as a size
        raise bad
    if isinstance(value, str) and _INT.match(value):
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise bad
    if not lo <= value <= hi:
        raise SpecError("%s must be between %s and %s, got %r" % (name, lo, hi, value))
    return value


def _coerce(name, value):
    """Check one value against PARAMS[name]; return it with the canonical type."""
    info = PARAMS[name]
    kind = info["type"]
    if kind == "schedule":
        return _schedule(value)
    if kind is int:
        return _int(name, value, info["min"], info["max"])
    bad = SpecError("%s must be %s, got %r" % (name, {float: "a number", str: "a non-empty string"}[kind], value))
    if isinstance(value, bool):
        raise bad
    if kind is float:
        if isinstance(value, str):
            if not _FLOAT.match(value):
                raise bad
            value = float(value)
        if not isinstance(value, (int, float)) or math.isnan(value):
            raise bad
        value = float(value)
    else:
        if not isinstance(value, str) or not value.strip():
            raise bad
        try:  # the one gate: no control characters, a length cap, no value that reads as a flag
            value = _gate.text(name, value.strip(), max_len=1024, no_dash=True)
        except _gate.GateError as exc:
            raise SpecError(str(exc))
        if name in MODEL_REFS:
            _model_ref(name, value)
        if "choices" in info:
            if value.upper() not in info["choices"]:
                raise SpecError("%s must be one of %s, got %r" % (name, ", ".join(info["choices"]), value))
            value = value.upper()
    if "min" in info and not info["min"] <= value <= info["max"]:
        raise SpecError("%s must be between %s and %s, got %r" % (name, info["min"], info["max"], value))
    return value


def _model_ref(name, value):
    """A hub id or an absolute path without '.'/'..' parts (see MODEL_REFS); raises SpecError naming ``name``."""
    if value.startswith("/"):
        if not any(part in (".", "..") for part in value.split("/")):
            return value
    elif _HUB_ID.match(value) and ".." not in value and "--" not in value:
        return value
    raise SpecError("%s must be a model hub id (org/name) or an absolute path without '..', got %r"
                    % (name, _gate._clip(value)))  # pylint: disable=protected-access


def _check_quantization(out, engine):
    value = out.get("draft_quantization")
    if value is not None and value not in QUANTIZATIONS[engine]:
        near = _gate.suggest(value, QUANTIZATIONS[engine])
        raise SpecError("draft_quantization must be one of %s's quantization methods (%s), got %r%s" % (
            engine, ", ".join(QUANTIZATIONS[engine]), value, " (did you mean %s?)" % near if near else ""))


# ---------------------------------------------------------------------------------------------
# Schedules: [{"batch": [lo, hi], "k": K}, ..., {"batch": [lo, None], "k": K}]
# ---------------------------------------------------------------------------------------------

_SCHEDULE_FORM = ("schedule must be a list of {batch: [first, last], k: K} bands (the last band's last "
                  "may be null: every larger batch) or the compact text '1-8:4,9-32:2,33+:0'")


def _band_text(field, text):
    """'9-32' -> (9, 32); '33+' or '33' (a last band) -> (33, None)."""
    m = _BAND.match(text) if isinstance(text, str) else None
    if not m:
        raise SpecError("%s must be FIRST-LAST or FIRST+ (e.g. 9-32, 33+), got %r" % (field, text))
    return int(m.group(1)), int(m.group(3)) if m.group(2) else None


def _band(i, item):
    field = "schedule[%d]" % i
    if isinstance(item, str):  # one band of the compact form, '9-32:2'
        batch, sep, k = item.partition(":")
        if not sep:
            raise SpecError("%s must be BATCHES:K (e.g. 9-32:2 or 33+:0), got %r" % (field, item))
        item = {"batch": batch, "k": k}
    if not isinstance(item, dict):
        raise SpecError("%s: %s; got %r" % (field, _SCHEDULE_FORM, item))
    unknown = sorted(str(k) for k in item if k not in ("batch", "k"))
    if unknown:
        raise SpecError("%s has unknown key(s) %s; a band has batch and k" % (field, ", ".join(unknown)))
    if "batch" not in item or "k" not in item:
        raise SpecError("%s needs batch and k, got %r" % (field, item))
    batch = item["batch"]
    if isinstance(batch, str):
        lo, hi = _band_text(field + ".batch", batch)
    elif isinstance(batch, (list, tuple)) and len(batch) in (1, 2):
        lo = _int(field + ".batch first", batch[0], 1, _BATCH_MAX)
        hi = None if len(batch) == 1 or batch[1] is None else _int(field + ".batch last", batch[1], 1, _BATCH_MAX)
    else:
        raise SpecError("%s.batch must be [first, last] (last null for every larger batch) or 'FIRST-LAST', "
                        "got %r" % (field, batch))
    lo = _int(field + ".batch first", lo, 1, _BATCH_MAX)
    if hi is not None:
        hi = _int(field + ".batch last", hi, 1, _BATCH_MAX)
        if hi < lo:
            raise SpecError("%s.batch runs backwards: %d-%d" % (field, lo, hi))
    k = _int(field + ".k", item["k"], 0, _K_MAX)
    return [lo, hi], k


def _bands(value):
    """[([lo, hi], k)] as given (any accepted form), each band checked, the order checked."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()] if value.strip() else []
    if isinstance(value, (dict, bytes)) or not isinstance(value, (list, tuple)):
        raise SpecError("%s; got %s" % (_SCHEDULE_FORM, type(value).__name__))
    if not value:
        raise SpecError("schedule has no bands; leave it out for a fixed k")
    if len(value) > _BANDS_MAX:
        raise SpecError("schedule has %d bands, at most %d allowed" % (len(value), _BANDS_MAX))
    bands = [_band(i, item) for i, item in enumerate(value)]
    expect = 1
    for i, ((lo, hi), _k) in enumerate(bands):
        if lo != expect:
            if i == 0:
                raise SpecError("schedule must start at batch 1 (every batch size needs a k), starts at %d" % lo)
            prev = "%d-%s" % (bands[i - 1][0][0], bands[i - 1][0][1])
            here = "%d+" % lo if hi is None else "%d-%d" % (lo, hi)
            if lo < expect:
                raise SpecError("schedule bands overlap or are out of order: %s then %s" % (prev, here))
            raise SpecError("schedule has a gap: %s then %s (%s no k)" % (
                prev, here, "batch %d has" % expect if lo - 1 == expect else "batches %d-%d have" % (expect, lo - 1)))
        if hi is None and i != len(bands) - 1:
            raise SpecError("schedule[%d] (%d+) is open but is not the last band" % (i, lo))
        expect = (hi or lo) + 1
    if not any(k for _b, k in bands):
        raise SpecError("schedule has k: 0 in every band; that is method none")
    return bands


def _schedule(value):
    """The canonical schedule (list of {batch: [lo, hi|None], k}) for any accepted form."""
    out = [{"batch": [lo, hi], "k": k} for (lo, hi), k in _bands(value)]
    out[-1]["batch"][1] = None  # both engines keep the last band's K for every larger batch
    return out


def schedule_text(schedule):
    """The compact form of a canonical schedule: ``1-8:4,9-32:2,33+:0``."""
    return ",".join("%d%s:%d" % (b["batch"][0], "+" if b["batch"][1] is None else "-%d" % b["batch"][1], b["k"])
                    for b in schedule)


def _check_schedule(out, engine, given, warnings):
    sched = out["schedule"]
    top = max(b["k"] for b in sched)
    if "num_speculative_tokens" in given and out.get("num_speculative_tokens") != top:
        raise SpecError("with a schedule, num_speculative_tokens is the largest k of the schedule (%d), got %s; %s" % (
            top, out.get("num_speculative_tokens"), _engine.get(engine).SCHEDULE_TOP_K))
    out["num_speculative_tokens"] = top
    if warnings is None:
        return
    (lo, hi), k = _bands(given["schedule"])[-1]
    if hi is not None:
        warnings.append("schedule: the last band %d-%d covers every larger batch too (both engines keep its k=%d "
                        "beyond %d)" % (lo, hi, k, hi))
    warnings.extend(_engine.get(engine).schedule_warnings(sched))


# ---------------------------------------------------------------------------------------------
# normalize
# ---------------------------------------------------------------------------------------------

def _check_engine(engine):
    if not _engine.known(engine):
        raise SpecError("unknown engine %r; supported engines: %s" % (engine, ", ".join(ENGINES)))


def _check_tp(tensor_parallel_size):
    try:
        tp = _coerce("draft_tensor_parallel_size", tensor_parallel_size)
    except SpecError:
        raise SpecError("tensor_parallel_size must be an integer between 1 and 64, got %r" % (tensor_parallel_size,))
    return tp


def _alias_source(method):
    """The release of the engine that deprecated ``method`` (whose alias table has it)."""
    return [mod.RELEASE for mod in _engine.ENGINES.values() if method in mod.METHOD_ALIASES][0]


def _method(spec, engine, warnings):
    if not isinstance(spec, dict):
        raise SpecError("a speculative spec must be a mapping with a 'method' key, got %s" % type(spec).__name__)
    if "method" not in spec:
        raise SpecError("the spec has no 'method'; methods for %s: %s" % (engine, ", ".join(methods_for(engine))))
    method = spec["method"]
    if isinstance(method, str) and method in ALIASES:
        canonical = ALIASES[method]
        if warnings is not None:
            warnings.append("method %r is deprecated: %s replaces the model-specific MTP names with %r; "
                            "running method %s (request method: %s to silence this)" % (
                                method, _alias_source(method), canonical, canonical, canonical))
        method = canonical
    if not isinstance(method, str) or method not in METHODS:
        raise SpecError("unknown speculative method %r; methods for %s: %s" % (
            method, engine, ", ".join(methods_for(engine))))
    if engine not in METHODS[method]:
        raise SpecError("%s does not support speculative method %r (supported by: %s); methods for %s: %s" % (
            engine, method, ", ".join(engines_for(method)), engine, ", ".join(methods_for(engine))))
    return method


def normalize(spec, engine, tensor_parallel_size=1, warnings=None):
    """Validate ``spec`` for ``engine``; return it with coerced types and fixed defaults filled.

    ``warnings``: a list that receives what the operator should be told (a deprecated method name,
    a schedule band the engine reads differently); it runs as returned all the same.
    """
    _check_engine(engine)
    tp = _check_tp(tensor_parallel_size)
    if spec is None:
        spec = {"method": "none"}
    method = _method(spec, engine, warnings)
    table = METHODS[method][engine]["params"]
    for key in spec:
        if key == "method" or key in table:
            continue
        allowed = ", ".join(table) or "none"
        if key == "schedule" and method in _engine.get(engine).NO_SCHEDULE:
            raise SpecError("schedule is not possible for %s on %s: %s; methods with a schedule on %s: %s" % (
                method, engine, _engine.get(engine).NO_SCHEDULE[method], engine,
                ", ".join(m for m in methods_for(engine) if "schedule" in METHODS[m][engine]["params"])))
        if key in PARAMS:
            raise SpecError("%s is not a parameter of %s on %s (it applies to: %s); allowed parameters: %s" % (
                key, method, engine, ", ".join(_where_param_applies(key)), allowed))
        raise SpecError("unknown parameter %r for %s on %s; allowed parameters: %s" % (key, method, engine, allowed))

    scheduled = spec.get("schedule") is not None
    out = {"method": method}
    for name, default in table.items():
        value = spec.get(name)
        if value is not None:
            out[name] = _coerce(name, value)
        elif scheduled and name == "num_speculative_tokens":
            continue  # the schedule's largest k (_check_schedule)
        elif default is REQUIRED:
            raise SpecError("%s on %s requires %s (%s)" % (method, engine, name, PARAMS[name]["doc"]))
        elif default is not ENGINE:
            out[name] = default
    _check_quantization(out, engine)
    given = dict((k, v) for k, v in spec.items() if v is not None)
    if scheduled:
        _check_schedule(out, engine, given, warnings)
    _engine.get(engine).CHECKS.get(method, _no_check)(out, tp, set(given))
    # Canonical order: the table's, whatever the checks filled in.
    return dict([("method", method)] + [(k, out[k]) for k in table if k in out])


def spec_warnings(spec, engine, tensor_parallel_size=1):
    """What ``normalize`` warns about for ``spec`` (validated too): a list of sentences, ``[]`` if none."""
    found = []
    normalize(spec, engine, tensor_parallel_size, warnings=found)
    return found


def _no_check(out, tp, given=()):
    pass


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------

def _check_dir(schedule_dir):
    try:
        return _gate.path("schedule_dir", schedule_dir)
    except _gate.GateError as exc:
        raise SpecError(str(exc))


def engine_args(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR):
    """The engine's argv fragment for ``spec`` (validated first); ``[]`` for method none.

    ``schedule_dir``: where an engine's schedule files live (see ``schedule_file``).
    """
    spec = normalize(spec, engine, tensor_parallel_size)
    if spec["method"] == "none":
        return []
    mod = _engine.get(engine)
    return mod.render_spec(spec, _check_dir(schedule_dir) if mod.SCHEDULE_FILES else None)


def schedule_file(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR):
    """``{"path", "text"}`` of the file an engine reads a scheduled spec's schedule from (its adapter's
    ``SCHEDULE_FILES``), else None.

    The name carries a digest of the text, so each schedule has its own file: a unit rolled back to
    an earlier schedule still finds its file, and an unchanged schedule never rewrites one.
    """
    spec = normalize(spec, engine, tensor_parallel_size)
    mod = _engine.get(engine)
    if not mod.SCHEDULE_FILES or "schedule" not in spec:
        return None
    return mod.schedule_file(spec["schedule"], _check_dir(schedule_dir))


def _short(model):
    return model.rstrip("/").rsplit("/", 1)[-1] if model.startswith("/") else model


def describe(spec):
    """A short label for reports: ``ngram k=5 lookup=2..4``, ``eagle3 k=3 draft=org/head``."""
    if not spec:
        return "none"
    if not isinstance(spec, dict):
        raise SpecError("a speculative spec must be a mapping with a 'method' key, got %s" % type(spec).__name__)
    parts = [str(spec.get("method", "?"))]
    if spec.get("num_speculative_tokens") is not None:
        parts.append("k=%s" % spec["num_speculative_tokens"])
    if spec.get("schedule"):
        try:
            parts.append("schedule=%s" % schedule_text(_schedule(spec["schedule"])))
        except SpecError:
            parts.append("schedule=?")
    if spec.get("eagle_steps") is not None or spec.get("eagle_topk") is not None:
        parts.append("tree=%s/%s/%s" % (spec.get("eagle_steps"), spec.get("eagle_topk"), spec.get("num_draft_tokens")))
    if spec.get("prompt_lookup_min") is not None or spec.get("prompt_lookup_max") is not None:
        parts.append("lookup=%s..%s" % (spec.get("prompt_lookup_min", "?"), spec.get("prompt_lookup_max", "?")))
    if spec.get("ngram_max_bfs_breadth") is not None:
        parts.append("bfs=%s..%s" % (spec.get("ngram_min_bfs_breadth", "?"), spec["ngram_max_bfs_breadth"]))
    if spec.get("suffix_max_tree_depth") is not None:
        parts.append("depth=%s" % spec["suffix_max_tree_depth"])
    if spec.get("draft_model"):
        parts.append("draft=%s" % _short(str(spec["draft_model"])))
    if spec.get("uno_lora_path"):
        parts.append("lora=%s" % _short(str(spec["uno_lora_path"])))
    if spec.get("draft_tensor_parallel_size") is not None:
        parts.append("draft_tp=%s" % spec["draft_tensor_parallel_size"])
    if spec.get("draft_quantization"):
        parts.append("draft_q=%s" % spec["draft_quantization"])
    return " ".join(parts)
