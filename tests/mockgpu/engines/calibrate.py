# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measure the decode speed of the mock engines with the shipped profile.

    python3 tests/mockgpu/engines/calibrate.py [--max-tokens 200] [--concurrency 1] [--only TEXT]
    python3 tests/mockgpu/engines/calibrate.py --analytic [--levels 1,8,32] [--profile PARTIAL.json]
                                               [--suite reasoning]

Starts each engine configuration as a real process on a throw-away mock GPU host (temp dir),
streams prompts (--concurrency copies of each at once) and prints decode tok/s per stream =
(tokens - 1) / (last chunk - first chunk) and the mean tokens per SSE chunk, for a fresh reasoning
prompt and a repetitive one. --only keeps the configurations whose label contains TEXT.

--analytic starts nothing: it prints the timing model's expected speed-up of each speculative
configuration (EAGLE-3 at every k and with batch-size schedules included) over the baseline per
concurrency level (decode only, no noise), from the shipped profile with PARTIAL merged over it (a
faults.json `profile` can be tried this way). --suite takes the prompts of one of the collection's
suites (plugins/module_utils/_suites.py in this checkout) instead of the two built-in pairs.
"""
import argparse
import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from mockengine import settings, sglang_cli, timing, vllm_spec

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OPEN = 1048576  # how the collection renders an open last band (17+)

PROMPTS = {
    "reasoning": [
        "A train leaves at noon going sixty miles per hour and another leaves two hours later at ninety; "
        "explain step by step when the second train catches up and why.",
        "Prove that the square root of two is irrational, then explain which step of the proof would fail "
        "for the square root of four.",
    ],
    "repetitive": [
        "Summarize these log lines:\n" + "\n".join(
            "2024-05-0%d INFO worker %d started task on node alpha with status ok and exit code zero"
            % (i % 9 + 1, i % 3) for i in range(30)),
        "Rename the variable total to subtotal in this code:\n" + "\n".join(
            "total = total + price[%d] * quantity[%d]  # add line item to the running total" % (i, i)
            for i in range(25)),
    ],
}

CONFIGS = [
    ("vllm baseline", "vllm", []),
    ("vllm ngram k=5", "vllm", ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5}']),
    ("vllm eagle3 k=3", "vllm", ["--speculative-config",
                                 '{"method": "eagle3", "model": "org/eagle3", "num_speculative_tokens": 3}']),
    ("vllm mtp k=1", "vllm", ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']),
    ("sglang baseline", "sglang", []),
    ("sglang NGRAM (12 draft tokens)", "sglang", ["--speculative-algorithm", "NGRAM"]),
    ("sglang EAGLE3 3/1/4", "sglang", ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                                       "org/eagle3"]),
]


# The draft shape each speculative configuration above runs with (timing.SpecShape: method, depth, verified).
SHAPES = {
    "vllm ngram k=5": ("ngram", 5, 5),
    "vllm eagle3 k=3": ("eagle3", 3, 3),
    "vllm mtp k=1": ("mtp", 1, 1),
    "sglang NGRAM (12 draft tokens)": ("ngram", 11, 11),
    "sglang EAGLE3 3/1/4": ("eagle3", 3, 3),
}

# Batch-size schedules (issue 15), as each engine reads them: vLLM's num_speculative_tokens_per_batch_size
# and SGLang's adaptive tiers (one candidate per tier, as the collection renders `schedule`).
SCHEDULES = {
    "vllm eagle3 1-8:3,9-16:1,17+:0": ("vllm", [[1, 8, 3], [9, 16, 1], [17, OPEN, 0]]),
    "vllm eagle3 1-8:2,9-16:1,17+:0": ("vllm", [[1, 8, 2], [9, 16, 1], [17, OPEN, 0]]),
    "sglang EAGLE3 adaptive 1:3,9:1,17:0": ("sglang", {"1": [3], "9": [1], "17": [0]}),
}


def schedule_shape(engine, bands):
    """The SpecShape an EAGLE-3 server with this schedule runs (the engines' own parsers)."""
    if engine == "vllm":
        cfg = vllm_spec.validate({"method": "eagle3", "model": "org/eagle3", "num_speculative_tokens": max(
            b[2] for b in bands), "num_speculative_tokens_per_batch_size": bands}, "org/model", 1, lambda _m: None)
        return timing.SpecShape("eagle3", cfg["num_speculative_tokens"],
                                schedule=vllm_spec.schedule(cfg, 1, True, lambda _m: None))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(dict((lo, {"candidate_steps": steps}) for lo, steps in bands.items()), f)
    try:
        steps = max(s for steps in bands.values() for s in steps)
        args = sglang_cli.build_parser().parse_args([
            "--model-path", "org/model", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
            "org/eagle3", "--speculative-num-steps", str(steps), "--speculative-adaptive",
            "--speculative-adaptive-config", f.name])
        return sglang_cli.check_speculative(args, lambda _m: None)
    finally:
        os.unlink(f.name)


def analytic_rows():
    """(label, engine, method, SpecShape) of every configuration --analytic prints."""
    rows = []
    for label, engine, _args in CONFIGS:
        if label in SHAPES:
            method, depth, verify = SHAPES[label]
            rows.append((label, engine, method, timing.SpecShape(method, depth, verify)))
    for k in (1, 2, 4, 5):
        rows.append(("vllm eagle3 k=%d" % k, "vllm", "eagle3", timing.SpecShape("eagle3", k)))
    for label, (engine, bands) in SCHEDULES.items():
        rows.append((label, engine, "eagle3", schedule_shape(engine, bands)))
    return rows


def suite_prompts(name):
    """One of the collection's suites, read from this checkout (the engines never import the collection)."""
    path = os.path.join(REPO, "plugins", "module_utils", "_suites.py")
    spec = importlib.util.spec_from_file_location("_suites", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SUITES[name]


def analytic(levels, override_path, suite=None):
    profile = settings.load_profile()
    if override_path:
        with open(override_path, encoding="utf-8") as f:
            profile = settings.deep_merge(profile, json.load(f))
    kinds = [(suite, suite_prompts(suite))] if suite else [(k, PROMPTS[k]) for k in ("reasoning", "repetitive")]
    width = 8 if suite else 16
    head = "".join(("%8s" % ("c=%d" % n)) if suite else ("%16s" % ("c=%d rsn / rep" % n)) for n in levels)
    print("%-38s%s" % ("configuration (speed-up%s)" % (", " + suite if suite else ""), head))
    for label, engine, method, spec in analytic_rows():
        base = timing.resolve(profile, engine, None)
        cand = timing.resolve(profile, engine, method)
        cells = []
        for n in levels:
            pair = [sum(timing.expected_speedup(base, cand, spec, p, n) for p in prompts) / len(prompts)
                    for _kind, prompts in kinds]
            cells.append(("%" + str(width) + "s") % " / ".join("x%.2f" % v for v in pair))
        print("%-38s%s" % (label, "".join(cells)))


def schedule_args(engine, bands):
    """The engine flags of a schedule (SGLang's `{}` is the adaptive config file, written at start)."""
    if engine == "vllm":
        return ["--speculative-config", json.dumps({"method": "eagle3", "model": "org/eagle3", "num_speculative_tokens": max(
            b[2] for b in bands), "num_speculative_tokens_per_batch_size": bands})]
    steps = max(s for st in bands.values() for s in st)
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "org/eagle3",
            "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1), "--speculative-adaptive",
            "--speculative-adaptive-config", "{}"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mock_host(root):
    os.makedirs(os.path.join(root, "dev"))
    for name in ("nvidiactl", "nvidia0"):
        open(os.path.join(root, "dev", name), "w").close()
    with open(os.path.join(root, "gpus.json"), "w") as f:
        json.dump({"gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-calib", "memory_total_mib": 143771,
                             "reserved_mib": 615}]}, f)
    with open(os.path.join(root, "profile.json"), "w") as f:
        json.dump({"load_seconds": 0.3}, f)
    env = dict(os.environ, MOCKGPU_CONFIG=os.path.join(root, "gpus.json"), MOCKGPU_DEV_DIR=os.path.join(root, "dev"),
               MOCKGPU_REGISTRY=os.path.join(root, "holders"), MOCK_ENGINE_PROFILE=os.path.join(root, "profile.json"),
               MOCK_ENGINE_FAULTS=os.path.join(root, "none.json"), MOCK_ENGINE_MAX_LIFETIME="600",
               PYTHONPATH=HERE, CUDA_VISIBLE_DEVICES="0")
    return env


def start(engine, args, env, port):
    if engine == "vllm":
        argv = [os.path.join(HERE, "bin", "vllm"), "serve", "org/model", "--port", str(port),
                "--host", "127.0.0.1"]
    else:
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/model", "--port", str(port)]
    proc = subprocess.Popen(argv + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit("%s exited with %s" % (argv, proc.returncode))
        time.sleep(0.05)
    raise SystemExit("not ready: %s" % argv)


def stream(port, prompt, max_tokens):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/completions", json.dumps({
        "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "temperature": 0,
        "stream_options": {"include_usage": True}}), {"content-type": "application/json"})
    resp = conn.getresponse()
    times, usage = [], None
    while True:
        line = resp.readline()
        if not line:
            break
        if line.startswith(b"data: {"):
            ev = json.loads(line[6:])
            if ev["choices"]:
                times.append(time.monotonic())
            else:
                usage = ev["usage"]
    conn.close()
    tokens = usage["completion_tokens"]
    return (tokens - 1) / (times[-1] - times[0]), tokens / len(times)


def stream_many(port, prompt, max_tokens, concurrency):
    """`concurrency` copies of one prompt at once: [(decode tok/s, tokens per chunk)] per stream."""
    if concurrency == 1:
        return [stream(port, prompt, max_tokens)]
    out = []
    threads = [threading.Thread(target=lambda: out.append(stream(port, prompt, max_tokens)))
               for _i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--analytic", action="store_true", help="print the model's expected speed-ups, start nothing")
    ap.add_argument("--levels", default="1,8,32", help="concurrency levels for --analytic")
    ap.add_argument("--profile", help="partial profile merged over the shipped one, for --analytic")
    ap.add_argument("--suite", help="one of the collection's suites (reasoning, repetitive, ...), for --analytic")
    ap.add_argument("--concurrency", type=int, default=1, help="streams of each prompt at once (measured runs)")
    ap.add_argument("--only", help="measure only the configurations whose label contains this")
    opts = ap.parse_args()
    if opts.analytic:
        analytic([int(n) for n in opts.levels.split(",")], opts.profile, opts.suite)
        return
    configs = CONFIGS + [(label, engine, schedule_args(engine, bands)) for label, (engine, bands) in SCHEDULES.items()]
    print("%-38s %22s %22s" % ("configuration (c=%d)" % opts.concurrency, "reasoning tok/s (tpc)",
                               "repetitive tok/s (tpc)"))
    with tempfile.TemporaryDirectory() as root:
        env = mock_host(root)
        for label, engine, args in configs:
            if opts.only and opts.only not in label:
                continue
            if engine == "sglang" and "{}" in args:
                args = [a.replace("{}", os.path.join(root, "adaptive.json")) for a in args]
                with open(os.path.join(root, "adaptive.json"), "w") as f:
                    json.dump(dict((lo, {"candidate_steps": st}) for lo, st in SCHEDULES[label][1].items()), f)
            port = free_port()
            proc = start(engine, args, env, port)
            try:
                cells = []
                for kind in ("reasoning", "repetitive"):
                    runs = [r for p in PROMPTS[kind] for r in stream_many(port, p, opts.max_tokens, opts.concurrency)]
                    rate = sum(run[0] for run in runs) / len(runs)
                    tpc = sum(run[1] for run in runs) / len(runs)
                    cells.append("%8.1f  (%4.2f)" % (rate, tpc))
                print("%-38s %22s %22s" % (label, cells[0], cells[1]), flush=True)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)


if __name__ == "__main__":
    main()
