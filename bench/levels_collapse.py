# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Levels that matter (issue 32, item 4), without booting a host: the benchmark's own levels from production's batch.

Starts a mock vLLM baseline (local processes, tests/mockgpu/engines, every engine noisy as in molecule/verdict),
serves "production" at --streams streams for --traffic seconds, and runs spec_bench's benchmark with no levels
named: it reads vllm:num_requests_running for --observe seconds first (_levels.from_running) and measures at the
levels that gives. Then an MTP k=1 candidate, clearly faster single-stream and collapsing past a batch of
--collapse (the mock's collapse_above fault), is measured at the same levels. Prints the level choice and the
speed-up per level (the verdict itself is molecule/verdict plays/collapse.yml's).

  .venv/bin/python bench/levels_collapse.py [--streams 16] [--collapse 8] [--observe 8] [--traffic 6] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, ".build", "collections"))
sys.path.insert(0, os.path.join(REPO, "tests", "unit", "mockgpu", "engines"))

# pylint: disable=wrong-import-position
from conftest import Engine, MockGpuHost  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _suites  # noqa: E402

NOISE = {"jitter": 0.05, "straggler_p": 0.01, "straggler_factor": 1.5}


def bench(url, prompts, concurrency, **kw):
    cfg = dict(url=url, api="completions", model="m", prompts=prompts, max_tokens=32, concurrency=concurrency,
               requests=24, min_waves=3, warmup=1, metrics="auto")
    cfg.update(kw)
    return _bench.run_benchmark(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--collapse", type=int, default=8)
    ap.add_argument("--observe", type=float, default=8.0)
    ap.add_argument("--traffic", type=float, default=6.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    host = MockGpuHost(tempfile.mkdtemp(prefix="levels-"), load_seconds=0.3)
    host.set_faults({"*": {"profile": NOISE},
                     "mtp": {"profile": dict(NOISE, spec_batch_alpha=0.05), "collapse_above": args.collapse}})
    prompts = _suites.suite_prompts("reasoning")
    base = Engine.vllm(host, "--served-model-name", "m", env=host.env(CUDA_VISIBLE_DEVICES="0"))
    try:
        base.wait_ready()
        url = "http://127.0.0.1:%d" % base.port
        traffic = threading.Thread(target=bench, args=(url, prompts, [args.streams]),
                                   kwargs=dict(requests=100000, min_waves=0, warmup=0, metrics="none",
                                               run_timeout=args.traffic, lossless_prompts=0))
        traffic.start()
        time.sleep(0.5)
        before = bench(url, prompts, [], observe_seconds=args.observe, observe_interval=0.5)
        traffic.join()
    finally:
        base.kill_group()
    choice = before["level_choice"]
    cand = Engine.vllm(host, "--served-model-name", "m", "--speculative-config",
                       json.dumps({"method": "mtp", "num_speculative_tokens": 1}), env=host.env(CUDA_VISIBLE_DEVICES="1"))
    try:
        cand.wait_ready()
        after = bench("http://127.0.0.1:%d" % cand.port, prompts, choice["levels"])
    finally:
        cand.kill_group()
    rows = []
    for lb, lc in zip(before["levels"], after["levels"]):
        acc = lc.get("acceptance") or {}
        rows.append({"concurrency": lb["concurrency"], "baseline_tok_s": round(lb["output_tok_s"], 1),
                     "candidate_tok_s": round(lc["output_tok_s"], 1), "speedup": round(lc["output_tok_s"] / lb["output_tok_s"], 3),
                     "acceptance_rate": acc.get("acceptance_rate")})
    print("levels: %s (%s)" % (choice["levels"], choice["why"]))
    for row in rows:
        print("c=%(concurrency)d: baseline %(baseline_tok_s)s tok/s, candidate %(candidate_tok_s)s tok/s, x%(speedup).2f, "
              "acceptance %(acceptance_rate)s" % row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"level_choice": choice, "levels": rows}, f, indent=2)


if __name__ == "__main__":
    main()
