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
    "accept_cap", "repetition_floor",
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
    be accepted), `verify_tokens` positions scored by the target, `topk` tree width."""

    def __init__(self, method_key, depth, verify_tokens=None, topk=1):
        self.method_key = method_key
        self.depth = int(depth)
        self.verify_tokens = int(verify_tokens if verify_tokens is not None else depth)
        self.topk = max(1, int(topk))


class Decoder:
    """Per-request step generator; deterministic given the prompt."""

    def __init__(self, params, spec, prompt_text, rng, index=None):
        self.p = params
        self.spec = spec
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
        if self.spec.topk > 1:
            # A tree of topk candidates per level raises the chance one of them matches.
            base = 1.0 - (1.0 - base) ** (self.spec.topk ** 0.5)
        return [max(0.0, min(p["accept_cap"], base * p["accept_decay"] ** i)) for i in range(self.spec.depth)]

    def prefill_seconds(self, prompt_tokens):
        ms = self.p["prefill_ms_base"] + self.p["prefill_ms_per_token"] * prompt_tokens
        return ms * self.scale * drift_factor(self.p) / 1000.0

    def step_ms(self, running):
        """Expected milliseconds of one decode step with `running` requests in decode (no noise)."""
        p = self.p
        n = max(1, running)
        ms = p["step_ms"] * (1.0 + p["batch_alpha"] * (n - 1))
        if self.spec:
            # Drafting and verifying k extra positions for every running request: cheap while the
            # step is memory-bound, growing with the batch as it becomes compute-bound.
            overhead = (p["draft_ms"] + p["draft_ms_per_token"] * self.spec.depth
                        + p["verify_ms_per_token"] * self.spec.verify_tokens)
            ms += overhead * (1.0 + p["spec_batch_alpha"] * (n - 1))
        return ms

    def step(self, running):
        """One decode step: (seconds, accepted draft tokens). Emits 1 + accepted tokens."""
        p = self.p
        ms = self.step_ms(running)
        accepted = 0
        if self.spec:
            for prob in self.accept:  # stop at the first rejected position
                if self.rng.random() >= prob:
                    break
                accepted += 1
        if p["noise"]:
            ms *= max(0.05, 1.0 + p["noise"] * (2.0 * self.rng.random() - 1.0))
        ms *= self.scale * drift_factor(p)
        return ms / 1000.0, accepted

    def expected_tokens_per_step(self):
        total, run = 1.0, 1.0
        for prob in self.accept:
            run *= prob
            total += run
        return total


def expected_speedup(base_params, spec_params, spec, prompt_text, running):
    """Decode tok/s per stream with speculation over without, at `running` requests in decode (no noise):
    E[tokens per step] * base step / speculative step. Above 1 speculation wins at that batch size."""
    base = Decoder(base_params, None, prompt_text, random.Random(0), index=0)
    cand = Decoder(spec_params, spec, prompt_text, random.Random(0), index=0)
    return cand.expected_tokens_per_step() * base.step_ms(running) / cand.step_ms(running)
