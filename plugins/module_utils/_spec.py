# -*- coding: utf-8 -*-
# Copyright: llmops.specdec contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one speculative-decoding model: methods, parameters, validation, rendering per engine.

An operator names a method once, with canonical parameters, e.g.
``{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}``.
Every method is defined once, in ``METHODS`` below (which engines have it, which parameters it
takes, which are required, their defaults), every parameter once in ``PARAMS`` (type, range,
meaning), and each engine's spelling once in ``VLLM_KEYS`` / ``SGLANG_FLAGS``. Targets: vLLM 0.33
(``--speculative-config`` JSON) and SGLang 0.5.23 (``--speculative-*`` flags); the names were read
from those packages and are judged by their real parsers in ``tests/engines``.

API (stdlib only, runs on controller and targets):

``normalize(spec, engine, tensor_parallel_size=1) -> dict``
    Validate ``spec`` for ``engine`` (``vllm`` | ``sglang``) and return a new dict with the method
    first, then its parameters with types coerced (``"5"`` -> ``5``, as ``-e`` extra vars arrive as
    text) and engine defaults filled where the engine's default is a fixed value, so the unit file
    and reports say exactly what runs. Idempotent. Raises ``SpecError`` naming what is allowed.
``engine_args(spec, engine, tensor_parallel_size=1) -> list``
    The argv fragment for the engine (normalizes first). ``none`` gives ``[]``.
``describe(spec) -> str``
    A short label for reports, e.g. ``ngram k=5 lookup=2..4``.
``methods_for(engine) -> list``, ``engines_for(method) -> list``
    What the table holds, for error messages and docs.

Canonical semantics: ``num_speculative_tokens`` is the number of tokens drafted per step (vLLM's
meaning). SGLang's ``--speculative-num-draft-tokens`` counts the verify window including the
root token, so ``num_speculative_tokens=k`` renders as ``k+1`` there (and, for the EAGLE family,
as the chain ``--speculative-num-steps k --speculative-eagle-topk 1``). SGLang's EAGLE tree can
instead be given as the trio ``eagle_steps`` / ``eagle_topk`` / ``num_draft_tokens``.
"""
from __future__ import annotations

import json
import math
import re

from ansible_collections.llmops.specdec.plugins.module_utils import _gate

__all__ = ["SpecError", "ENGINES", "METHODS", "PARAMS", "normalize", "engine_args", "describe",
           "methods_for", "engines_for"]

ENGINES = ("vllm", "sglang")


class SpecError(ValueError):
    """A speculative-decoding request that an engine cannot run as asked."""


class _Required(object):
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()  # the operator must give it
ENGINE = None  # optional; when absent the engine chooses (model-dependent, so not filled in)

# Every canonical parameter: type, range, meaning. Ranges are the engines' own where they check;
# the upper bounds on sizes are ours, to catch typos (documented in docs/spec-methods.md).
PARAMS = {
    "num_speculative_tokens": {"type": int, "min": 1, "max": 128, "doc": "tokens drafted per step"},
    "prompt_lookup_min": {"type": int, "min": 1, "max": 128, "doc": "shortest n-gram matched in the prompt"},
    "prompt_lookup_max": {"type": int, "min": 1, "max": 128, "doc": "longest n-gram matched in the prompt"},
    "draft_model": {"type": str, "doc": "draft model / EAGLE head / MTP weights: HF id or local path"},
    "draft_tensor_parallel_size": {"type": int, "min": 1, "max": 64, "doc": "TP of the draft: 1 or the target's TP"},
    "draft_quantization": {"type": str, "doc": "quantization of the draft weights (engine's own names, e.g. fp8)"},
    "eagle_steps": {"type": int, "min": 1, "max": 64, "doc": "EAGLE tree depth (draft forward passes per step)"},
    "eagle_topk": {"type": int, "min": 1, "max": 64, "doc": "EAGLE tree branching per step"},
    "num_draft_tokens": {"type": int, "min": 2, "max": 1024, "doc": "EAGLE tree size verified per step, root included"},
    "ngram_min_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "SGLang n-gram tree: minimum BFS breadth"},
    "ngram_max_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "SGLang n-gram tree: maximum BFS breadth"},
    "ngram_match_type": {"type": str, "choices": ("BFS", "PROB"), "doc": "SGLang n-gram tree match type"},
    "ngram_max_trie_depth": {"type": int, "min": 1, "max": 1024, "doc": "SGLang n-gram trie depth"},
    "suffix_max_tree_depth": {"type": int, "min": 1, "max": 128, "doc": "suffix tree depth (prefix match + speculation)"},
    "suffix_max_cached_requests": {"type": int, "min": 0, "max": 10 ** 9, "doc": "responses kept in the global suffix tree (0: off)"},
    "suffix_max_spec_factor": {"type": float, "min": 0.0, "max": 1000.0, "doc": "speculation length per matched prefix token"},
    "suffix_min_token_prob": {"type": float, "min": 0.0, "max": 1.0, "doc": "lowest estimated token probability drafted"},
}

_SGLANG_TREE = ("eagle_steps", "eagle_topk", "num_draft_tokens")

# Every method, once: per engine, the engine's own method name and the parameters it takes, each
# REQUIRED, ENGINE (optional, engine decides) or a fixed default that normalize() fills in.
# vLLM defaults are those of SpeculativeConfig 0.33, SGLang's those of ServerArgs 0.5.23.
METHODS = {
    "none": {
        "doc": "no speculative decoding (the baseline)",
        "vllm": {"name": None, "params": {}},
        "sglang": {"name": None, "params": {}},
    },
    "ngram": {
        "doc": "prompt lookup: draft by matching the last n-gram against the prompt/output so far",
        # vLLM requires k for ngram; 5 is ours (vLLM's documented example), so that
        # `-e method=ngram` alone is a complete request. The mock engines are calibrated on it.
        "vllm": {"name": "ngram", "params": {
            "num_speculative_tokens": 5, "prompt_lookup_min": ENGINE, "prompt_lookup_max": ENGINE}},
        "sglang": {"name": "NGRAM", "params": {
            "num_speculative_tokens": 11, "ngram_min_bfs_breadth": 1, "ngram_max_bfs_breadth": 10,
            "ngram_match_type": "BFS", "ngram_max_trie_depth": 18}},
    },
    "eagle": {
        "doc": "EAGLE draft head on the target's hidden states",
        "vllm": {"name": "eagle", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": REQUIRED,
            "draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}},
        "sglang": {"name": "EAGLE", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
            "eagle_topk": ENGINE, "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "eagle3": {
        "doc": "EAGLE-3 draft head (multi-layer hidden states)",
        "vllm": {"name": "eagle3", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": REQUIRED,
            "draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}},
        "sglang": {"name": "EAGLE3", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
            "eagle_topk": ENGINE, "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "mtp": {
        "doc": "the model's own multi-token-prediction layers (DeepSeek-style MTP / NEXTN)",
        "vllm": {"name": "mtp", "params": {
            "num_speculative_tokens": REQUIRED, "draft_model": ENGINE,
            "draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}},
        "sglang": {"name": "NEXTN", "params": {
            "draft_model": ENGINE, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
            "eagle_topk": ENGINE, "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "draft_model": {
        "doc": "a separate small LLM drafts (same vocabulary as the target)",
        "vllm": {"name": "draft_model", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": REQUIRED,
            "draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}},
        "sglang": {"name": "STANDALONE", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
            "eagle_topk": ENGINE, "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "suffix": {
        "doc": "suffix decoding (Arctic Inference): suffix trees over the prompt and past outputs",
        "vllm": {"name": "suffix", "params": {
            "num_speculative_tokens": ENGINE, "suffix_max_tree_depth": 24,
            "suffix_max_cached_requests": 10000, "suffix_max_spec_factor": 1.0,
            "suffix_min_token_prob": 0.1}},
    },
}

# vLLM: canonical parameter -> SpeculativeConfig key (inside the --speculative-config JSON).
VLLM_KEYS = {
    "num_speculative_tokens": "num_speculative_tokens",
    "prompt_lookup_min": "prompt_lookup_min",
    "prompt_lookup_max": "prompt_lookup_max",
    "draft_model": "model",
    "draft_tensor_parallel_size": "draft_tensor_parallel_size",
    "draft_quantization": "quantization",
    "suffix_max_tree_depth": "suffix_decoding_max_tree_depth",
    "suffix_max_cached_requests": "suffix_decoding_max_cached_requests",
    "suffix_max_spec_factor": "suffix_decoding_max_spec_factor",
    "suffix_min_token_prob": "suffix_decoding_min_token_prob",
}

# SGLang: canonical parameter -> launch_server flag. num_speculative_tokens has no flag of its
# own: it renders through --speculative-num-draft-tokens (and steps/topk), see _sglang_args.
SGLANG_FLAGS = {
    "draft_model": "--speculative-draft-model-path",
    "draft_quantization": "--speculative-draft-model-quantization",
    "eagle_steps": "--speculative-num-steps",
    "eagle_topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
    "ngram_min_bfs_breadth": "--speculative-ngram-min-bfs-breadth",
    "ngram_max_bfs_breadth": "--speculative-ngram-max-bfs-breadth",
    "ngram_match_type": "--speculative-ngram-match-type",
    "ngram_max_trie_depth": "--speculative-ngram-max-trie-depth",
}

_INT = re.compile(r"[+-]?[0-9]+\Z")


def methods_for(engine):
    """Methods the engine supports, in table order."""
    return [m for m, d in METHODS.items() if engine in d]


def engines_for(method):
    """Engines that support the method."""
    return [e for e in ENGINES if e in METHODS.get(method, {})]


def _where_param_applies(param):
    return ["%s/%s" % (e, m) for m, d in METHODS.items() for e in ENGINES
            if e in d and param in d[e]["params"]]


def _coerce(name, value):
    """Check one value against PARAMS[name]; return it with the canonical type."""
    info = PARAMS[name]
    kind = info["type"]
    bad = SpecError("%s must be %s, got %r" % (
        name, {int: "an integer", float: "a number", str: "a non-empty string"}[kind], value))
    if isinstance(value, bool):  # bool is an int subclass; true/false is never meant as a size
        raise bad
    if kind is int:
        if isinstance(value, str) and _INT.match(value.strip()):
            value = int(value.strip())
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise bad
    elif kind is float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise bad
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
        if "choices" in info:
            if value.upper() not in info["choices"]:
                raise SpecError("%s must be one of %s, got %r" % (name, ", ".join(info["choices"]), value))
            value = value.upper()
    if "min" in info and not info["min"] <= value <= info["max"]:
        raise SpecError("%s must be between %s and %s, got %r" % (name, info["min"], info["max"], value))
    return value


def _check_engine(engine):
    if engine not in ENGINES:
        raise SpecError("unknown engine %r; supported engines: %s" % (engine, ", ".join(ENGINES)))


def _check_tp(tensor_parallel_size):
    try:
        tp = _coerce("draft_tensor_parallel_size", tensor_parallel_size)
    except SpecError:
        raise SpecError("tensor_parallel_size must be an integer between 1 and 64, got %r" % (tensor_parallel_size,))
    return tp


def normalize(spec, engine, tensor_parallel_size=1):
    """Validate ``spec`` for ``engine``; return it with coerced types and fixed defaults filled."""
    _check_engine(engine)
    tp = _check_tp(tensor_parallel_size)
    if spec is None:
        spec = {"method": "none"}
    if not isinstance(spec, dict):
        raise SpecError("a speculative spec must be a mapping with a 'method' key, got %s" % type(spec).__name__)
    if "method" not in spec:
        raise SpecError("the spec has no 'method'; methods for %s: %s" % (engine, ", ".join(methods_for(engine))))
    method = spec["method"]
    if not isinstance(method, str) or method not in METHODS:
        raise SpecError("unknown speculative method %r; methods for %s: %s" % (
            method, engine, ", ".join(methods_for(engine))))
    if engine not in METHODS[method]:
        raise SpecError("%s does not support speculative method %r (supported by: %s); methods for %s: %s" % (
            engine, method, ", ".join(engines_for(method)), engine, ", ".join(methods_for(engine))))
    table = METHODS[method][engine]["params"]
    for key in spec:
        if key == "method" or key in table:
            continue
        allowed = ", ".join(table) or "none"
        if key in PARAMS:
            raise SpecError("%s is not a parameter of %s on %s (it applies to: %s); allowed parameters: %s" % (
                key, method, engine, ", ".join(_where_param_applies(key)), allowed))
        raise SpecError("unknown parameter %r for %s on %s; allowed parameters: %s" % (key, method, engine, allowed))

    out = {"method": method}
    for name, default in table.items():
        value = spec.get(name)
        if value is not None:
            out[name] = _coerce(name, value)
        elif default is REQUIRED:
            raise SpecError("%s on %s requires %s (%s)" % (method, engine, name, PARAMS[name]["doc"]))
        elif default is not ENGINE:
            out[name] = default
    _CHECKS.get((engine, method), _no_check)(out, tp, set(spec))
    return out


def _no_check(out, tp, given=()):
    pass


def _vllm_ngram(out, tp, given=()):
    # vLLM's own rule: one bound given -> the other takes its value; none -> both 5.
    lo, hi = out.get("prompt_lookup_min"), out.get("prompt_lookup_max")
    if lo is None and hi is None:
        lo = hi = 5
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    if lo > hi:
        raise SpecError("prompt_lookup_min (%d) must be <= prompt_lookup_max (%d)" % (lo, hi))
    out["prompt_lookup_min"], out["prompt_lookup_max"] = lo, hi


def _vllm_draft(out, tp, given=()):
    dtp = out.get("draft_tensor_parallel_size")
    if dtp is not None and dtp not in (1, tp):
        raise SpecError("draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (%d), got %d"
                        % (tp, dtp))


def _vllm_suffix(out, tp, given=()):
    if "num_speculative_tokens" not in out:  # vLLM treats the tree depth as the cap
        out["num_speculative_tokens"] = out["suffix_max_tree_depth"]


def _sglang_ngram(out, tp, given=()):
    window = out["num_speculative_tokens"] + 1
    if "ngram_max_bfs_breadth" not in given:
        # The default breadth (10) must not turn a small k into a refusal: cap it at the window.
        out["ngram_max_bfs_breadth"] = min(out["ngram_max_bfs_breadth"], window)
    lo, hi = out["ngram_min_bfs_breadth"], out["ngram_max_bfs_breadth"]
    if lo > hi:
        raise SpecError("ngram_min_bfs_breadth (%d) must be <= ngram_max_bfs_breadth (%d)" % (lo, hi))
    if hi > window:
        # SGLang derives num_steps = num_draft_tokens // max_bfs_breadth, which would be 0.
        raise SpecError("ngram_max_bfs_breadth (%d) must be <= num_speculative_tokens + 1 (%d)" % (hi, window))


def _sglang_eagle(out, tp, given=()):
    tree = [k for k in _SGLANG_TREE if k in out]
    if tree and "num_speculative_tokens" in out:
        raise SpecError("give either num_speculative_tokens (a chain: steps=k, topk=1) or the SGLang tree "
                        "eagle_steps/eagle_topk/num_draft_tokens, not both")
    if tree and len(tree) != len(_SGLANG_TREE):
        missing = [k for k in _SGLANG_TREE if k not in out]
        raise SpecError("SGLang needs eagle_steps, eagle_topk and num_draft_tokens all set or all unset; "
                        "missing: %s" % ", ".join(missing))
    if not tree:
        return
    steps, topk, ndt = out["eagle_steps"], out["eagle_topk"], out["num_draft_tokens"]
    if topk == 1 and ndt != steps + 1:
        raise SpecError("with eagle_topk=1 SGLang forces num_draft_tokens = eagle_steps + 1 (%d), got %d"
                        % (steps + 1, ndt))
    most = topk + (steps - 1) * topk * topk + 1  # candidates the tree offers, plus the root
    if ndt > most:
        raise SpecError("num_draft_tokens (%d) exceeds what eagle_steps=%d, eagle_topk=%d can draft "
                        "(topk + (steps-1)*topk^2 + 1 = %d)" % (ndt, steps, topk, most))


_CHECKS = {
    ("vllm", "ngram"): _vllm_ngram,
    ("vllm", "eagle"): _vllm_draft,
    ("vllm", "eagle3"): _vllm_draft,
    ("vllm", "mtp"): _vllm_draft,
    ("vllm", "draft_model"): _vllm_draft,
    ("vllm", "suffix"): _vllm_suffix,
    ("sglang", "ngram"): _sglang_ngram,
    ("sglang", "eagle"): _sglang_eagle,
    ("sglang", "eagle3"): _sglang_eagle,
    ("sglang", "mtp"): _sglang_eagle,
    ("sglang", "draft_model"): _sglang_eagle,
}


def _vllm_args(spec):
    cfg = {"method": METHODS[spec["method"]]["vllm"]["name"]}
    for name, value in spec.items():
        if name != "method":
            cfg[VLLM_KEYS[name]] = value
    return ["--speculative-config", json.dumps(cfg, sort_keys=True, separators=(",", ":"))]


def _sglang_args(spec):
    method = spec["method"]
    args = ["--speculative-algorithm", METHODS[method]["sglang"]["name"]]
    k = spec.get("num_speculative_tokens")
    if k is not None:
        if method != "ngram":
            args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
        args += ["--speculative-num-draft-tokens", str(k + 1)]
    for name, value in spec.items():
        if name in SGLANG_FLAGS:
            args += [SGLANG_FLAGS[name], str(value)]
    return args


def engine_args(spec, engine, tensor_parallel_size=1):
    """The engine's argv fragment for ``spec`` (validated first); ``[]`` for method none."""
    spec = normalize(spec, engine, tensor_parallel_size)
    if spec["method"] == "none":
        return []
    return _vllm_args(spec) if engine == "vllm" else _sglang_args(spec)


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
    if spec.get("draft_tensor_parallel_size") is not None:
        parts.append("draft_tp=%s" % spec["draft_tensor_parallel_size"])
    if spec.get("draft_quantization"):
        parts.append("draft_q=%s" % spec["draft_quantization"])
    return " ".join(parts)
