# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operating characteristic of the verdict: P(keep) against the true speed-up, new rule and old rule.

Simulates the noise model of issue 14 (docs/verdict.md): per-request lognormal jitter with a coefficient
of variation of 5 % (end-to-end time and TPOT share it, TTFT has its own), and the candidate's whole
measurement shifted by a host factor h in {0.98, 1.00, 1.02} against the baseline's. Concurrency 1,
256 output tokens, default thresholds.

- new rule: the sequential verdict with the default plan (baseline 72 requests, candidate rounds of 24 up
  to 72, _verdict.decide after each round, as the role calls it);
- old rule: 8 requests each, point estimates against the thresholds (keep when output tok/s >= x1.05 and
  the TPOT / TTFT medians within their limits), i.e. the verdict as it was before samples.

Writes bench/verdict_oc.png and prints a table (and JSON with --json).

Then (issue 32, item 2) today's design and the paired one side by side, in one run, on one noise model with
per-prompt variance: 8 prompts sent round-robin, each with its own time factor shared by both sides (lognormal,
coefficient of variation --prompt-cv, drawn afresh for every simulated run: its length, its content), times the
5 % per-request jitter and the host shift. Designs:

- today: no prompt indexes (unpaired estimators), no probe, baseline 72, candidate rounds 24 / 48 / 72;
- paired: prompt indexes on both sides (concurrency 1 judged by prompt), the probe of 4, then 24 / 48 / 72;
- paired, half: the same with half the requests: baseline 36, probe 4, rounds 12 / 24 / 36.

P(keep) at the worst host shift for the claim (x1.02: candidate 2 % faster; x1.10: 2 % slower) and at no
shift, the mean candidate requests and the mean candidate seconds (256 tokens at 11.5 ms: 3 s a request).

  .venv/bin/python bench/verdict_oc.py --designs-only [--sims 1000] [--prompt-cv 0.1]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COLLECTIONS = os.path.join(REPO, ".build", "collections")

SIGMA = math.sqrt(math.log(1 + 0.05 ** 2))
TOKENS = 256
SHIFTS = (0.98, 1.0, 1.02)
TABLE_AT = (0.90, 0.95, 1.00, 1.02, 1.04, 1.05, 1.06, 1.08, 1.10, 1.15, 1.20)


def level(rng, n, speedup=1.0, h=1.0, samples=True):
    """One concurrency-1 level of n requests; TPOT follows the speed-up (same decode), TTFT unchanged."""
    e2e, tpots, ttfts = [], [], []
    for _draw in range(n):
        jitter = math.exp(rng.gauss(0, SIGMA))
        e2e.append(3000.0 / speedup / h * jitter)
        tpots.append(11.5 / speedup / h * jitter)
        ttfts.append(50.0 / h * math.exp(rng.gauss(0, SIGMA)))
    out = {"concurrency": 1, "ok": n, "errors": 0, "output_tok_s": TOKENS * n / (sum(e2e) / 1000.0),
           "duration_s": sum(e2e) / 1000.0, "tpot_ms": {"median": sorted(tpots)[n // 2]},
           "ttft_ms": {"median": sorted(ttfts)[n // 2]}}
    if samples:
        out["samples"] = {"e2e_ms": e2e, "output_tokens": [TOKENS] * n, "tpot_ms": tpots, "ttft_ms": ttfts}
    return out


def new_rule(verdict, rng, speedup, h):
    plan = verdict.plan()
    base = {"max_tokens": TOKENS, "levels": [level(rng, plan["baseline_requests"])]}
    rounds, before = [], 0
    for total in plan["rounds"]:
        rounds.append({"max_tokens": TOKENS, "levels": [level(rng, total - before, speedup, h)]})
        before = total
    # One call over all planned rounds answers with the round where the verdict stopped, exactly as
    # calling after each round would (tests/unit/plugins/module_utils/test__verdict.py checks it).
    out = verdict.decide(base, rounds, final=False)
    return out["verdict"], out["round"], out["requests"][1]


def old_rule(verdict, rng, speedup, h):
    from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats  # sys.path set by main

    base = {"levels": [level(rng, 8, samples=False)]}
    cand = {"levels": [level(rng, 8, speedup, h, samples=False)]}
    out = verdict.decide(_verdict_stats.summarize(base), _verdict_stats.summarize(cand))
    return out["decision"], 1, 8


DESIGNS = (
    ("today", False, {"probe_requests": 0}),
    ("paired", True, {}),
    ("paired, half", True, {"baseline_requests": 36, "first_round": 12, "round_requests": 12, "max_requests": 36}),
)
DESIGN_AT = (0.5, 1.00, 1.02, 1.05, 1.10)
PROMPTS = 8


def prompt_level(rng, n, factors, speedup=1.0, h=1.0, prompts=True):
    """A concurrency-1 level of n requests sent round-robin over the prompts (factors: each prompt's own time)."""
    ids = [j % len(factors) for j in range(n)]
    e2e, tpots, ttfts = [], [], []
    for p in ids:
        jitter = math.exp(rng.gauss(0, SIGMA))
        e2e.append(3000.0 * factors[p][0] / speedup / h * jitter)
        tpots.append(11.5 * factors[p][0] / speedup / h * jitter)
        ttfts.append(50.0 * factors[p][1] / h * math.exp(rng.gauss(0, SIGMA)))
    out = {"concurrency": 1, "ok": n, "errors": 0, "output_tok_s": TOKENS * n / (sum(e2e) / 1000.0),
           "duration_s": sum(e2e) / 1000.0, "tpot_ms": {"median": sorted(tpots)[n // 2]},
           "ttft_ms": {"median": sorted(ttfts)[n // 2]},
           "samples": {"e2e_ms": e2e, "output_tokens": [TOKENS] * n, "tpot_ms": tpots, "ttft_ms": ttfts}}
    if prompts:
        out["samples"]["prompt"] = ids
    return out


def design_run(verdict, stats, rng, speedup, h, paired, overrides, prompt_cv):
    """One switch under a design: (decision, candidate requests, candidate seconds)."""
    spread = math.sqrt(math.log(1 + prompt_cv ** 2))
    factors = [(math.exp(rng.gauss(0, spread)), math.exp(rng.gauss(0, spread))) for _p in range(PROMPTS)]
    plan = verdict.plan(overrides)
    base = {"max_tokens": TOKENS, "levels": [prompt_level(rng, plan["baseline_requests"], factors, prompts=paired)]}
    rounds, before = [], 0
    if plan["probe_requests"]:
        probe = {"max_tokens": TOKENS, "levels": [prompt_level(rng, plan["probe_requests"], factors, speedup, h, paired)]}
        rounds.append(dict(stats.summarize(probe), probe=True))
    for total in plan["rounds"]:
        rounds.append({"max_tokens": TOKENS, "levels": [prompt_level(rng, total - before, factors, speedup, h, paired)]})
        before = total
    out = verdict.decide(base, rounds, plan_overrides=overrides, final=False)
    return out["decision"], out["requests"][1], out["elapsed_s"]


def designs(verdict, stats, sims, seed, prompt_cv):
    """P(keep) per design, truth and shift; mean candidate requests and seconds."""
    rows = []
    for i, speedup in enumerate(DESIGN_AT):
        for j, (name, paired, overrides) in enumerate(DESIGNS):
            row = {"speedup": speedup, "design": name}
            for k, h in enumerate(SHIFTS):
                rng = random.Random(seed * 1000003 + i * 101 + k)  # the same draws for every design
                keep = requests = seconds = 0
                for _draw in range(sims):
                    decision, used, spent = design_run(verdict, stats, rng, speedup, h, paired, overrides, prompt_cv)
                    keep += decision == "keep"
                    requests += used
                    seconds += spent or 0.0
                row["keep_%s" % h] = keep / float(sims)
                row["requests_%s" % h] = requests / float(sims)
                row["seconds_%s" % h] = seconds / float(sims)
            row["baseline_requests"] = verdict.plan(overrides)["baseline_requests"]
            rows.append(row)
    return rows


def designs_table(rows):
    lines = ["| true speed-up | design | P(keep) h=0.98 / 1.00 / 1.02 | mean candidate requests | mean candidate s | baseline |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| x%.2f | %s | %s | %s | %s | %d |" % (
            row["speedup"], row["design"], " / ".join("%.3f" % row["keep_%s" % h] for h in SHIFTS),
            " / ".join("%.1f" % row["requests_%s" % h] for h in SHIFTS),
            " / ".join("%.0f" % row["seconds_%s" % h] for h in SHIFTS), row["baseline_requests"]))
    return "\n".join(lines)


def curve(verdict, rule, speedups, sims, seed):
    rows = []
    for i, speedup in enumerate(speedups):
        row = {"speedup": round(speedup, 3)}
        for j, h in enumerate(SHIFTS):
            rng = random.Random(seed * 1000003 + i * 101 + j)
            keep = first = requests = 0
            for _draw in range(sims):
                decision, rnd, used = rule(verdict, rng, speedup, h)
                keep += decision == "keep"
                first += decision == "rollback" and rnd == 1
                requests += used
            row["keep_%s" % h] = keep / float(sims)
            row["rollback_round1_%s" % h] = first / float(sims)
            row["requests_%s" % h] = requests / float(sims)
        rows.append(row)
    return rows


def plot(new, old, path, verdict):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limits, plan = verdict.DEFAULT_THRESHOLDS, verdict.DEFAULT_PLAN
    fig, ax = plt.subplots(figsize=(8.5, 5.0))
    xs = [r["speedup"] for r in new]
    for rows, colour, name in ((new, "#2b7bba", "new: sequential, 72 + up to 72 requests"),
                               (old, "#c0392b", "old: point estimate, 8 + 8 requests")):
        ax.fill_between(xs, [min(r["keep_%s" % h] for h in SHIFTS) for r in rows],
                        [max(r["keep_%s" % h] for h in SHIFTS) for r in rows], color=colour, alpha=0.18, linewidth=0)
        ax.plot(xs, [r["keep_1.0"] for r in rows], color=colour, linewidth=2, label=name + " (band: host shift -2..+2 %)")
    low, high = limits["min_speedup"] - plan["speedup_tolerance"], limits["min_speedup"] + 0.05
    ax.axvline(low, color="grey", linestyle=":", linewidth=1)
    ax.axvline(high, color="grey", linestyle=":", linewidth=1)
    ax.axhline(0.05, color="grey", linestyle="--", linewidth=0.8)
    ax.axhline(0.90, color="grey", linestyle="--", linewidth=0.8)
    ax.text(low, 1.02, " x%.2f: keep <= 5 %%" % low, fontsize=8, va="bottom")
    ax.text(high, 1.02, " x%.2f: keep >= 90 %%" % high, fontsize=8, va="bottom")
    ax.set_xlabel("true speed-up of output tok/s (concurrency 1)")
    ax.set_ylabel("P(keep)")
    ax.set_ylim(-0.02, 1.08)
    ax.set_title("Verdict operating characteristic, per-request CV 5 %%, min_speedup x%.2f" % limits["min_speedup"], fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(new, old):
    lines = ["| true speed-up | new P(keep) h=0.98 / 1.00 / 1.02 | new P(rollback after round 1) | new mean requests | "
             "old P(keep) h=0.98 / 1.00 / 1.02 |", "|---|---|---|---|---|"]
    for n_row, o_row in zip(new, old):
        if not any(abs(n_row["speedup"] - x) < 1e-9 for x in TABLE_AT):
            continue
        lines.append("| x%.2f | %s | %s | %s | %s |" % (
            n_row["speedup"], " / ".join("%.3f" % n_row["keep_%s" % h] for h in SHIFTS),
            " / ".join("%.3f" % n_row["rollback_round1_%s" % h] for h in SHIFTS),
            " / ".join("%.0f" % n_row["requests_%s" % h] for h in SHIFTS),
            " / ".join("%.3f" % o_row["keep_%s" % h] for h in SHIFTS)))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=400, help="simulations per point and shift (default 400)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", default=os.path.join(HERE, "verdict_oc.png"))
    parser.add_argument("--json", help="also write the curves as JSON here")
    parser.add_argument("--designs-only", action="store_true", help="only today's design against the paired one")
    parser.add_argument("--prompt-cv", type=float, default=0.10,
                        help="coefficient of variation of the prompts' own times in the designs' table (default 0.10)")
    args = parser.parse_args(argv)
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as verdict
    from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats

    started = time.time()
    rows = designs(verdict, _verdict_stats, args.sims, args.seed, args.prompt_cv)
    print(designs_table(rows))
    print("\n%d simulations per row and shift, prompts' own times spread %g %% (CV), 5 %% jitter; %.0f s" % (
        args.sims, 100 * args.prompt_cv, time.time() - started))
    if args.designs_only:
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"sims": args.sims, "prompt_cv": args.prompt_cv, "designs": rows}, handle, indent=1)
        return 0

    speedups = [0.90 + 0.01 * i for i in range(31)]
    started = time.time()
    new = curve(verdict, new_rule, speedups, args.sims, args.seed)
    old = curve(verdict, old_rule, speedups, max(args.sims, 2000), args.seed + 1)
    plot(new, old, args.out, verdict)
    print(table(new, old))
    print("\n%d simulations per point and shift (old rule: %d); %.0f s; chart: %s" % (
        args.sims, max(args.sims, 2000), time.time() - started, os.path.relpath(args.out, REPO)))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sims": args.sims, "new": new, "old": old, "plan": verdict.plan(),
                       "thresholds": verdict.thresholds()}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
