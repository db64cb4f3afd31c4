# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`python3 -m sglang.launch_server ...`: flags, speculative checks, schedulers, readiness."""
import argparse
import bisect
import json
import math
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import gpumem, group, park, procs, runtime, weights
from .log import SglangLog, traceback_text
from .server import make_server
from .timing import SpecShape

# sglang/srt/speculative/spec_info.py SpeculativeAlgorithm (0.5.23); NEXTN is an alias of EAGLE.
ALGORITHMS = ("DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM")
PROFILE_OF = {"EAGLE": "eagle", "EAGLE3": "eagle3", "STANDALONE": "draft_model", "NGRAM": "ngram", "NEXTN": "mtp",
              "DFLASH": "dflash", "DSPARK": "dspark", "UNO": "uno", "FROZEN_KV_MTP": "frozen_kv_mtp"}
DEFAULT_DSPARK_GAMMA = 7  # dspark_components/dspark_config.py


class ArgsError(Exception):
    """`str(exc)` is the exception line SGLang prints."""


def build_parser():
    p = argparse.ArgumentParser(prog="launch_server.py")
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--tokenizer-path")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--served-model-name")
    p.add_argument("--context-length", type=int)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--enable-memory-saver", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--max-total-tokens", type=int)
    p.add_argument("--chunked-prefill-size", type=int)
    p.add_argument("--max-prefill-tokens", type=int)
    p.add_argument("--cuda-graph-max-bs", type=int)
    p.add_argument("--cuda-graph-bs", type=int, nargs="+")
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--random-seed", type=int)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--gpu-id-step", type=int, default=1)
    p.add_argument("--page-size", type=int)
    p.add_argument("--watchdog-timeout", type=float)
    # arg_groups/fields/parallel.py: the multi-node fields (issue 33)
    p.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-timeout", type=int)
    p.add_argument("--nccl-port", type=int)
    for flag in ("--disable-cuda-graph", "--disable-cuda-graph-padding", "--disable-radix-cache", "--enable-torch-compile", "--log-requests",
                 "--enable-dp-attention", "--skip-server-warmup", "--enable-cache-report", "--show-time-cost",
                 "--disable-overlap-schedule", "--enable-mixed-chunk"):
        p.add_argument(flag, action="store_true")
    for flag in ("--dtype", "--quantization", "--kv-cache-dtype", "--attention-backend", "--log-level",
                 "--api-key", "--admin-api-key", "--schedule-policy", "--reasoning-parser", "--tool-call-parser", "--chat-template",
                 "--load-format", "--revision", "--device"):
        p.add_argument(flag)
    # speculative decoding
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    p.add_argument("--speculative-draft-model-revision")
    p.add_argument("--speculative-draft-model-quantization")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    p.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    p.add_argument("--speculative-token-map")
    p.add_argument("--speculative-attention-mode", choices=["prefill", "decode"], default="prefill")
    p.add_argument("--speculative-draft-attention-backend")
    p.add_argument("--speculative-dflash-block-size", type=int)
    p.add_argument("--speculative-dspark-block-size", type=int)
    p.add_argument("--uno-lora-path")
    p.add_argument("--speculative-adaptive", action="store_true")
    p.add_argument("--speculative-adaptive-config")
    for flag in ("--enable-two-batch-overlap", "--enable-pdmux", "--enable-multi-layer-eagle"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--speculative-ngram-min-match-window-size", type=int, default=1)
    p.add_argument("--speculative-ngram-max-match-window-size", type=int, default=12)
    p.add_argument("--speculative-ngram-min-bfs-breadth", type=int, default=1)
    p.add_argument("--speculative-ngram-max-bfs-breadth", type=int, default=10)
    p.add_argument("--speculative-ngram-match-type", choices=["BFS", "PROB"], default="BFS")
    p.add_argument("--speculative-ngram-branch-length", "--speculative-ngram-max-trie-depth",
                   dest="speculative_ngram_branch_length", type=int, default=18)
    p.add_argument("--speculative-ngram-capacity", type=int, default=10 * 1000 * 1000)
    return p


def check_speculative(args, warn):
    """ServerArgs' speculative handling; fills the auto values. Raises ArgsError."""
    if args.speculative_algorithm is None:
        return None
    name = args.speculative_algorithm.upper()
    if name == "NEXTN":
        profile_key = "mtp"
        name = "EAGLE"
        if args.speculative_draft_model_path is None:
            args.speculative_draft_model_path = args.model_path  # MTP weights ship in the target
    else:
        profile_key = PROFILE_OF.get(name)
    if name not in ALGORITHMS:  # SpeculativeAlgorithm.from_string
        raise ArgsError("ValueError: Unknown speculative algorithm name: %s" % args.speculative_algorithm)
    args.speculative_algorithm = name
    schedule = _adaptive(args, name, warn) if args.speculative_adaptive else None
    if name in ("DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP"):
        shape = _HANDLERS[name](args, warn)
    elif name in ("EAGLE", "EAGLE3", "STANDALONE"):
        if args.speculative_draft_model_path is None:
            raise ArgsError("ValueError: --speculative-draft-model-path is required for --speculative-algorithm %s"
                            % name)
        trio = (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens)
        if args.speculative_adaptive:
            pass  # _adaptive chose steps, topk 1 and steps + 1 draft tokens
        elif all(v is None for v in trio):
            llama_like = any(s in args.model_path.lower() for s in ("llama", "grok"))
            (args.speculative_num_steps, args.speculative_eagle_topk,
             args.speculative_num_draft_tokens) = (5, 4, 8) if llama_like else (3, 1, 4)
            warn("Auto choose speculative_num_steps=%d, speculative_eagle_topk=%d, speculative_num_draft_tokens=%d"
                 % (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens))
        elif any(v is None for v in trio):
            raise ArgsError("AssertionError: speculative_num_steps, speculative_eagle_topk and "
                            "speculative_num_draft_tokens must be set together (or all left unset for auto)")
        for flag, val in zip(("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"),
                             (args.speculative_num_steps, args.speculative_eagle_topk,
                              args.speculative_num_draft_tokens)):
            if val < 1:
                raise ArgsError("ValueError: --%s must be >= 1, got %d" % (flag.replace("_", "-"), val))
        if args.speculative_eagle_topk == 1 and args.speculative_num_draft_tokens != args.speculative_num_steps + 1:
            warn("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
            args.speculative_num_draft_tokens = args.speculative_num_steps + 1
        # With adaptive tiers a step may run any candidate: the draft buffers span the largest.
        depth = schedule.max_steps if schedule is not None else args.speculative_num_steps
        verify = depth if schedule is not None else args.speculative_num_draft_tokens - 1
        shape = SpecShape(profile_key, depth, verify, args.speculative_eagle_topk)
    else:  # NGRAM
        lo, hi = args.speculative_ngram_min_match_window_size, args.speculative_ngram_max_match_window_size
        if lo < 1 or lo > hi:
            raise ArgsError("ValueError: speculative_ngram_min_match_window_size=%d must be >= 1 and <= "
                            "speculative_ngram_max_match_window_size=%d" % (lo, hi))
        if args.enable_dp_attention:
            raise ArgsError("ValueError: Currently ngram speculative decoding does not support dp attention.")
        if args.speculative_num_draft_tokens is None:
            args.speculative_num_draft_tokens = hi
        if args.speculative_num_draft_tokens < 2:
            raise ArgsError("ValueError: speculative_num_draft_tokens must be >= 2 for NGRAM, got %d"
                            % args.speculative_num_draft_tokens)
        depth = args.speculative_num_draft_tokens - 1
        shape = SpecShape(profile_key, depth, depth, 1)
    # AdaptiveTiers [(start, end, k)] per batch tier (None: a fixed k); SpecShape.k_for_batch reads it.
    shape.schedule = schedule
    return shape


def _adaptive(args, name, warn):
    """speculative_hook._maybe_disable_adaptive, then _init_adaptive_speculative_params; the tiers as
    EAGLEWorkerV2 runs them (AdaptiveTiers), or None when adaptive is switched off."""
    reason = None
    if name not in ("EAGLE", "EAGLE3"):
        reason = "speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)" % name
    elif args.speculative_eagle_topk is not None and args.speculative_eagle_topk != 1:
        reason = "speculative_eagle_topk=%d (only topk=1 is supported)" % args.speculative_eagle_topk
    elif args.enable_dp_attention:
        reason = "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    elif args.enable_multi_layer_eagle:
        reason = "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
    elif args.enable_two_batch_overlap:
        reason = ("enable_two_batch_overlap=True is not supported "
                  "(adaptive state swap would discard the TboAttnBackend wrapper)")
    elif args.enable_pdmux:
        reason = "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
    if reason:
        warn("speculative_adaptive disabled: %s. Falling back to static speculative params." % reason)
        args.speculative_adaptive = False
        return None
    top, slots = _load_adaptive_config(args.speculative_adaptive_config)
    candidates = sorted({s for entry in slots.values() for s in entry["candidate_steps"]})
    if args.speculative_eagle_topk is None:
        args.speculative_eagle_topk = 1
    if args.speculative_num_steps is None:
        args.speculative_num_steps = candidates[len(candidates) // 2]
    if args.speculative_num_steps not in candidates:
        raise ArgsError("ValueError: --speculative-num-steps=%d is not in the adaptive config candidate_steps %s. "
                        "Pass one of those values." % (args.speculative_num_steps, candidates))
    args.speculative_num_draft_tokens = args.speculative_num_steps + 1
    return AdaptiveTiers(dict((bs, dict(top, **entry)) for bs, entry in slots.items()), args.speculative_num_steps,
                         _decode_capture_sizes(args))


# adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG (0.5.23)
DEFAULT_ADAPTIVE = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


def _load_adaptive_config(path):
    """adaptive_spec_params._load_adaptive_config: (top-level keys, {batch start: entry}); each slot runs
    with {**top, **entry} (AdaptiveSpeculativeParams)."""
    if path is None:
        cfg = DEFAULT_ADAPTIVE
    else:
        try:
            with open(path) as f:
                cfg = json.load(f)
        except OSError as exc:
            raise ArgsError("FileNotFoundError: [Errno %d] %s: '%s'" % (exc.errno or 2, exc.strerror, path))
        except ValueError as exc:
            raise ArgsError("json.decoder.JSONDecodeError: %s" % exc)
    slots = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps):
            raise ArgsError("ValueError: BS %s: candidate_steps must be a list of non-negative ints, got %r" % (key, steps))
        slots[int(key)] = entry
    if not slots:
        raise ArgsError("ValueError: speculative_adaptive_config must contain at least one integer-string BS key, e.g. "
                        '{"1": {"candidate_steps": [1,3,7]}}. Got keys: %s' % list(cfg.keys()))
    return dict((k, v) for k, v in cfg.items() if not k.isdigit()), slots


def _gpu_mem_mib():
    """get_device_memory_capacity: the first visible GPU's memory (MiB), None without a mock GPU config."""
    gpus = gpumem.load_gpus()
    visible = [i for i in gpumem.visible_gpus() if i in gpus]
    return float(gpus[visible[0]].get("memory_total_mib", 0)) if visible else None


def _decode_capture_sizes(args):
    """The decode CUDA-graph batch sizes a speculative server captures (memory_hook._handle_gpu_memory_settings,
    cuda_graph_hook.generate_decode_cuda_graph_batch_sizes), None with CUDA graphs off (no padding)."""
    if args.disable_cuda_graph:
        return None
    if args.cuda_graph_bs:
        return sorted(set(args.cuda_graph_bs))
    max_bs = args.cuda_graph_max_bs
    if max_bs is None:
        mem, tp = _gpu_mem_mib(), args.tp_size
        if mem is None:
            max_bs = 160
        elif mem < 20 * 1024:
            max_bs = 8
        elif mem < 35 * 1024:
            max_bs = 48 if tp < 4 else 160
        elif mem < 60 * 1024:
            max_bs = 32 if tp < 4 else 160
        elif mem < 160 * 1024:  # H100, A100 80 GB, H20, H200
            max_bs = 256 if tp < 4 else 512
        else:
            max_bs = 512
        if args.max_running_requests is not None and max_bs > args.max_running_requests:
            max_bs = args.max_running_requests
    if args.disable_cuda_graph_padding:
        sizes = list(range(1, max_bs + 1))
    else:  # the speculative list: less padding for small batches
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, max_bs + 1, 16)))
    sizes = [b for b in sizes if b <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


class _Slot:
    """adaptive_spec_params.AdaptiveStepSlot: one batch tier's steps, moved by an EMA of accepted drafts."""

    def __init__(self, initial_steps, cfg):
        self.candidates = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        if initial_steps in self.candidates:
            self.steps = initial_steps
        else:
            self.steps = self.candidates[len(self.candidates) // 2]
        self.ema = float(self.steps - 1)
        self.batches = 0

    def update(self, batch_avg):
        """One verified batch whose requests accepted `batch_avg` drafts on average (update)."""
        if self.steps > 0:
            self.ema = (1 - self.ema_alpha) * self.ema + self.ema_alpha * batch_avg
        self.batches += 1
        if self.batches <= self.warmup_batches or (self.batches - self.warmup_batches) % self.update_interval:
            return
        cands, old = self.candidates, self.steps
        idx = start = cands.index(old)
        if old == 0:  # probe the smallest positive step after a zero-step interval
            idx = min(idx + 1, len(cands) - 1)
            if cands[idx] > 0 and self.ema < 0:
                self.ema = float(cands[idx] - 1)
            self.steps = cands[idx]
            return
        while idx > 0:
            prev = cands[idx - 1]
            if self.ema <= (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis:
                idx -= 1
            else:
                break
        if idx == start:
            while idx < len(cands) - 1 and self.ema > cands[idx] - 0.5 + self.up_hysteresis:
                idx += 1
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema * self.ceiling_coeff))
            if cands[idx] > ceiling and cands[idx] <= old:
                while idx > 0 and cands[idx] > ceiling:
                    idx -= 1
        self.steps = cands[idx]


class AdaptiveTiers(list):
    """SGLang's adaptive tiers as EAGLEWorkerV2 runs them: [(start, end, steps now)] per batch tier.

    A step's batch is padded up to the next decode CUDA-graph size, then routed to the tier with the
    largest start <= it (the first tier below every start): AdaptiveSpeculativeParams._route. A tier
    with one candidate keeps it; with several, its steps follow the EMA of accepted drafts, fed by
    every verify (on_verify_complete; the mock groups `batch` request steps into one verify). K=0 skips
    drafting, but the step is still a (1-token) verify: it counts in the accept length."""

    zero_k_verifies = True

    def __init__(self, slots, initial_steps, capture=None):
        self._starts = sorted(slots)
        self._slots = dict((bs, _Slot(initial_steps, slots[bs])) for bs in self._starts)
        self.capture = capture
        self.max_steps = max(c for slot in self._slots.values() for c in slot.candidates)
        self._pending = dict((bs, [0, 0]) for bs in self._starts)
        self._lock = threading.Lock()
        list.__init__(self, self._bands())

    def _bands(self):
        last = len(self._starts) - 1
        return [(lo, None if i == last else self._starts[i + 1] - 1, self._slots[lo].steps)
                for i, lo in enumerate(self._starts)]

    def tier(self, batch):
        """The tier start a batch of `batch` requests runs in (_pad_to_cuda_graph_bs, _find_closest_bs)."""
        if self.capture:
            idx = bisect.bisect_left(self.capture, batch)
            batch = self.capture[idx] if idx < len(self.capture) else batch
        idx = bisect.bisect_right(self._starts, batch) - 1
        return self._starts[max(0, idx)]

    def k_for_batch(self, batch):
        return self._slots[self.tier(batch)].steps

    def observe(self, batch, k, accepted):
        with self._lock:
            lo = self.tier(batch)
            pending = self._pending[lo]
            pending[0] += accepted
            pending[1] += 1
            if pending[1] < batch:
                return
            slot = self._slots[lo]
            before = slot.steps
            slot.update(pending[0] / float(pending[1]))
            self._pending[lo] = [0, 0]
            if slot.steps != before:
                self[:] = self._bands()


def _one_step(args, name, warn):
    for field in ("speculative_num_steps", "speculative_eagle_topk"):
        value = getattr(args, field)
        if value is not None and value != 1:
            warn("%s only supports %s == 1; overriding %s=%s to 1." % (name, field, field, value))
        setattr(args, field, 1)


def _handle_dflash(args, warn):
    if args.speculative_draft_model_path is None:
        raise ArgsError("ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path.")
    _one_step(args, "DFLASH", warn)
    block = args.speculative_dflash_block_size
    if block is not None:
        if block <= 0:
            raise ArgsError("ValueError: DFLASH requires --speculative-dflash-block-size to be positive, got %d." % block)
        if args.speculative_num_draft_tokens is not None and args.speculative_num_draft_tokens != block:
            raise ArgsError("ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are "
                            "set but they differ. For DFLASH they must match.")
        args.speculative_num_draft_tokens = block
    if args.speculative_num_draft_tokens is None:
        warn("speculative_num_draft_tokens is not set; defaulting to 16 for DFLASH.")
        args.speculative_num_draft_tokens = 16
    ndt = args.speculative_num_draft_tokens
    return SpecShape("dflash", ndt - 1, ndt, 1)


def _handle_dspark(args, warn):
    if args.speculative_draft_model_path is None:  # the mock's targets bundle no DSpark stages
        raise ArgsError("ValueError: DSpark dense speculative decoding requires setting --speculative-draft-model-path.")
    _one_step(args, "DSpark", warn)
    gamma = args.speculative_dspark_block_size
    if gamma is not None and gamma <= 0:
        raise ArgsError("ValueError: DSpark requires --speculative-dspark-block-size to be positive, got %d." % gamma)
    if gamma is None and args.speculative_num_draft_tokens is None:
        warn("DSpark gamma is not set; defaulting to %d." % DEFAULT_DSPARK_GAMMA)
        gamma = DEFAULT_DSPARK_GAMMA
    if gamma is not None:
        if args.speculative_num_draft_tokens is not None and args.speculative_num_draft_tokens != gamma + 1:
            raise ArgsError("ValueError: DSpark speculative_num_draft_tokens must equal gamma + 1 (= %d for gamma=%d), "
                            "but got speculative_num_draft_tokens=%d." % (gamma + 1, gamma,
                                                                          args.speculative_num_draft_tokens))
        args.speculative_num_draft_tokens = gamma + 1
    if args.speculative_num_draft_tokens < 2:
        raise ArgsError("ValueError: DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got %d."
                        % args.speculative_num_draft_tokens)
    ndt = args.speculative_num_draft_tokens
    return SpecShape("dspark", ndt - 1, ndt, 1)


def _handle_uno(args, warn):
    if args.speculative_draft_model_path is not None:
        raise ArgsError("ValueError: UNO reuses the target model and does not accept --speculative-draft-model-path.")
    if args.uno_lora_path is None:
        raise ArgsError("ValueError: UNO requires --uno-lora-path.")
    q = args.speculative_num_draft_tokens
    if q is None or q < 1:
        raise ArgsError("ValueError: UNO requires --speculative-num-draft-tokens to be a positive integer denoting the "
                        "linear width or tree verify width Q.")
    topk = 1 if args.speculative_eagle_topk is None else args.speculative_eagle_topk
    if topk < 1:
        raise ArgsError("ValueError: UNO requires --speculative-eagle-topk to be at least 1, got %d." % topk)
    if topk > 1:
        steps = args.speculative_num_steps
        if steps is None or steps < 1:
            raise ArgsError("ValueError: UNO tree mode requires --speculative-num-steps so its draft width F can be "
                            "derived as speculative_num_steps + 1.")
        if q < steps + 1:
            raise ArgsError("ValueError: UNO tree mode requires Q >= F; got Q=%d, F=%d." % (q, steps + 1))
        if q > 128:
            raise ArgsError("ValueError: UNO tree mode currently supports at most Q=128 verify nodes, got Q=%d." % q)
        if q * topk > 2048:
            raise ArgsError("ValueError: UNO tree mode currently supports Q*K <= 2048; got Q*K=%d*%d=%d."
                            % (q, topk, q * topk))
        capacity, level = 1, 1
        for _step in range(steps):
            level *= topk
            capacity += level
            if capacity >= q:
                break
        if q > capacity:
            raise ArgsError("ValueError: UNO tree mode cannot build the requested Q from F and K: Q=%d exceeds "
                            "capacity=%d for F=%d, K=%d." % (q, capacity, steps + 1, topk))
        parent = topk * max(steps - 1, 0) + 1
        if q - 1 > parent:
            raise ArgsError("ValueError: UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: "
                            "Q-1=%d exceeds K*(F-2)+1=%d for F=%d, K=%d." % (q - 1, parent, steps + 1, topk))
        shape = SpecShape("uno", steps, q - 1, topk)
    else:
        for field in ("speculative_num_steps", "speculative_eagle_topk"):
            value = getattr(args, field)
            if value not in (None, 1):
                warn("UNO uses %s=1; overriding %s." % (field, value))
            setattr(args, field, 1)
        shape = SpecShape("uno", q - 1, q - 1, 1)
    if args.tp_size != 1:
        raise ArgsError("ValueError: UNO requires TP=PP=1.")
    if args.enable_dp_attention:
        raise ArgsError("ValueError: UNO does not support DP attention or context parallelism.")
    return shape


def _handle_frozen_kv_mtp(args, warn):
    if args.speculative_draft_model_path is None:  # the worker loads the Gemma-4 assistant draft
        raise ArgsError("ValueError: --speculative-draft-model-path is required for --speculative-algorithm "
                        "FROZEN_KV_MTP")
    if args.speculative_num_steps is None:  # SGLang picks no steps for it; its worker then fails
        raise ArgsError("TypeError: '<=' not supported between instances of 'NoneType' and 'int'")
    topk = args.speculative_eagle_topk or 1
    ndt = args.speculative_num_draft_tokens or args.speculative_num_steps + 1
    return SpecShape("frozen_kv_mtp", args.speculative_num_steps, ndt - 1, topk)


_HANDLERS = {"DFLASH": _handle_dflash, "DSPARK": _handle_dspark, "UNO": _handle_uno, "FROZEN_KV_MTP": _handle_frozen_kv_mtp}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    log = SglangLog()
    try:
        check_group(args)
        spec = check_speculative(args, log.warning)
    except ArgsError as exc:
        runtime.print_error(traceback_text(str(exc), [
            ("<frozen runpy>", 198, "_run_module_as_main", 'return _run_code(code, main_globals, None,'),
            ("sglang/srt/server_args.py", 1, "__post_init__", "self._handle_speculative_decoding()")]))
        runtime.exit_now(1)
    if args.mem_fraction_static is None:
        args.mem_fraction_static = 0.88
    log.info("server_args=ServerArgs(%s)" % ", ".join("%s=%r" % kv for kv in sorted(vars(args).items())))
    fault_key = args.speculative_algorithm or "none"
    faults, params, load, profile = runtime.resolve("sglang", spec.method_key if spec else None, fault_key)
    stopper = runtime.Stopper(bool(faults.get("ignore_sigterm")))
    served = [args.served_model_name or args.model_path]
    max_len = args.context_length or int(profile.get("max_model_len", 32768))
    info = dict(vars(args))
    state = runtime.make_state("sglang", args.model_path, served, max_len, params, spec, faults, profile,
                               args.max_running_requests or 256, stream_interval=args.stream_interval,
                               log=True, enable_metrics=args.enable_metrics, server_info=info,
                               api_keys=[args.api_key])
    spec_key = None
    if spec is not None:
        spec_key = {k: v for k, v in sorted(vars(args).items()) if k.startswith("speculative_")}
    spec_text = ("algorithm=%s, draft=%s, steps=%s, topk=%s, draft_tokens=%s" % (
        args.speculative_algorithm, args.speculative_draft_model_path, args.speculative_num_steps,
        args.speculative_eagle_topk, args.speculative_num_draft_tokens)) if spec is not None else None
    rdv_host, rdv_port = rendezvous_address(args)
    timeout = float(args.dist_timeout or 1800)  # torch's default_pg_timeout (30 min) when --dist-timeout is unset
    if args.nnodes > 1 and args.node_rank > 0:
        _worker_node(args, log, stopper, faults, load, profile, group.digest(spec_key), spec_text, rdv_host,
                     rdv_port, timeout)
    head = None
    if args.nnodes > 1:
        try:  # rank 0's TCPStore on the dist-init port
            head = group.Head("sglang", rdv_port, args.nnodes, args.tp_size, group.digest(spec_key), spec_text)
        except OSError as exc:
            runtime.print_error(traceback_text(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                "address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: %s" % (
                    rdv_port, exc.strerror or exc)))
            runtime.exit_now(1)
    try:
        server = make_server(state, args.host, args.port)
        server.server_activate()  # SGLang answers (503) while it loads
    except OSError as exc:
        runtime.print_error(traceback_text("OSError: [Errno %d] %s" % (exc.errno or 98, exc.strerror or exc)))
        runtime.exit_now(1)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    for line in ("Started server process [%d]" % os.getpid(), "Waiting for application startup.",
                 "Application startup complete.",
                 "Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (args.host, args.port)):
        print("INFO:     " + line, flush=True)

    fail = runtime.fail_message(faults, "RuntimeError: CUDA error: an illegal memory access was encountered")
    ranks = _schedulers(args, faults, load, profile, fail)
    ranks.append(("sglang::detokenizer", {"role": "idle", "engine": "sglang", "title": "sglang::detokenizer",
                                          "rank": "detokenizer",
                                          "ignore_sigterm": bool(faults.get("ignore_sigterm"))}))
    sup = procs.Supervisor(log)
    sup.start(ranks)
    if head is not None:
        for _title, r in ranks[:-1]:
            SglangLog(r["log_tag"]).info("Init parallel begin.")
    began = time.monotonic()
    error = _wait(sup, len(ranks), stopper, head, timeout, log)
    if head is not None and not error:
        for _title, r in ranks[:-1]:
            SglangLog(r["log_tag"]).info("Init parallel ends. elapsed=%.2f s" % (time.monotonic() - began))
    if error == "stop":
        _shutdown(log, state, server, sup, head)
    if error:
        log.error("Scheduler hit an exception: %s" % error)
        runtime.print_error(traceback_text("RuntimeError: Initialization failed. Please see the error messages above."))
        sup.stop()
        runtime.exit_now(1)
    if faults.get("never_ready"):
        log.info("Waiting for the warmup request to finish...")
    else:
        # The release/resume routes always exist; only --enable-memory-saver makes them free anything.
        state.park = park.Parker(list(sup.ready.values()), profile, args.enable_memory_saver, load,
                                 fault_key=fault_key, log=log)
        state.ready = True
        log.info("End of prefill warmup with status 200, resp: [{'text': '.', 'meta_info': {}}]")
        log.info("The server is fired up and ready to roll!")
    while not stopper.wait(0.2):
        dead = sup.crashed()
        if dead:
            log.error("Child process unexpectedly failed: %s" % dead)
            state.shutting_down = True
            sup.stop()
            runtime.exit_now(1)
        lost = head.failure() if head is not None else None
        if lost:  # the group's next collective fails on every rank of the head (NCCL)
            SglangLog("TP0").error("Scheduler hit an exception: %s (%s)" % (group.NCCL_REMOTE, lost))
            log.error("Child process unexpectedly failed: sglang::scheduler (rank 0) exited with code 1")
            state.shutting_down = True
            sup.stop()
            runtime.exit_now(1)
    _shutdown(log, state, server, sup, head)


def check_group(args):
    """What ServerArgs refuses of the multi-node settings (arg_groups/validation_hook.py check_server_args)."""
    if args.tp_size % args.nnodes != 0:  # (tp_size * pp_size) % nnodes; the mock has no pipeline parallelism
        raise ArgsError("AssertionError: tp_size must be divisible by number of nodes")
    if args.dp_size > 1 and args.nnodes != 1:
        raise ArgsError("AssertionError: multi-node data-parallel replicas are not supported; use attention DP "
                        "(--attn-dp-size) across nodes")


def rendezvous_address(args):
    """(host, port) of rank 0's TCPStore: --dist-init-addr HOST:PORT (bootstrap.py _resolve_dist_init_method),
    else --host and the NCCL port (a random free port when --nccl-port is unset: other nodes cannot find it)."""
    if args.dist_init_addr:
        host, _sep, port = args.dist_init_addr.rpartition(":")
        try:
            return host.strip("[]"), int(port)
        except ValueError:
            runtime.print_error(traceback_text("ValueError: invalid address %r: expected HOST:PORT" % args.dist_init_addr))
            runtime.exit_now(1)
    if args.nccl_port:
        return args.host, args.nccl_port
    import socket  # pylint: disable=import-outside-toplevel
    with socket.socket() as s:
        s.bind(("", 0))
        return args.host, s.getsockname()[1]


def _schedulers(args, faults, load, profile, fail):
    """This node's scheduler processes: TP ranks node_rank*local ... on base_gpu_id + local_rank*gpu_id_step."""
    visible = gpumem.visible_gpus()
    tp = args.tp_size
    local = tp // max(1, args.nnodes)
    first = args.node_rank * local if args.nnodes > 1 else 0
    gpus = [args.base_gpu_id + r * args.gpu_id_step for r in range(local)]
    if any(g >= len(visible) for g in gpus):
        runtime.print_error(traceback_text("RuntimeError: CUDA error: invalid device ordinal (tp_size=%d, visible "
                                           "GPUs=%d)" % (local, len(visible))))
        runtime.exit_now(1)
    escape = runtime.escape_rank(faults, local)
    ranks = []
    for local_rank in range(local):
        rank = first + local_rank
        # managers/scheduler.py: setproctitle(f"sglang::scheduler{prefix}"), prefix " TP<r>" only when tp_size > 1
        title = "sglang::scheduler_TP%d" % rank if tp > 1 else "sglang::scheduler"
        ranks.append((title, {
            "role": "worker", "engine": "sglang", "title": title, "rank": rank,
            "gpu": visible[gpus[local_rank]], "fraction": args.mem_fraction_static, "load_seconds": load,
            "weights": weights.share(args.model_path, rank, tp),
            "escape": local_rank == escape, "fail": fail if local_rank == 0 else None,
            "ignore_sigterm": bool(faults.get("ignore_sigterm")), "log_tag": "TP%d" % rank,
            "park_residual_mib": park.settings(profile)["residual_mib"]}))
    return ranks


class _DummyHealth(BaseHTTPRequestHandler):
    """utils/common.py launch_dummy_health_check_server: what a node of rank > 0 serves on --port."""
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, fmt, *args):  # log_level="warning": no access log
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        code, body = (200, b"") if path in ("/ping", "/health", "/health_generate") else (404, b'{"detail":"Not Found"}')
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _worker_node(args, log, stopper, faults, load, profile, spec, spec_text, host, port, timeout):
    """A node of rank > 0 (engine.py _launch_subprocesses): its schedulers join rank 0's group; no tokenizer, no
    detokenizer; once they are ready a dummy health server on --port; SIGTERM only logs (rank 0's ShutdownReq
    broadcast stops the schedulers); it lives as long as the group."""
    dies = faults.get("group_rank_dies")
    fail = None
    if dies is True or (dies is not None and dies is not False and int(dies) == args.node_rank):
        fail = runtime.fail_message({"fail_start": faults.get("fail_start") or True},
                                    "RuntimeError: CUDA error: an illegal memory access was encountered")
    ranks = _schedulers(args, faults, load, profile, fail)
    sup = procs.Supervisor(log)
    sup.start(ranks)
    for _title, r in ranks:
        SglangLog(r["log_tag"]).info("Init parallel begin.")
    started = time.monotonic()
    peer = group.Worker("sglang", host, port, args.node_rank, args.nnodes, args.tp_size, spec, spec_text)
    peer.start(lambda: stopper.event.is_set() or time.monotonic() - started > timeout)
    error = peer.wait_group(sup, len(ranks), stopper, started, timeout)
    if error == "stop":
        _worker_node_exit(log, sup, peer, None, 0)
    if error:
        SglangLog(ranks[0][1]["log_tag"]).error("Scheduler hit an exception: %s" % (
            error if error.split(":", 1)[0].endswith(("Error", "Exception")) else "RuntimeError: %s" % error))
        runtime.print_error(traceback_text("RuntimeError: Initialization failed. Please see the error messages above."))
        _worker_node_exit(log, sup, peer, None, 1)
    for _title, r in ranks:
        SglangLog(r["log_tag"]).info("Init parallel ends. elapsed=%.2f s" % (time.monotonic() - started))

    def on_term(*_args):
        log.warning("SIGTERM received on node_rank %d; waiting for the rank-0 ShutdownReq broadcast to stop the "
                    "schedulers." % args.node_rank)

    signal.signal(signal.SIGTERM, on_term)
    health = ThreadingHTTPServer((args.host, args.port), _DummyHealth)
    health.daemon_threads = True
    threading.Thread(target=health.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    while not stopper.wait(0.2):
        dead = sup.crashed()
        if dead:
            log.error("Child process unexpectedly failed: %s" % dead)
            _worker_node_exit(log, sup, peer, health, 1)
        if peer.done.is_set():
            if peer.shutdown:
                _worker_node_exit(log, sup, peer, health, 0)
            SglangLog(ranks[0][1]["log_tag"]).error("Scheduler hit an exception: %s (%s)" % (
                group.NCCL_REMOTE, peer.failure()))
            _worker_node_exit(log, sup, peer, health, 1)
    _worker_node_exit(log, sup, peer, health, 0)


def _worker_node_exit(log, sup, peer, health, code):
    if health is not None:
        log.info("Dummy health check server stopped at %s:%d" % health.server_address[:2])
        health.shutdown()
        health.server_close()
    peer.close()
    sup.stop()
    runtime.exit_now(code)


def _wait(sup, count, stopper, head=None, timeout=3600.0, log=None):
    """None once `count` children reported ready and (a group's head) every node joined; else the error."""
    start = said = time.monotonic()
    deadline = start + (timeout if head is not None else 3600)
    while time.monotonic() < deadline:
        if stopper.wait(0):
            return "stop"
        if head is not None and head.failure():
            if head.error:
                return ("RuntimeError: Configuration mismatch detected in the serving group: %s. All nodes must be "
                        "started with the same command-line arguments." % head.error)
            return "%s (%s)" % (group.NCCL_REMOTE, head.lost)
        if len(sup.ready) < count:
            error = sup.wait_ready(count, 0.2)
            if error != "timeout":
                if error is not None:
                    return error
                continue
        elif head is None or head.complete.wait(0.2):
            return None
        if head is not None and time.monotonic() - said >= 10:  # the mock's wording
            said = time.monotonic()
            log.info("Waiting for the group on port %d: %d of %d node(s) not joined, %d loading" % (
                head.sock.getsockname()[1], head.waiting_for(), head.nnodes - 1, head.loading()))
    if head is not None:
        return ("torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients "
                "joined." % (timeout, head.nnodes - head.waiting_for(), head.nnodes))
    return "timeout"


def _shutdown(log, state, server, sup, head=None):
    log.info("Gracefully exiting... Remaining number of requests 0.")
    state.shutting_down = True
    if head is not None:
        head.shutdown()  # the ShutdownReq broadcast: the other nodes' schedulers stop too
    server.shutdown()
    server.server_close()
    sup.stop()
    runtime.exit_now(0)
