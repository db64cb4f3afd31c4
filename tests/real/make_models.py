# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tiny models for the real vLLM tier, made at test time (no download), byte-identical on every run.

Run with the real engine's venv (torch, transformers, tokenizers):
    .build/venv-vllm-real/bin/python tests/real/make_models.py OUT_DIR

Writes, under OUT_DIR:
  target/        a random Qwen2 (4 layers, hidden 256, vocab 2048) with a byte-level BPE tokenizer
                 trained here on seeded text. The later layers' residual writes are damped and lm_head
                 scaled, so greedy top-1 margins are wide (text does not flip on rounding) and a
                 1-layer draft made of layer 0 agrees with it often.
  draft/         that 1-layer draft: the target's embeddings, layer 0, norm and lm_head (same vocab).
  eagle3/        an EAGLE-3 head of the right shape for the target (Llama-style, random).
  eagle3-wrong/  the same head with the wrong hidden size: vLLM loads it, reports ready, then fails on
                 the first request (the failure the tier makes the switch survive).
Every file is world-readable (save_pretrained writes 0600): the service's own user reads them.
"""
from __future__ import annotations

import json
import os
import random
import sys

VOCAB = 2048
HIDDEN = 256
LAYERS = 4
SEED = 20261204

# Words for the tokenizer's training text and for the prompts: ordinary English, so the suites'
# prompts tokenize into a sane number of tokens.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will can more about up out "
    "them some could what into than then only other time like these two may first any new very see my "
    "model server token speculative decoding draft target engine request latency batch cache prefix "
    "prompt answer question reason step because therefore first second third list code function return "
    "value number write explain describe compare summarize translate repeat copy text line word sentence"
).split()


def _corpus(rng):
    lines = []
    for _line in range(4000):
        n = rng.randint(6, 24)
        lines.append(" ".join(rng.choice(_WORDS) for _word in range(n)) + rng.choice([".", "?", "!", ":"]))
    # Digits, punctuation and code-ish text, so every suite tokenizes without unknown bytes.
    lines += ["0123456789 + - * / = ( ) [ ] { } < > , ; ' \" # _ \n def return if else for while"] * 50
    return lines


def _tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - 3, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(random.Random(SEED)), trainer=trainer)
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   bos_token=None)
    # A chat template, so /v1/chat/completions works like on a real model.
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(out)
    return fast


def _target(torch, out):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=False, torch_dtype="float32", eos_token_id=0, bos_token_id=None,
                      pad_token_id=0)
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            if i > 0:  # later layers write little into the residual: a layer-0 draft agrees often
                layer.self_attn.o_proj.weight.mul_(0.05)
                layer.mlp.down_proj.weight.mul_(0.05)
        model.lm_head.weight.mul_(8.0)  # wide top-1 margins: greedy text does not flip on rounding
    model.save_pretrained(out, safe_serialization=True)
    return model, cfg


def _draft(torch, target, cfg, out):
    from transformers import Qwen2ForCausalLM

    d = cfg.to_dict()
    d.pop("layer_types", None)  # derived from the layer count
    dcfg = cfg.__class__(**dict(d, num_hidden_layers=1))
    draft = Qwen2ForCausalLM(dcfg)
    state = {k: v for k, v in target.state_dict().items() if not k.startswith("model.layers.")
             or k.startswith("model.layers.0.")}
    draft.load_state_dict(state, strict=True)
    draft.save_pretrained(out, safe_serialization=True)


def _eagle3(torch, cfg, out, hidden):
    """A Llama-style EAGLE-3 head: config plus random weights in the names vLLM's loader expects."""
    from safetensors.torch import save_file

    inter = 2 * hidden
    heads, kv = 4, 2
    head_dim = hidden // heads
    conf = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": inter, "num_attention_heads": heads, "num_key_value_heads": kv,
        "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": "float32", "hidden_act": "silu",
        "rope_theta": 10000.0,
        # With a 4-layer target vLLM's default auxiliary layers repeat one: name three distinct ones.
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]},
    }
    g = torch.Generator().manual_seed(SEED + hidden)

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).contiguous()

    t = {
        # vLLM sizes the head's input from the head's own hidden size (3 auxiliary layers of it): a head made
        # for another target size loads and reports ready, and the first request meets the target's
        # hidden states of the other size.
        "fc.weight": w(hidden, 3 * hidden),
        "midlayer.input_layernorm.weight": torch.ones(hidden),
        "midlayer.hidden_norm.weight": torch.ones(hidden),
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden),
        "midlayer.self_attn.q_proj.weight": w(heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": w(kv * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": w(kv * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": w(hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": w(inter, hidden),
        "midlayer.mlp.up_proj.weight": w(inter, hidden),
        "midlayer.mlp.down_proj.weight": w(hidden, inter),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": w(VOCAB, hidden),
        # No d2t / t2d: the draft vocabulary is the target's, and vLLM then has no such parameters
        # (it refuses a checkpoint that carries them: "no module or parameter named 'draft_id_to_target_id'").
    }
    os.makedirs(out, exist_ok=True)
    save_file(t, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=2, sort_keys=True)


def main(root):
    import torch

    torch.use_deterministic_algorithms(True)
    tmp = root + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    tok = _tokenizer(os.path.join(tmp, "target"))
    target, cfg = _target(torch, os.path.join(tmp, "target"))
    _draft(torch, target, cfg, os.path.join(tmp, "draft"))
    tok.save_pretrained(os.path.join(tmp, "draft"))
    _eagle3(torch, cfg, os.path.join(tmp, "eagle3"), HIDDEN)
    _eagle3(torch, cfg, os.path.join(tmp, "eagle3-wrong"), HIDDEN // 2)
    for base, dirs, files in os.walk(tmp):
        os.chmod(base, 0o755)
        for name in files:
            os.chmod(os.path.join(base, name), 0o644)
    os.rename(tmp, root)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
