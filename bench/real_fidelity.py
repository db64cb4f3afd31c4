# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_bench against the engine's own clock: a real vLLM's server-side histograms for the same requests.

For each concurrency level, reads the engine's /metrics on the host, runs ``llmops.specdec.spec_bench``
there as Ansible runs it (no warm-up, ``ignore_eos``: every request decodes ``--max-tokens`` tokens, so the
server's token-weighted inter-token latency and the per-request TPOT average alike), reads /metrics
again and compares, over exactly the requests measured:

- TTFT: spec_bench's mean against vLLM's ``time_to_first_token_seconds`` (sum / count of the delta);
- TPOT: spec_bench's mean against vLLM's ``request_time_per_output_token_seconds`` and
  ``inter_token_latency_seconds``.

Needs a host serving a real vLLM (``scripts/demo real`` leaves one up; so does the real tier with
SPECDEC_REAL_KEEP=1). Usage:
    .venv/bin/python bench/real_fidelity.py -i .build/demo-real/inventory [--levels 1,4] [--requests 16]
        [--out bench/results/real-fidelity.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTOGRAMS = {"ttft": "vllm:time_to_first_token_seconds", "tpot": "vllm:request_time_per_output_token_seconds",
              "itl": "vllm:inter_token_latency_seconds"}
_READ = ("import json,sys,urllib.request\n"
         "text=urllib.request.urlopen('http://127.0.0.1:%d/metrics',timeout=30).read().decode()\n"
         "out={}\n"
         "for line in text.splitlines():\n"
         "  if line.startswith('#') or ' ' not in line: continue\n"
         "  name,value=line.rsplit(' ',1); base=name.split('{')[0]\n"
         "  if base.endswith(('_sum','_count')): out[base]=out.get(base,0.0)+float(value)\n"
         "print(json.dumps(out))\n")


def _ansible(inventory, host, module, args):
    """Run one module on the host as Ansible runs it; its result from ansible's --tree output."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"))
    with tempfile.TemporaryDirectory() as tree:
        done = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible"), host, "-i", inventory, "-m", module,
                               "-a", json.dumps(args), "--tree", tree], capture_output=True, text=True, env=env,
                              cwd=ROOT, check=False)
        files = os.listdir(tree)
        if len(files) != 1:
            sys.exit("ansible %s: %s%s" % (module, done.stdout[-2000:], done.stderr[-2000:]))
        with open(os.path.join(tree, files[0]), encoding="utf-8") as f:
            result = json.load(f)
    if result.get("failed"):
        sys.exit("%s failed: %s" % (module, result.get("msg")))
    return result


def _metrics(inventory, host, port):
    out = _ansible(inventory, host, "ansible.builtin.command", {"argv": ["python3", "-c", _READ % port]})
    return json.loads(out["stdout"])


def _delta_mean(before, after, name):
    count = after.get(name + "_count", 0) - before.get(name + "_count", 0)
    total = after.get(name + "_sum", 0) - before.get(name + "_sum", 0)
    return (total / count * 1000.0 if count else None), int(count)


def measure(inventory, host, port, level, requests, max_tokens, suite):
    before = _metrics(inventory, host, port)
    bench = _ansible(inventory, host, "llmops.specdec.spec_bench", {
        "url": "http://127.0.0.1:%d" % port, "suite": suite, "concurrency": [level], "requests": requests,
        "warmup": 0, "max_tokens": max_tokens, "ignore_eos": True, "min_waves": 1, "metrics": "none"})["bench"]
    after = _metrics(inventory, host, port)
    lv = bench["levels"][0]
    samples = lv["samples"]
    row = {"concurrency": level, "requests": lv["ok"], "errors": lv["errors"],
           "client_ttft_ms": statistics.fmean(samples["ttft_ms"]),
           "client_tpot_ms": statistics.fmean(samples["tpot_ms"])}
    for key, name in HISTOGRAMS.items():
        row["server_%s_ms" % key], row["server_%s_count" % key] = _delta_mean(before, after, name)
    row["ttft_diff_ms"] = row["client_ttft_ms"] - row["server_ttft_ms"]
    row["tpot_diff_ms"] = row["client_tpot_ms"] - row["server_tpot_ms"]
    return row


def table(rows):
    out = ["| c | requests (server counted) | TTFT client / server ms | diff | TPOT client / server ms "
           "| ITL server ms | diff |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %d | %d (%d) | %.2f / %.2f | %+.2f | %.3f / %.3f | %.3f | %+.3f |" % (
            r["concurrency"], r["requests"], r["server_ttft_count"], r["client_ttft_ms"], r["server_ttft_ms"],
            r["ttft_diff_ms"], r["client_tpot_ms"], r["server_tpot_ms"], r["server_itl_ms"], r["tpot_diff_ms"]))
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-i", "--inventory", default=os.path.join(ROOT, ".build", "demo-real", "inventory"))
    parser.add_argument("--host", default="all")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--suite", default="chat")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = [measure(args.inventory, args.host, args.port, int(level), args.requests, args.max_tokens, args.suite)
            for level in args.levels.split(",")]
    print(table(rows))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "args": vars(args)}, f, indent=2)


if __name__ == "__main__":
    main()
