# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
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

``normalize(spec, engine, tensor_parallel_size=1, warnings=None) -> dict``
    Validate ``spec`` for ``engine`` (``vllm`` | ``sglang``) and return a new dict with the method
    first, then its parameters with types coerced (``"5"`` -> ``5``, as ``-e`` extra vars arrive as
    text) and engine defaults filled where the engine's default is a fixed value, so the unit file
    and reports say exactly what runs. Idempotent. Raises ``SpecError`` naming what is allowed.
    A deprecated alias (vLLM's model-specific ``deepseek_mtp`` ... names) becomes its canonical
    method; what the operator should know but may run anyway is appended to ``warnings`` (a list).
``spec_warnings(spec, engine, tensor_parallel_size=1) -> list``
    Those warnings alone (``[]`` for a clean request), for a role to show.
``engine_args(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR) -> list``
    The argv fragment for the engine (normalizes first). ``none`` gives ``[]``.
``schedule_file(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR) -> dict | None``
    SGLang's adaptive config for a spec with a ``schedule``: ``{"path": ..., "text": ...}``, the
    file ``engine_args`` refers to; ``None`` when the engine needs no file (vLLM, no schedule).
``describe(spec) -> str``
    A short label for reports, e.g. ``ngram k=5 lookup=2..4``.
``methods_for(engine) -> list``, ``engines_for(method) -> list``, ``schedule_text(schedule) -> str``
    What the table holds, for error messages and docs; a schedule in its compact form.

Canonical semantics: ``num_speculative_tokens`` is the number of tokens drafted per step (vLLM's
meaning). SGLang's ``--speculative-num-draft-tokens`` counts the verify window including the
root token, so ``num_speculative_tokens=k`` renders as ``k+1`` there (and, for the EAGLE family,
as the chain ``--speculative-num-steps k --speculative-eagle-topk 1``). SGLang's EAGLE tree can
instead be given as the trio ``eagle_steps`` / ``eagle_topk`` / ``num_draft_tokens``.

``schedule``: K per band of concurrent requests (batch size), ``[{"batch": [1, 8], "k": 4},
{"batch": [9, 32], "k": 2}, {"batch": [33, None], "k": 0}]`` or compactly ``"1-8:4,9-32:2,33+:0"``.
Bands start at 1 and follow each other without gaps or overlaps; the last one is open (both engines
keep its K for every larger batch). ``k: 0`` stops speculating in that band. vLLM receives it as
``num_speculative_tokens_per_batch_size``, SGLang as ``--speculative-adaptive`` with one fixed
candidate step per band in the file ``--speculative-adaptive-config`` names.
"""
from __future__ import annotations

import hashlib
import json
import math
import re

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate

__all__ = ["SpecError", "ENGINES", "METHODS", "ALIASES", "PARAMS", "QUANTIZATIONS", "MODEL_REFS", "SCHEDULE_DIR",
           "normalize", "spec_warnings",
           "engine_args", "schedule_file", "schedule_text", "describe", "methods_for", "engines_for"]

ENGINES = _engine.NAMES  # the registry's engines (_engine), in its order
# Where the role installs SGLang's adaptive config files (root-owned, named by their content so a
# rolled-back unit still finds its own schedule).
SCHEDULE_DIR = "/etc/llmops-specdec/schedules"


class SpecError(ValueError):
    """A speculative-decoding request that an engine cannot run as asked."""


class _Required(object):
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()  # the operator must give it
ENGINE = None  # optional; when absent the engine chooses (model-dependent, so not filled in)

_K_MAX = 128  # our typo guard on a draft length (documented in docs/spec-methods.md)
_BATCH_MAX = 65536  # largest band start/end we accept (no deployment runs more concurrent requests)
_BANDS_MAX = 64
_VLLM_OPEN_END = 1 << 20  # vLLM needs an end for the last range; it keeps the last K beyond any end anyway
_FROZEN_KV_MTP_K = 3  # SGLang's automatic chain for the same draft under NEXTN (_auto_choose_speculative_params)

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
    "ngram_min_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "SGLang n-gram tree: minimum BFS breadth"},
    "ngram_max_bfs_breadth": {"type": int, "min": 1, "max": 64, "doc": "SGLang n-gram tree: maximum BFS breadth"},
    "ngram_match_type": {"type": str, "choices": ("BFS", "PROB"), "doc": "SGLang n-gram tree match type"},
    "ngram_max_trie_depth": {"type": int, "min": 1, "max": 1024, "doc": "SGLang n-gram trie depth"},
    "suffix_max_tree_depth": {"type": int, "min": 1, "max": 128, "doc": "suffix tree depth (prefix match + speculation)"},
    "suffix_max_cached_requests": {"type": int, "min": 0, "max": 10 ** 9, "doc": "responses kept in the global suffix tree (0: off)"},
    "suffix_max_spec_factor": {"type": float, "min": 0.0, "max": 1000.0, "doc": "speculation length per matched prefix token"},
    "suffix_min_token_prob": {"type": float, "min": 0.0, "max": 1.0, "doc": "lowest estimated token probability drafted"},
    "uno_lora_path": {"type": str, "doc": "UNO: the draft LoRA checkpoint on the target (HF id or local path)"},
    "schedule": {"type": "schedule", "doc": "K per batch-size band, e.g. 1-8:4,9-32:2,33+:0 (0: no drafting there)"},
}

_SGLANG_TREE = ("eagle_steps", "eagle_topk", "num_draft_tokens")
_SCHEDULED = {"schedule": ENGINE}


def _params(*parts):
    """One parameter table from several, in order (the order of allowed-parameter listings)."""
    out = {}
    for part in parts:
        out.update(part)
    return out


_SGLANG_EAGLE_PARAMS = {"num_speculative_tokens": ENGINE, "eagle_steps": ENGINE, "eagle_topk": ENGINE,
                        "num_draft_tokens": ENGINE, "draft_quantization": ENGINE}
_VLLM_DRAFT_PARAMS = {"draft_tensor_parallel_size": ENGINE, "draft_quantization": ENGINE}

# Every method, once: per engine, the engine's own method name and the parameters it takes, each
# REQUIRED, ENGINE (optional, engine decides) or a fixed default that normalize() fills in.
# vLLM defaults are those of SpeculativeConfig 0.33, SGLang's those of ServerArgs 0.5.23.
# `schedule` is listed where the engine honours a batch-size schedule for the method (see _NO_SCHEDULE).
# `one_of`: groups of which at least one must be given (for surveys and docs; the checks below say why).
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
            "num_speculative_tokens": 5, "prompt_lookup_min": ENGINE, "prompt_lookup_max": ENGINE,
            "schedule": ENGINE}},
        "sglang": {"name": "NGRAM", "params": {
            "num_speculative_tokens": 11, "ngram_min_bfs_breadth": 1, "ngram_max_bfs_breadth": 10,
            "ngram_match_type": "BFS", "ngram_max_trie_depth": 18}},
    },
    "ngram_gpu": {
        "doc": "prompt lookup matched on the GPU (vLLM's GPU n-gram proposer)",
        "vllm": {"name": "ngram_gpu", "params": {
            "num_speculative_tokens": 5, "prompt_lookup_min": ENGINE, "prompt_lookup_max": ENGINE,
            "schedule": ENGINE}},
    },
    "eagle": {
        "doc": "EAGLE draft head on the target's hidden states",
        "vllm": {"name": "eagle", "params": _params(
            {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _VLLM_DRAFT_PARAMS, _SCHEDULED)},
        "sglang": {"name": "EAGLE", "params": _params(
            {"draft_model": REQUIRED}, _SGLANG_EAGLE_PARAMS, _SCHEDULED)},
    },
    "eagle3": {
        "doc": "EAGLE-3 draft head (multi-layer hidden states)",
        "vllm": {"name": "eagle3", "params": _params(
            {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _VLLM_DRAFT_PARAMS, _SCHEDULED)},
        "sglang": {"name": "EAGLE3", "params": _params(
            {"draft_model": REQUIRED}, _SGLANG_EAGLE_PARAMS, _SCHEDULED)},
    },
    "mtp": {
        "doc": "the model's own multi-token-prediction layers (DeepSeek-style MTP / NEXTN)",
        "vllm": {"name": "mtp", "params": _params(
            {"num_speculative_tokens": REQUIRED, "draft_model": ENGINE}, _VLLM_DRAFT_PARAMS, _SCHEDULED)},
        "sglang": {"name": "NEXTN", "params": _params(
            {"draft_model": ENGINE}, _SGLANG_EAGLE_PARAMS, _SCHEDULED)},
    },
    "draft_model": {
        "doc": "a separate small LLM drafts (same vocabulary as the target)",
        "vllm": {"name": "draft_model", "params": _params(
            {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _VLLM_DRAFT_PARAMS, _SCHEDULED)},
        "sglang": {"name": "STANDALONE", "params": _params({"draft_model": REQUIRED}, _SGLANG_EAGLE_PARAMS)},
    },
    "suffix": {
        "doc": "suffix decoding (Arctic Inference): suffix trees over the prompt and past outputs",
        "vllm": {"name": "suffix", "params": {
            "num_speculative_tokens": ENGINE, "suffix_max_tree_depth": 24,
            "suffix_max_cached_requests": 10000, "suffix_max_spec_factor": 1.0,
            "suffix_min_token_prob": 0.1}},
    },
    "dflash": {
        "doc": "DFlash: a block-diffusion draft fills a block of tokens in one parallel pass",
        "vllm": {"name": "dflash", "params": _params(
            {"draft_model": REQUIRED, "num_speculative_tokens": REQUIRED}, _VLLM_DRAFT_PARAMS, _SCHEDULED)},
        # k renders as the verify window (block size) k+1; absent: the draft's block_size, else 16.
        "sglang": {"name": "DFLASH", "params": {
            "draft_model": REQUIRED, "num_speculative_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "dspark": {
        "doc": "DSpark: parallel block drafting with a confidence head (weights in the draft or the target checkpoint)",
        # vLLM: without draft_model it drafts from stages bundled in the target (DeepSeek-V4), then
        # k is needed; with a draft, k defaults to the draft's block size.
        "vllm": {"name": "dspark", "params": _params(
            {"draft_model": ENGINE, "num_speculative_tokens": ENGINE}, _VLLM_DRAFT_PARAMS, _SCHEDULED),
            "one_of": [("draft_model", "num_speculative_tokens")]},
        # k is gamma (--speculative-dspark-block-size); absent: the draft's block size, else SGLang's default.
        "sglang": {"name": "DSPARK", "params": {
            "draft_model": ENGINE, "num_speculative_tokens": ENGINE, "draft_quantization": ENGINE}},
    },
    "uno": {
        "doc": "UNO: the target drafts through a LoRA adapter (no separate draft model; TP 1)",
        "sglang": {"name": "UNO", "params": {
            "uno_lora_path": REQUIRED, "num_speculative_tokens": ENGINE, "eagle_steps": ENGINE,
            "eagle_topk": ENGINE, "num_draft_tokens": ENGINE},
            "one_of": [("num_speculative_tokens", "eagle_steps")]},  # k (linear) or the tree trio
    },
    "frozen_kv_mtp": {
        "doc": "Frozen-KV MTP: a Gemma-4 assistant draft reading the target's KV cache",
        "sglang": {"name": "FROZEN_KV_MTP", "params": _params({"draft_model": REQUIRED}, _SGLANG_EAGLE_PARAMS)},
    },
}

# Deprecated method names -> canonical method. vLLM 0.33's
# MTPModelTypes: each is rewritten to `mtp` with a deprecation warning; we do the same, on both
# engines (the canonical `mtp` exists on both), and say so in the warnings.
_MTP_ALIASES = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp",
)
ALIASES = dict((name, "mtp") for name in _MTP_ALIASES)

# Why a method cannot take a schedule on an engine (the engine would drop it and run a fixed k).
_SGLANG_ADAPTIVE = ("SGLang 0.5.23 runs --speculative-adaptive only for EAGLE, EAGLE3 and NEXTN (eagle, eagle3, mtp) "
                    "with topk 1; for %s it switches adaptive off with a warning and runs a fixed k")
_NO_SCHEDULE = {
    ("vllm", "suffix"): "vLLM 0.33 runs suffix decoding on Model Runner V1 only, which drops "
                        "num_speculative_tokens_per_batch_size for it and runs a fixed k",
    ("sglang", "ngram"): _SGLANG_ADAPTIVE % "NGRAM",
    ("sglang", "draft_model"): _SGLANG_ADAPTIVE % "STANDALONE",
    ("sglang", "dflash"): _SGLANG_ADAPTIVE % "DFLASH",
    ("sglang", "dspark"): _SGLANG_ADAPTIVE % "DSPARK",
    ("sglang", "uno"): _SGLANG_ADAPTIVE % "UNO",
    ("sglang", "frozen_kv_mtp"): _SGLANG_ADAPTIVE % "FROZEN_KV_MTP",
    ("vllm", "none"): "method none does not speculate; give a method (a band with k: 0 stops drafting there)",
    ("sglang", "none"): "method none does not speculate; give a method (a band with k: 0 stops drafting there)",
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
    "schedule": "num_speculative_tokens_per_batch_size",  # [[start, end, k], ...], see _vllm_args
}

# SGLang: canonical parameter -> launch_server flag. num_speculative_tokens has no flag of its
# own: it renders through --speculative-num-draft-tokens (and steps/topk), see _sglang_args; the
# schedule renders as --speculative-adaptive --speculative-adaptive-config PATH.
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
    "uno_lora_path": "--uno-lora-path",
}
SGLANG_ADAPTIVE_FLAGS = ("--speculative-adaptive", "--speculative-adaptive-config")

# The quantization names each engine takes for the draft (``draft_quantization``): vLLM's
# QuantizationMethods (vllm/model_executor/layers/quantization/__init__.py; read from 0.32, the pinned
# 0.33 is checked in tests/contracts), SGLang's QUANTIZATION_CHOICES (sglang/srt/arg_groups/choices.py),
# which --speculative-draft-model-quantization takes as its choices. A name outside the list would make a
# candidate that never starts; plugins that register their own methods are not supported here.
QUANTIZATIONS = {
    "vllm": ("awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
             "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
             "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8",
             "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only",
             "nvfp4_per_token", "mxfp8"),
    "sglang": ("awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt",
               "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8",
               "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors",
               "modelslim", "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant",
               "humming"),
}
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


# SGLang pads a batch up to its next CUDA-graph capture size before it picks the band
# (AdaptiveSpeculativeParams._route); with speculation the sizes are these (cuda_graph_hook.py,
# generate_decode_cuda_graph_batch_sizes; --cuda-graph-max-bs adds itself and cuts the list).
_SGLANG_CAPTURE = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                   + list(range(272, _BATCH_MAX + 17, 16)))


def _span(lo, hi):
    return "batch %d" % lo if lo == hi else "batches %d-%d" % (lo, hi)


def _check_schedule(out, engine, given, warnings):
    sched = out["schedule"]
    top = max(b["k"] for b in sched)
    if "num_speculative_tokens" in given and out.get("num_speculative_tokens") != top:
        raise SpecError("with a schedule, num_speculative_tokens is the largest k of the schedule (%d), got %s; %s" % (
            top, out.get("num_speculative_tokens"), "vLLM caps every band at it and sizes its buffers by it"
            if engine == "vllm" else "SGLang starts every band from it and sizes its buffers by it"))
    out["num_speculative_tokens"] = top
    if warnings is None:
        return
    (lo, hi), k = _bands(given["schedule"])[-1]
    if hi is not None:
        warnings.append("schedule: the last band %d-%d covers every larger batch too (both engines keep its k=%d "
                        "beyond %d)" % (lo, hi, k, hi))
    if engine != "sglang":
        return
    for band in sched[:-1]:
        lo, hi = band["batch"]
        below = max([c for c in _SGLANG_CAPTURE if c <= hi] or [0])
        if below != hi:
            warnings.append("schedule: SGLang pads a batch to its CUDA-graph size before it picks the band, so "
                            "%s of band %d-%d run%s the next band's k; end bands at 1-8, even numbers to "
                            "32, multiples of 4 from 40 to 64, of 8 to 256, of 16 above"
                            % (_span(max(below + 1, lo), hi), lo, hi, "s" if max(below + 1, lo) == hi else ""))


# ---------------------------------------------------------------------------------------------
# normalize
# ---------------------------------------------------------------------------------------------

def _check_engine(engine):
    if engine not in ENGINES:
        raise SpecError("unknown engine %r; supported engines: %s" % (engine, ", ".join(ENGINES)))


def _check_tp(tensor_parallel_size):
    try:
        tp = _coerce("draft_tensor_parallel_size", tensor_parallel_size)
    except SpecError:
        raise SpecError("tensor_parallel_size must be an integer between 1 and 64, got %r" % (tensor_parallel_size,))
    return tp


def _method(spec, engine, warnings):
    if not isinstance(spec, dict):
        raise SpecError("a speculative spec must be a mapping with a 'method' key, got %s" % type(spec).__name__)
    if "method" not in spec:
        raise SpecError("the spec has no 'method'; methods for %s: %s" % (engine, ", ".join(methods_for(engine))))
    method = spec["method"]
    if isinstance(method, str) and method in ALIASES:
        canonical = ALIASES[method]
        if warnings is not None:
            warnings.append("method %r is deprecated: vLLM 0.33 replaces the model-specific MTP names with %r; "
                            "running method %s (request method: %s to silence this)" % (
                                method, canonical, canonical, canonical))
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
        if key == "schedule" and (engine, method) in _NO_SCHEDULE:
            raise SpecError("schedule is not possible for %s on %s: %s; methods with a schedule on %s: %s" % (
                method, engine, _NO_SCHEDULE[(engine, method)], engine,
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
    _CHECKS.get((engine, method), _no_check)(out, tp, set(given))
    # Canonical order: the table's, whatever the checks filled in.
    return dict([("method", method)] + [(k, out[k]) for k in table if k in out])


def spec_warnings(spec, engine, tensor_parallel_size=1):
    """What ``normalize`` warns about for ``spec`` (validated too): a list of sentences, ``[]`` if none."""
    found = []
    normalize(spec, engine, tensor_parallel_size, warnings=found)
    return found


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


def _vllm_dspark(out, tp, given=()):
    if "draft_model" not in out and "num_speculative_tokens" not in out:
        # vLLM: without a draft it drafts from the target's own DSpark stages, and then needs k.
        raise SpecError("dspark on vllm requires draft_model (k then defaults to its block size) or "
                        "num_speculative_tokens (the DSpark stages bundled in the target checkpoint, e.g. DeepSeek-V4)")
    _vllm_draft(out, tp, given)


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


def _sglang_tree(out):
    tree = [k for k in _SGLANG_TREE if k in out]
    if tree and "schedule" in out:
        raise SpecError("a schedule sets the steps per batch band itself (a chain, topk 1); leave out "
                        "eagle_steps/eagle_topk/num_draft_tokens")
    if tree and "num_speculative_tokens" in out:
        raise SpecError("give either num_speculative_tokens (a chain: steps=k, topk=1) or the SGLang tree "
                        "eagle_steps/eagle_topk/num_draft_tokens, not both")
    if tree and len(tree) != len(_SGLANG_TREE):
        missing = [k for k in _SGLANG_TREE if k not in out]
        raise SpecError("SGLang needs eagle_steps, eagle_topk and num_draft_tokens all set or all unset; "
                        "missing: %s" % ", ".join(missing))
    return bool(tree)


def _sglang_eagle(out, tp, given=()):
    if not _sglang_tree(out):
        return
    steps, topk, ndt = out["eagle_steps"], out["eagle_topk"], out["num_draft_tokens"]
    if topk == 1 and ndt != steps + 1:
        raise SpecError("with eagle_topk=1 SGLang forces num_draft_tokens = eagle_steps + 1 (%d), got %d"
                        % (steps + 1, ndt))
    most = topk + (steps - 1) * topk * topk + 1  # candidates the tree offers, plus the root
    if ndt > most:
        raise SpecError("num_draft_tokens (%d) exceeds what eagle_steps=%d, eagle_topk=%d can draft "
                        "(topk + (steps-1)*topk^2 + 1 = %d)" % (ndt, steps, topk, most))


def _sglang_frozen_kv_mtp(out, tp, given=()):
    # SGLang picks no steps for an explicit FROZEN_KV_MTP (only NEXTN/EAGLE get automatic values, and
    # `mtp` with a Gemma-4 assistant draft is promoted to FROZEN_KV_MTP with them: 3 steps, topk 1).
    # Ours is that same chain, so `method: frozen_kv_mtp` with a draft is a complete request.
    if "num_speculative_tokens" not in out and not any(k in out for k in _SGLANG_TREE):
        out["num_speculative_tokens"] = _FROZEN_KV_MTP_K
    _sglang_eagle(out, tp, given)


def _sglang_uno(out, tp, given=()):
    # speculative_hook._handle_uno: TP=PP=1; linear width Q, or a tree (topk > 1) within UNO's limits.
    if tp != 1:
        raise SpecError("uno on sglang requires tensor_parallel_size 1 (SGLang: 'UNO requires TP=PP=1'), got %d" % tp)
    tree = _sglang_tree(out)
    if not tree and "num_speculative_tokens" not in out:
        raise SpecError("uno on sglang requires num_speculative_tokens (linear: verify width k+1) or the tree "
                        "eagle_steps/eagle_topk/num_draft_tokens")
    if not tree:
        return
    steps, topk, q = out["eagle_steps"], out["eagle_topk"], out["num_draft_tokens"]
    if topk == 1:
        raise SpecError("UNO with eagle_topk=1 is linear and ignores eagle_steps: give num_speculative_tokens")
    if q < steps + 1:
        raise SpecError("UNO tree mode requires num_draft_tokens >= eagle_steps + 1 (%d), got %d" % (steps + 1, q))
    if q > 128:
        raise SpecError("UNO tree mode supports at most 128 verify nodes (num_draft_tokens), got %d" % q)
    if q * topk > 2048:
        raise SpecError("UNO tree mode supports num_draft_tokens * eagle_topk <= 2048, got %d" % (q * topk))
    capacity, level = 1, 1
    for _level in range(steps):
        level *= topk
        capacity += level
        if capacity >= q:
            break
    if q > capacity:
        raise SpecError("UNO tree mode cannot build num_draft_tokens=%d from eagle_steps=%d, eagle_topk=%d "
                        "(capacity %d)" % (q, steps, topk, capacity))
    parent = topk * max(steps - 1, 0) + 1
    if q - 1 > parent:
        raise SpecError("UNO tree mode needs num_draft_tokens - 1 <= eagle_topk*(eagle_steps-1)+1 (%d), got %d"
                        % (parent, q - 1))


_CHECKS = {
    ("vllm", "ngram"): _vllm_ngram,
    ("vllm", "ngram_gpu"): _vllm_ngram,
    ("vllm", "eagle"): _vllm_draft,
    ("vllm", "eagle3"): _vllm_draft,
    ("vllm", "mtp"): _vllm_draft,
    ("vllm", "draft_model"): _vllm_draft,
    ("vllm", "dflash"): _vllm_draft,
    ("vllm", "dspark"): _vllm_dspark,
    ("vllm", "suffix"): _vllm_suffix,
    ("sglang", "ngram"): _sglang_ngram,
    ("sglang", "eagle"): _sglang_eagle,
    ("sglang", "eagle3"): _sglang_eagle,
    ("sglang", "mtp"): _sglang_eagle,
    ("sglang", "draft_model"): _sglang_eagle,
    ("sglang", "frozen_kv_mtp"): _sglang_frozen_kv_mtp,
    ("sglang", "uno"): _sglang_uno,
}


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------

def _vllm_args(spec):
    cfg = {"method": METHODS[spec["method"]]["vllm"]["name"]}
    for name, value in spec.items():
        if name == "schedule":
            value = [[b["batch"][0], _VLLM_OPEN_END if b["batch"][1] is None else b["batch"][1], b["k"]]
                     for b in value]
        if name != "method":
            cfg[VLLM_KEYS[name]] = value
    return ["--speculative-config", json.dumps(cfg, sort_keys=True, separators=(",", ":"))]


def _sglang_adaptive_text(schedule):
    # One fixed candidate per band: AdaptiveStepSlot never moves off a single candidate.
    cfg = dict((str(b["batch"][0]), {"candidate_steps": [b["k"]]}) for b in schedule)
    return json.dumps(cfg, separators=(",", ":")) + "\n"


def _schedule_path(text, schedule_dir):
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return "%s/sglang-adaptive-%s.json" % (schedule_dir.rstrip("/") or "", digest)


def _sglang_args(spec, schedule_dir):
    method = spec["method"]
    args = ["--speculative-algorithm", METHODS[method]["sglang"]["name"]]
    k = spec.get("num_speculative_tokens")
    if k is not None:
        if method == "dspark":
            args += ["--speculative-dspark-block-size", str(k)]  # gamma: tokens proposed per step
        else:
            if method in ("eagle", "eagle3", "mtp", "draft_model", "frozen_kv_mtp"):
                args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
            args += ["--speculative-num-draft-tokens", str(k + 1)]
    for name, value in spec.items():
        if name in SGLANG_FLAGS:
            args += [SGLANG_FLAGS[name], str(value)]
    if "schedule" in spec:
        text = _sglang_adaptive_text(spec["schedule"])
        args += [SGLANG_ADAPTIVE_FLAGS[0], SGLANG_ADAPTIVE_FLAGS[1], _schedule_path(text, schedule_dir)]
    return args


def _check_dir(schedule_dir):
    try:
        return _gate.path("schedule_dir", schedule_dir)
    except _gate.GateError as exc:
        raise SpecError(str(exc))


def engine_args(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR):
    """The engine's argv fragment for ``spec`` (validated first); ``[]`` for method none.

    ``schedule_dir``: where SGLang's adaptive config lives (see ``schedule_file``).
    """
    spec = normalize(spec, engine, tensor_parallel_size)
    if spec["method"] == "none":
        return []
    return _vllm_args(spec) if engine == "vllm" else _sglang_args(spec, _check_dir(schedule_dir))


def schedule_file(spec, engine, tensor_parallel_size=1, schedule_dir=SCHEDULE_DIR):
    """``{"path", "text"}`` of the adaptive config SGLang reads for a scheduled spec, else None.

    The name carries a digest of the text, so each schedule has its own file: a unit rolled back to
    an earlier schedule still finds its file, and an unchanged schedule never rewrites one.
    """
    spec = normalize(spec, engine, tensor_parallel_size)
    if engine != "sglang" or "schedule" not in spec:
        return None
    text = _sglang_adaptive_text(spec["schedule"])
    return {"path": _schedule_path(text, _check_dir(schedule_dir)), "text": text}


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
