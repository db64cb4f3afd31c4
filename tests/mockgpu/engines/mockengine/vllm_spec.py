# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's SpeculativeConfig rules (vllm/config/speculative.py), reimplemented from the source.

`validate()` returns the resolved config or raises ConfigError carrying the exact last
line vLLM prints (a pydantic ValidationError, or a bare NotImplementedError).
`schedule()` is what happens to num_speculative_tokens_per_batch_size at engine start
(VllmConfig._maybe_disable_dynamic_sd_*, vllm/v1/spec_decode/dynamic/utils.py).
"""
import json
import re

# vllm/config/speculative.py SpeculativeMethod / MTPModelTypes (0.33), in the Literal's order, which is
# the order pydantic lists them in when it refuses a method.
MTP_NAMES = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp",
    "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp",
)
METHODS = ("ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states") + MTP_NAMES + (
    "dflash", "ngram_gpu", "dspark")
PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v/"  # the pydantic vLLM 0.33 runs with (pinned 2.14)
FIELDS = (
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
    "tensor_parallel_size", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype",
    "max_model_len", "revision", "code_revision", "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch", "disable_eagle_block_drop", "use_local_argmax_reduction",
    "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting",
    "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob", "draft_load_config", "rejection_sample_method",
    "synthetic_acceptance_rates", "synthetic_acceptance_length", "enable_adaptive_verification",
    "draft_sample_method", "dspark_draft_topk", "speculative_token_tree", "disable_by_batch_size",
)
# Timing profiles exist for these; any other valid method runs with the `default` profile.
PROFILED = {"ngram": "ngram", "ngram_gpu": "ngram_gpu", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
            "draft_model": "draft_model", "suffix": "suffix", "medusa": "medusa",
            "mlp_speculator": "mlp_speculator", "dflash": "dflash", "dspark": "dspark"}
# Methods whose proposer honours a schedule on Model Runner V1 (VllmConfig._maybe_disable_dynamic_sd_for_v1).
SCHEDULE_V1 = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")
# Model Runner V2 (vLLM's default) does not run these; they fall back to V1.
V1_ONLY = ("suffix", "custom_class")
# A DSpark draft's block size is in its config.json; the mock reads it from the name (`..._block7`), else 7.
DSPARK_BLOCK = re.compile(r"block[_-]?([0-9]+)")


class ConfigError(Exception):
    """`str(exc)` is the final line(s) vLLM prints."""


def _pyd(msg, cfg):
    return ConfigError(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "  Value error, %s [type=value_error, input_value=ArgsKwargs((), %s), input_type=ArgsKwargs]\n"
        "    For further information visit %svalue_error" % (msg, json.dumps(cfg), PYDANTIC_DOCS))


def _field(name, msg, etype, value):
    return ConfigError(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "%s\n  %s [type=%s, input_value=%r, input_type=%s]\n    For further information visit %s%s"
        % (name, msg, etype, value, type(value).__name__, PYDANTIC_DOCS, etype))


def _int_field(cfg, name, minimum, strict_gt):
    value = cfg.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise _field(name, "Input should be a valid integer", "int_type", value)
    if value < minimum:
        if strict_gt:
            raise _field(name, "Input should be greater than %d" % (minimum - 1), "greater_than", value)
        raise _field(name, "Input should be greater than or equal to %d" % minimum, "greater_than_equal", value)
    return value


def _custom_path(model):
    if not model or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def validate(cfg, target_model, target_tp, warn):
    """Resolve a --speculative-config dict the way SpeculativeConfig does."""
    if not isinstance(cfg, dict):
        raise ConfigError("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
                          "  Input should be a dictionary [type=dict_type, input_value=%r]" % (cfg,))
    for key, value in cfg.items():
        if key not in FIELDS:
            raise _field(key, "Unexpected keyword argument", "unexpected_keyword_argument", value)
    nst = _int_field(cfg, "num_speculative_tokens", 1, True)
    lmax = _int_field(cfg, "prompt_lookup_max", 1, False)
    lmin = _int_field(cfg, "prompt_lookup_min", 1, False)
    dtp = _int_field(cfg, "draft_tensor_parallel_size", 1, False)
    method, model = cfg.get("method"), cfg.get("model")
    if method is not None and method not in METHODS:  # the `method` Literal: a pydantic literal_error
        listed = ", ".join("'%s'" % m for m in METHODS[:-1]) + " or '%s'" % METHODS[-1]
        raise _field("method", "Input should be %s" % listed, "literal_error", method)

    # __post_init__
    if method is None and _custom_path(model):
        method = "custom_class"
    elif method is None:
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if method in MTP_NAMES and method != "mtp":
        warn("method `%s` is deprecated and replaced with mtp." % method)
        method = "mtp"
    if model is None and nst is not None:
        if method in ("mtp", "dspark"):
            model = target_model
        elif method in ("ngram", "ngram_gpu", "suffix", "extract_hidden_states"):
            model = method
        elif method == "custom_class":
            raise _pyd("method='custom_class' requires 'model' to contain the custom proposer module path "
                       "(e.g., 'my_module.MyProposer').", cfg)
        else:
            raise _pyd("num_speculative_tokens was provided but without speculative model.", cfg)
    if method in ("ngram", "ngram_gpu"):
        if lmin is None and lmax is None:
            lmin = lmax = 5
        elif lmin is None:
            lmin = lmax
        elif lmax is None:
            lmax = lmin
        if lmin > lmax:
            raise _pyd("prompt_lookup_min=%d must be <= prompt_lookup_max=%d" % (lmin, lmax), cfg)
    elif method == "suffix":
        if nst is None:
            nst = int(cfg.get("suffix_decoding_max_tree_depth", 24))
            warn("Defaulted num_speculative_tokens to %s for suffix decoding." % nst)
    elif method not in ("custom_class", "extract_hidden_states") and model is not None:
        name = str(model).lower()
        if method == "draft_model":  # auto-detection from the draft checkpoint's name
            if "eagle-" in name:
                method = "eagle"
            elif "eagle3" in name:
                method = "eagle3"
            elif "dflash" in name:
                method = "dflash"
            elif "dspark" in name:
                method = "dspark"
        n_predict = 1 if method == "mtp" else None
        if method == "dspark" and nst is None:  # DSpark's parallel width is its block size
            found = DSPARK_BLOCK.search(name)
            nst = int(found.group(1)) if found else 7
        if method == "mtp" and nst is not None and nst > 1:
            warn("Enabling num_speculative_tokens > 1 will run multiple times of forward on same MTP "
                 "layer,which may result in lower acceptance rate")
        if n_predict is not None and nst is None:
            nst = n_predict
        if nst is None:
            raise _pyd("A speculative model was provided, but `num_speculative_tokens` was not provided", cfg)
        if dtp is None:
            dtp = target_tp
        elif dtp not in (1, target_tp):
            raise _pyd("speculative_draft_tensor_parallel_size=%d cannot be other value than 1 or target "
                       "model tensor_parallel_size" % dtp, cfg)

    # _verify_args (model_validator, mode="after")
    if cfg.get("tensor_parallel_size") is not None:
        raise _pyd("'tensor_parallel_size' is not a valid argument in the speculative_config. "
                   "Please pass 'draft_tensor_parallel_size' instead.", cfg)
    if nst is None:
        raise _pyd("num_speculative_tokens must be provided with speculative model unless the draft model "
                   "config contains an n_predict parameter.", cfg)
    sched = cfg.get("num_speculative_tokens_per_batch_size")
    if sched is not None and (not isinstance(sched, list) or not all(
            isinstance(e, (list, tuple)) and len(e) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)
            for e in sched)):
        raise _field("num_speculative_tokens_per_batch_size", "Input should be a valid list of 3-int tuples",
                     "list_type", sched)
    return {"method": method, "model": model, "num_speculative_tokens": nst, "prompt_lookup_min": lmin,
            "prompt_lookup_max": lmax, "draft_tensor_parallel_size": dtp,
            "num_speculative_tokens_per_batch_size": sched, "profile": PROFILED.get(method, "default")}


def schedule(spec, data_parallel_size, v2_runner, warn):
    """What the engine runs of a schedule: [(start, end, k)] sorted, or None (dropped with vLLM's
    warning). Raises ConfigError with the scheduler's ValueError for one it cannot build."""
    sched = spec.get("num_speculative_tokens_per_batch_size")
    if not sched:
        return None
    nst, method = spec["num_speculative_tokens"], spec["method"]
    if data_parallel_size > 1:
        warn("Dynamic speculative decoding is not supported with data parallelism because data-parallel ranks can "
             "select different speculative-token counts, causing DP divergence and deadlocks. Disabling "
             "num_speculative_tokens_per_batch_size and falling back to static num_speculative_tokens=%d." % nst)
        return None
    if (not v2_runner or method in V1_ONLY) and method not in SCHEDULE_V1:
        warn("Dynamic speculative decoding is not supported with the '%s' speculative method on Model Runner V1. "
             "Disabling num_speculative_tokens_per_batch_size and falling back to static num_speculative_tokens=%d."
             % (method, nst))
        return None
    out = []
    for lo, hi, k in sched:
        if lo <= 0 or hi <= 0:
            raise ConfigError("ValueError: Batch-size range (%d, %d) must be positive." % (lo, hi))
        if lo > hi:
            raise ConfigError("ValueError: Batch-size range start must be <= end for (%d, %d, %d)." % (lo, hi, k))
        if k < 0:
            raise ConfigError("ValueError: num_speculative_tokens_per_batch_size values must be >= 0.")
        out.append((lo, hi, k))
    out.sort(key=lambda e: e[0])
    end = 0
    for lo, hi, _k in out:
        if lo <= end:
            raise ConfigError("ValueError: Batch-size ranges must be non-overlapping and sorted.")
        end = hi
    if out[0][0] != 1:
        raise ConfigError("ValueError: The first batch-size range must start at 1 so every runtime batch size has a "
                          "defined schedule.")
    return Schedule((lo, hi, min(k, nst)) for lo, hi, k in out)  # the dense lookup caps every k at num_speculative_tokens


def k_for_batch(sched, batch):
    """The scheduler's k for one batch size: its range's, carried forward through gaps and past the end."""
    k = sched[0][2]
    for lo, _hi, bk in sched:
        if lo > batch:
            break
        k = bk
    return k


class Schedule(list):
    """[(start, end, k)] as the scheduler runs it (Scheduler.dynamic_sd_lookup): each step drafts
    dynamic_sd_lookup[number of scheduled requests]; a K=0 step schedules no draft tokens, so
    make_spec_decoding_stats counts no draft (no num_drafts, no per-position counts)."""

    zero_k_verifies = False

    def k_for_batch(self, batch):
        return k_for_batch(self, batch)
