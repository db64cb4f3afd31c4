# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The timing model: prefill, decode steps, speculative drafts and their acceptance, and noise.

Everything comes from the profile (profile.json merged with the env/etc override and a
fault's per-method `profile`), so a test or a scenario can make a method better,
worse or noisy without touching code.

Noise (README.md, "Noise"): per-request jitter (`jitter`, a coefficient of variation of a
log-normal factor with mean 1 on every step of one request), occasional stragglers
(`straggler_p`, `straggler_factor`), a slow drift of the whole host with wall-clock time
(`drift_per_min` from `drift_epoch`), and the older per-step `noise`. The per-request draws
come from `noise_seed`, the method and the request's number in this engine process, so a run
is repeatable for a seed; all are off in the shipped profile.
"""
import itertools
import math
import random
import threading
import time

from .textmodel import repetitiveness

# Keys that are per-step scalars; a method section or an engine section may override any.
SCALARS = (
    "step_ms", "batch_alpha", "spec_batch_alpha", "noise", "prefill_ms_base",
    "prefill_ms_per_token", "verify_ms_per_token", "draft_ms", "draft_ms_per_token",
    "accept_fresh", "accept_repetitive", "accept_decay", "repetition_curve",
    "accept_cap", "repetition_floor", "compute_ms_per_token",
    "jitter", "straggler_p", "straggler_factor", "drift_per_min", "drift_epoch", "noise_seed",
)

DEFAULTS = {
    "step_ms": 1000.0 / 82.0,
    "batch_alpha": 0.05,
    "spec_batch_alpha": 0.15,
    "noise": 0.0,
    "prefill_ms_base": 15.0,
    "prefill_ms_per_token": 0.04,
    "verify_ms_per_token": 2.4,
    "draft_ms": 1.0,
    "draft_ms_per_token": 0.0,
    "accept_fresh": 0.1,
    "accept_repetitive": 0.5,
    "accept_decay": 1.0,
    "repetition_curve": 0.5,
    "repetition_floor": 0.1,
    "accept_cap": 0.98,
    # the compute-bound floor of a speculative step (0: off, every step memory-bound; README "Batch")
    "compute_ms_per_token": 0.0,
    # noise, all off by default (the calibrated figures are noise-free)
    "jitter": 0.0,
    "straggler_p": 0.0,
    "straggler_factor": 3.0,
    "drift_per_min": 0.0,
    "drift_epoch": 0.0,
    "noise_seed": 0.0,
}

# When this engine process started: the drift's origin when the profile gives no drift_epoch.
STARTED = time.time()
_REQUESTS = itertools.count()
_REQUESTS_LOCK = threading.Lock()


def next_request_index():
    """The number of the next request this engine process decodes (0, 1, ...)."""
    with _REQUESTS_LOCK:
        return next(_REQUESTS)


def request_scale(params, method_key, index):
    """Per-request factor on every step: log-normal jitter (mean 1, CV `jitter`) times a straggler's
    `straggler_factor` with probability `straggler_p`; deterministic in (noise_seed, method, index)."""
    cv, p_slow = params.get("jitter", 0.0), params.get("straggler_p", 0.0)
    if not cv and not p_slow:
        return 1.0
    rng = random.Random("%s/%s/%d" % (params.get("noise_seed", 0.0), method_key or "none", index))
    scale = 1.0
    if cv:
        sigma = math.sqrt(math.log1p(cv * cv))
        scale = math.exp(rng.gauss(-sigma * sigma / 2.0, sigma))
    if p_slow and rng.random() < p_slow:
        scale *= params.get("straggler_factor", 3.0)
    return scale


def drift_factor(params, now=None):
    """The host's slow drift: step times grow by `drift_per_min` (a share, negative = faster) per minute
    of wall-clock time since `drift_epoch` (Unix seconds; 0 = this process's start), never below 0.1."""
    rate = params.get("drift_per_min", 0.0)
    if not rate:
        return 1.0
    epoch = params.get("drift_epoch", 0.0) or STARTED
    minutes = ((time.time() if now is None else now) - epoch) / 60.0
    return max(0.1, 1.0 + rate * minutes)


def resolve(profile, engine, method_key, override=None):
    """Flatten the profile for one engine and one method (None = no speculation)."""
    out = dict(DEFAULTS)

    def take(section):
        for key in SCALARS:
            if isinstance(section, dict) and key in section:
                out[key] = float(section[key])

    eng = (profile.get("engines") or {}).get(engine) or {}
    take(profile)
    take(eng)
    if method_key:
        take((profile.get("methods") or {}).get(method_key))
        take((eng.get("methods") or {}).get(method_key))
    take(override or {})
    return out


class SpecShape:
    """What one speculative step does: `depth` chained draft positions (the most that can
    be accepted), `verify_tokens` positions scored by the target, `topk` tree width.

    `schedule` (None: the same K every step) is the engine's batch-size schedule as the engine runs
    it: a list of (start, end, k) bands with the engine's own `k_for_batch(batch)` (vLLM's dense
    lookup, vllm_spec.Schedule; SGLang's adaptive tiers, sglang_cli.AdaptiveTiers) and, optionally,
    `observe(batch, k, accepted)` (what the engine learns from a verify) and `zero_k_verifies`
    (True where a K=0 step still counts as a verify in the engine's metrics, as SGLang's does).
    `depth` is then the largest K any band can run (vLLM: num_speculative_tokens)."""

    def __init__(self, method_key, depth, verify_tokens=None, topk=1, schedule=None):
        self.method_key = method_key
        self.depth = int(depth)
        self.verify_tokens = int(verify_tokens if verify_tokens is not None else depth)
        self.topk = max(1, int(topk))
        self.schedule = schedule

    def k_for_batch(self, running):
        """K drafted at an engine step with `running` requests in the batch: the one place the timing
        model asks. The schedule's band (engine rules), capped at `depth`; `depth` without a schedule."""
        if not self.schedule:
            return self.depth
        return max(0, min(self.depth, int(self.schedule.k_for_batch(max(1, int(running))))))

    def verify_at(self, k):
        """Positions the target scores at a step drafting `k` (0: none, a plain decode step)."""
        if k <= 0:
            return 0
        return max(0, self.verify_tokens - self.depth + k)

    def observe(self, running, k, accepted):
        """Tell the schedule what one request's step drafted and accepted (SGLang's adaptive EMA)."""
        hook = getattr(self.schedule, "observe", None)
        if hook is not None:
            hook(max(1, int(running)), k, accepted)

    def counts_step(self, k):
        """Whether the engine's spec-decode metrics count a step that drafted `k`: vLLM counts a draft
        only where tokens were proposed; SGLang's K=0 step is a trivial verify (accept length 1)."""
        return k > 0 or bool(getattr(self.schedule, "zero_k_verifies", False))


class StepDraft:
    """`Decoder.spec`, what the server reads after each step (server.py `_Generation.run`): the shape's
    attributes, with `depth` = the K this request's latest step drafted, and false when the engine
    does not count that step as a draft (vLLM's K=0 band), so the per-position counters move exactly
    with the K used."""

    def __init__(self, shape):
        self.shape = shape
        self.depth = shape.depth
        self.counted = True

    def __getattr__(self, name):
        return getattr(self.shape, name)

    def __bool__(self):
        return self.counted

    def took(self, k):
        self.depth = k
        self.counted = self.shape.counts_step(k)


class Decoder:
    """Per-request step generator; deterministic given the prompt."""

    def __init__(self, params, spec, prompt_text, rng, index=None, collapse_above=None):
        self.p = params
        self.shape = spec
        # Fault ``collapse_above`` N: with more than N requests in decode every draft is rejected, while drafting and
        # verifying still cost what they cost (a speculation that collapses past a batch size, vLLM issue 49548).
        self.collapse_above = None if collapse_above is None else int(collapse_above)
        self.spec = StepDraft(spec) if spec else None
        self.rng = rng
        self.r = repetitiveness(prompt_text)
        self.accept = self._acceptance() if spec else []
        # Noise of this request (1.0 unless the profile turns it on); `index` pins the request's number.
        if index is None and (params.get("jitter") or params.get("straggler_p")):
            index = next_request_index()
        self.scale = request_scale(params, spec.method_key if spec else None, index or 0)

    def _acceptance(self):
        p = self.p
        # a few repeated phrases in ordinary prose give n-gram lookup nothing to copy: below the
        # floor the prompt counts as fresh text
        floor = min(p["repetition_floor"], 0.99)
        r = max(0.0, (self.r - floor) / (1.0 - floor))
        base = p["accept_fresh"] + (p["accept_repetitive"] - p["accept_fresh"]) * (r ** p["repetition_curve"])
        if self.shape.topk > 1:
            # A tree of topk candidates per level raises the chance one of them matches.
            base = 1.0 - (1.0 - base) ** (self.shape.topk ** 0.5)
        return [max(0.0, min(p["accept_cap"], base * p["accept_decay"] ** i)) for i in range(self.shape.depth)]

    def prefill_seconds(self, prompt_tokens):
        ms = self.p["prefill_ms_base"] + self.p["prefill_ms_per_token"] * prompt_tokens
        return ms * self.scale * drift_factor(self.p) / 1000.0

    def k_for_batch(self, running):
        """K of a step with `running` requests in the batch (0 without speculation)."""
        return self.shape.k_for_batch(running) if self.shape else 0

    def step_ms(self, running, k=None):
        """Expected milliseconds of one decode step with `running` requests in decode (no noise), drafting
        `k` (default: what the schedule gives at this batch); k=0 is a plain decode step."""
        p = self.p
        n = max(1, running)
        k = self.k_for_batch(n) if k is None else k
        ms = p["step_ms"] * (1.0 + p["batch_alpha"] * (n - 1))
        if self.shape and k > 0:
            verify = self.shape.verify_at(k)
            # Scoring 1 + verify positions for every running request: hidden under the memory-bound
            # step until the batch's positions make it compute-bound (the roofline), ...
            ms = max(ms, p["compute_ms_per_token"] * n * (1 + verify))
            # ... plus drafting and verification bookkeeping, growing with the batch.
            overhead = p["draft_ms"] + p["draft_ms_per_token"] * k + p["verify_ms_per_token"] * verify
            ms += overhead * (1.0 + p["spec_batch_alpha"] * (n - 1))
        return ms

    def step(self, running):
        """One decode step: (seconds, accepted draft tokens). Emits 1 + accepted tokens. Drafts the K
        the schedule gives at `running` (self.spec.depth afterwards), none at K=0."""
        p = self.p
        k = self.k_for_batch(running)
        ms = self.step_ms(running, k)
        accepted = 0
        collapsed = self.collapse_above is not None and running > self.collapse_above
        if self.shape:
            for prob in ([] if collapsed else self.accept[:k]):  # stop at the first rejected position
                if self.rng.random() >= prob:
                    break
                accepted += 1
            self.spec.took(k)
            self.shape.observe(running, k, accepted)
        if p["noise"]:
            ms *= max(0.05, 1.0 + p["noise"] * (2.0 * self.rng.random() - 1.0))
        ms *= self.scale * drift_factor(p)
        return ms / 1000.0, accepted

    def expected_tokens_per_step(self, k=None):
        """E[1 + accepted] of a step drafting `k` (default: the full depth)."""
        total, run = 1.0, 1.0
        for prob in self.accept[:len(self.accept) if k is None else k]:
            run *= prob
            total += run
        return total


def expected_speedup(base_params, spec_params, spec, prompt_text, running):
    """Decode tok/s per stream with speculation over without, at `running` requests in decode (no noise):
    E[tokens per step] * base step / speculative step, at the K the schedule gives at that batch
    (x1 exactly in a K=0 band). Above 1 speculation wins at that batch size."""
    base = Decoder(base_params, None, prompt_text, random.Random(0), index=0)
    cand = Decoder(spec_params, spec, prompt_text, random.Random(0), index=0)
    k = cand.k_for_batch(running)
    return cand.expected_tokens_per_step(k) * base.step_ms(running) / cand.step_ms(running, k)
