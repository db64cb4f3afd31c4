# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tiny local model directories (config.json only) so the engines build real configs offline.

vLLM's SpeculativeConfig loads the draft's and the target's HF config to pick the proposer and
check it; a config.json with the right architecture is all that step reads (no weights, no
tokenizer), so every model-based method validates on the CPU without a download.
"""
from __future__ import annotations

import json
import os

_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048,
          "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16", "tie_word_embeddings": False}

# A DeepSeek-V3-shaped target with one MTP layer: what method=mtp drafts from.
_DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_nextn_predict_layers": 1,
         "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
         "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048,
         "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
         "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
         "n_group": 1, "topk_group": 1, "torch_dtype": "bfloat16"}

# Qwen3-shaped target and the block drafts that serve it: a DFlash draft (EAGLEConfig keeps a
# DFlash* architecture, the registry maps DFlashDraftModel to DFlashQwen3ForCausalLM) and a Qwen3
# DSpark draft whose block_size (7) is what vLLM takes as k when none is given.
_QWEN3 = dict(_LLAMA, model_type="qwen3", head_dim=16)
_BLOCK = {"target_layer_ids": [0, 1], "mask_token_id": 999}

CONFIGS = {
    "target": dict(_LLAMA, architectures=["LlamaForCausalLM"]),
    "qwen3_target": dict(_QWEN3, architectures=["Qwen3ForCausalLM"]),
    "dflash": dict(_QWEN3, architectures=["DFlashDraftModel"], num_hidden_layers=1, block_size=16,
                   dflash_config=dict(_BLOCK, block_size=16)),
    "dspark": dict(_QWEN3, architectures=["Qwen3DSparkModel"], num_hidden_layers=1, block_size=7,
                   dflash_config=dict(_BLOCK, block_size=7)),
    "draft": dict(_LLAMA, architectures=["LlamaForCausalLM"], num_hidden_layers=1),
    "eagle": dict(_LLAMA, architectures=["EagleLlamaForCausalLM"], num_hidden_layers=1),
    "eagle3": dict(_LLAMA, architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=1),
    "mtp_target": _DSV3,
}


def write_all(root):
    """Write every model dir under root; return {name: path}."""
    paths = {}
    for name, cfg in CONFIGS.items():
        path = os.path.join(root, name)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f)
        paths[name] = path
    return paths
