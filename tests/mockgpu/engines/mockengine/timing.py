"""The timing model: prefill, decode steps, speculative drafts and their acceptance.

Everything comes from the profile (profile.json merged with the env/etc override and a
fault's per-method `profile`), so a test or a scenario can make a method better,
worse or noisy without touching code.
"""
from .textmodel import repetitiveness

# Keys that are per-step scalars; a method section or an engine section may override any.
SCALARS = (
    "step_ms", "batch_alpha", "spec_batch_alpha", "noise", "prefill_ms_base",
    "prefill_ms_per_token", "verify_ms_per_token", "draft_ms", "draft_ms_per_token",
    "accept_fresh", "accept_repetitive", "accept_decay", "repetition_curve",
    "accept_cap", "repetition_floor",
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
}


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

    def __init__(self, params, spec, prompt_text, rng):
        self.p = params
        self.spec = spec
        self.rng = rng
        self.r = repetitiveness(prompt_text)
        self.accept = self._acceptance() if spec else []

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
        return (self.p["prefill_ms_base"] + self.p["prefill_ms_per_token"] * prompt_tokens) / 1000.0

    def step(self, running):
        """One decode step: (seconds, accepted draft tokens). Emits 1 + accepted tokens."""
        p = self.p
        n = max(1, running)
        ms = p["step_ms"] * (1.0 + p["batch_alpha"] * (n - 1))
        accepted = 0
        if self.spec:
            overhead = (p["draft_ms"] + p["draft_ms_per_token"] * self.spec.depth
                        + p["verify_ms_per_token"] * self.spec.verify_tokens)
            ms += overhead * (1.0 + p["spec_batch_alpha"] * (n - 1))
            for prob in self.accept:  # stop at the first rejected position
                if self.rng.random() >= prob:
                    break
                accepted += 1
        if p["noise"]:
            ms *= max(0.05, 1.0 + p["noise"] * (2.0 * self.rng.random() - 1.0))
        return ms / 1000.0, accepted

    def expected_tokens_per_step(self):
        total, run = 1.0, 1.0
        for prob in self.accept:
            run *= prob
            total += run
        return total
