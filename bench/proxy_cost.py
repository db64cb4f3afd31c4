# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a one-port proxy in front of the engine costs a client (issue 18): systemd-socket-proxyd.

The proxy is the one the switch would put on production's port: systemd-socket-proxyd behind a
listening socket (systemd-socket-activate stands in for the .socket unit, which passes the same fd).
spec_bench, run as Ansible runs it, measures a real mock vLLM engine directly and through the proxy,
at concurrency 1 and 32, the two alternating (direct, proxy, direct, ...) so that the machine's noise
falls on both alike; what is compared is the ratio within each pair.

    .venv/bin/python bench/proxy_cost.py                  # 5 pairs per concurrency
    .venv/bin/python bench/proxy_cost.py --pairs 3 --tokens 128
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, ".build", "collections")
sys.path.insert(0, os.path.join(REPO, "tests", "unit", "mockgpu", "engines"))

from conftest import Engine, MockGpuHost, free_port  # noqa: E402  (the engine tests' own host and engine)

PROXYD = next((p for p in ("/lib/systemd/systemd-socket-proxyd", "/usr/lib/systemd/systemd-socket-proxyd")
               if os.path.exists(p)), None)
MODEL = "org/model-7b"


def spec_bench(url, conc, requests, tokens, tmp):
    """One spec_bench run as Ansible runs it (a process with an args file); its level's figures."""
    out = os.path.join(tmp, "out.json")
    args = {"url": url, "model": MODEL, "prompts": ["Tell me a long story about a lighthouse keeper."],
            "max_tokens": tokens, "concurrency": [conc], "requests": requests, "warmup": 1, "metrics": "none",
            "ignore_eos": True, "output": out}
    path = os.path.join(tmp, "args.json")
    with open(path, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    subprocess.run([sys.executable, os.path.join(REPO, "plugins", "modules", "spec_bench.py"), path], check=True,
                   env=dict(os.environ, PYTHONPATH=COLLECTIONS), stdout=subprocess.DEVNULL, timeout=600)
    with open(out) as f:
        lv = json.load(f)["levels"][0]
    return {"ttft_ms": lv["ttft_ms"]["mean"], "itl_ms": lv["itl_ms"]["mean"], "tpot_ms": lv["tpot_ms"]["mean"],
            "tok_s": lv["output_tok_s"], "ok": lv["ok"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "proxy_cost.json"))
    args = ap.parse_args()
    if PROXYD is None or shutil.which("systemd-socket-activate") is None:
        raise SystemExit("needs systemd-socket-proxyd and systemd-socket-activate (package systemd)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        host = MockGpuHost(tmp, load_seconds=0.5)
        eng = Engine.vllm(host, "--gpu-memory-utilization", "0.5",
                          env=host.env(CUDA_VISIBLE_DEVICES="0", MOCK_ENGINE_MAX_LIFETIME="3600"))
        eng.wait_ready(60)
        front = free_port()
        proxy = subprocess.Popen(["systemd-socket-activate", "-l", "127.0.0.1:%d" % front, PROXYD,
                                  "127.0.0.1:%d" % eng.port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            for conc in (1, 32):
                requests = 16 if conc == 1 else 128
                for i in range(args.pairs):
                    pair = {"concurrency": conc, "pair": i}
                    for how, port in (("direct", eng.port), ("proxy", front)):
                        pair[how] = spec_bench("http://127.0.0.1:%d" % port, conc, requests, args.tokens, tmp)
                    rows.append(pair)
                    print(json.dumps(pair), flush=True)
        finally:
            proxy.terminate()
            proxy.wait(10)
            eng.kill_group()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print("\n| concurrency | TTFT direct ms | TTFT proxy ms | ITL direct ms | ITL proxy ms | "
          "added per token ms (median of pairs) | tok/s proxy / direct (median) |")
    print("|---|---|---|---|---|---|---|")
    for conc in (1, 32):
        mine = [r for r in rows if r["concurrency"] == conc]

        def med(how, key, mine=mine):
            return statistics.median(r[how][key] for r in mine)

        added = statistics.median(r["proxy"]["itl_ms"] - r["direct"]["itl_ms"] for r in mine)
        ratio = statistics.median(r["proxy"]["tok_s"] / r["direct"]["tok_s"] for r in mine)
        print("| %d | %.2f | %.2f | %.3f | %.3f | %+.3f | %.3f |" % (
            conc, med("direct", "ttft_ms"), med("proxy", "ttft_ms"), med("direct", "itl_ms"), med("proxy", "itl_ms"),
            added, ratio))


if __name__ == "__main__":
    main()
