"""vLLM's SpeculativeConfig rules (vllm/config/speculative.py), reimplemented from the source.

`validate()` returns the resolved config or raises ConfigError carrying the exact last
line vLLM prints (a pydantic ValidationError, or a bare NotImplementedError).
"""
import json

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
PROFILED = {"ngram": "ngram", "ngram_gpu": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
            "draft_model": "draft_model", "suffix": "suffix", "medusa": "medusa",
            "mlp_speculator": "mlp_speculator"}


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
        n_predict = 1 if method == "mtp" else None
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
    return {"method": method, "model": model, "num_speculative_tokens": nst, "prompt_lookup_min": lmin,
            "prompt_lookup_max": lmax, "draft_tensor_parallel_size": dtp,
            "profile": PROFILED.get(method, "default")}
