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

  .venv/bin/python bench/verdict_oc.py [--sims 400] [--out bench/verdict_oc.png] [--json bench/results/verdict_oc.json]
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
    args = parser.parse_args(argv)
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as verdict

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
