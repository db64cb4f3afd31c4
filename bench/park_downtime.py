# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Production's downtime for a lost experiment, with and without parking the baseline (issue 18).

Real mock engines (tests/mockgpu/engines) on a mock GPU host in a temp dir, every load taking
--load seconds (30 by default, as the issue asks), parking at the profile's 50 GiB/s with a 2867 MiB
residual per rank (measured on the H200: bench/README.md). One lost experiment, both ways:
- stop: stop the baseline, start the candidate, benchmark it, stop it, start the baseline again;
- park: park the baseline (engine_park's routes through _park.request), start the candidate beside it
  on another port with the share _park.candidate_share() gives, benchmark it, stop it, wake the baseline.
A prober sends a one-token completion to production's port every 50 ms; downtime runs from the first
that fails to the first that answers again. No systemd: the steps are what the switch drives.

    .venv/bin/python bench/park_downtime.py                    # vllm and sglang, 30 s loads
    .venv/bin/python bench/park_downtime.py --engines vllm --load 5 --out bench/results/park.json
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "unit", "mockgpu", "engines"))
sys.path.insert(0, os.path.join(REPO, ".build", "collections"))

from conftest import TOTAL_MIB, VLLM, Engine, MockGpuHost, free_port  # noqa: E402  (the engine tests' own host and engine)

from ansible_collections.llmops.specdec.plugins.module_utils import _park  # noqa: E402

SHARE = 0.9
MODEL = "org/model-7b"
BENCH_REQUESTS = 8


class Prober(threading.Thread):
    """One-token completions to ``port`` every 50 ms; the first failure and the first answer after it."""

    def __init__(self, port, model):
        super().__init__(daemon=True)
        self.port, self.model = port, model
        self.down_at = self.up_at = None
        self.stop = threading.Event()

    def ok(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("POST", "/v1/completions", json.dumps({"model": self.model, "prompt": "hi", "max_tokens": 1}),
                         {"content-type": "application/json"})
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def run(self):
        while not self.stop.is_set():
            t, good = time.monotonic(), self.ok()
            if not good and self.down_at is None:
                self.down_at = t
            elif good and self.down_at is not None and self.up_at is None:
                self.up_at = t
                return
            time.sleep(0.05)


def _open(url, method="GET", data=None, headers=None, timeout=30, **_kw):
    return urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers or {}),
                                  timeout=timeout)


def start(host, engine, share, port, *flags):
    """An engine on GPU 0 and ``port`` (the restarted baseline must come back on production's port)."""
    env = host.env(CUDA_VISIBLE_DEVICES="0", VLLM_SERVER_DEV_MODE="1", MOCK_ENGINE_MAX_LIFETIME="900")
    if engine == "vllm":
        argv = [VLLM, "serve", MODEL, "--gpu-memory-utilization", str(share)]
    else:
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL, "--mem-fraction-static", str(share)]
    return Engine(host, argv + ["--host", "127.0.0.1", "--port", str(port)] + list(flags), env, port)


def bench(eng):
    for _request in range(BENCH_REQUESTS):
        eng.stream("/v1/completions", {"model": MODEL, "prompt": "Tell me a story.", "max_tokens": 64})


def lost_experiment(host, engine, how, load):
    flag = "--enable-sleep-mode" if engine == "vllm" else "--enable-memory-saver"
    spec = (["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                 "prompt_lookup_max": 4})] if engine == "vllm" else
            ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"])
    port = free_port()
    base = start(host, engine, SHARE, port, flag)
    base.wait_ready(load + 60)
    prober = Prober(port, MODEL)
    steps = {}
    t0 = time.monotonic()
    prober.start()
    proto = _park.PROTOCOLS[engine]
    root = "http://127.0.0.1:%d" % base.port
    if how == "park":
        for step in ("pause", "park"):  # SGLang pauses generation first (_park.PROTOCOLS)
            if proto.get(step):
                status, _body, err = _park.request(_open, root, proto[step], 120)
                assert status == 200, err
        steps["park_s"] = round(time.monotonic() - t0, 2)
        free = TOTAL_MIB - 615 - sum(h["mib"] for h in host.holders() if h["gpu"] == 0)
        share, why = _park.candidate_share(SHARE, [{"total_mib": TOTAL_MIB, "free_mib": free}])
        assert why is None, why
    else:
        base.terminate()
        steps["stop_s"] = round(time.monotonic() - t0, 2)
        share = SHARE
    t1 = time.monotonic()
    cand = start(host, engine, share, free_port(), *spec)
    cand.wait_ready(load + 60)
    steps["candidate_load_s"] = round(time.monotonic() - t1, 2)
    t2 = time.monotonic()
    bench(cand)
    steps["bench_s"] = round(time.monotonic() - t2, 2)
    t3 = time.monotonic()
    cand.terminate()
    if how == "park":
        for step in ("wake", "resume"):  # SGLang continues generation after
            if proto.get(step):
                status, _body, err = _park.request(_open, root, proto[step], 120)
                assert status == 200, err
    else:
        base = start(host, engine, SHARE, port, flag)
        base.wait_ready(load + 60)
    steps["back_s"] = round(time.monotonic() - t3, 2)
    prober.join(load + 60)
    prober.stop.set()
    for eng in (base, cand):
        eng.kill_group()
    down = round(prober.up_at - prober.down_at, 2) if prober.up_at and prober.down_at else None
    return dict(steps, engine=engine, how=how, load_s=load, downtime_s=down, candidate_share=share)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--engines", default="vllm,sglang")
    ap.add_argument("--load", type=float, default=30.0)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "park_downtime.json"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, engine in enumerate(args.engines.split(",")):
            for how in ("stop", "park"):
                root = os.path.join(tmp, "%s-%s-%d" % (engine, how, i))
                os.makedirs(root)
                host = MockGpuHost(root, load_seconds=args.load, profile={"park": dict(_mock_park())})
                rows.append(lost_experiment(host, engine, how, args.load))
                print(json.dumps(rows[-1]), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print("\n| engine | how | downtime s | park/stop s | candidate load s | bench s | back s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = (r["engine"], r["how"], r["downtime_s"], r.get("park_s", r.get("stop_s")), r["candidate_load_s"],
                 r["bench_s"], r["back_s"])
        print("| %s | %s | %s | %s | %s | %s | %s |" % cells)


def _mock_park():
    sys.path.insert(0, os.path.join(REPO, "tests", "mockgpu", "engines"))
    from mockengine import park  # the profile's defaults: 2867 MiB residual, 50 GiB/s
    return park.DEFAULTS


if __name__ == "__main__":
    main()
