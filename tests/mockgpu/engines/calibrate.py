"""Measure single-stream decode speed of the mock engines with the shipped profile.

    python3 tests/mockgpu/engines/calibrate.py [--max-tokens 200]
    python3 tests/mockgpu/engines/calibrate.py --analytic [--levels 1,8,32] [--profile PARTIAL.json]

Starts each engine configuration as a real process on a throw-away mock GPU host (temp dir),
streams prompts one at a time and prints decode tok/s = (tokens - 1) / (last chunk - first chunk)
and the mean tokens per SSE chunk, for a fresh reasoning prompt and a repetitive one.

--analytic starts nothing: it prints the timing model's expected speed-up of each speculative
configuration over the baseline per concurrency level (decode only, no noise), from the shipped
profile with PARTIAL merged over it (a faults.json `profile` can be tried this way).
"""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from mockengine import settings, timing

HERE = os.path.dirname(os.path.abspath(__file__))

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


def analytic(levels, override_path):
    profile = settings.load_profile()
    if override_path:
        with open(override_path, encoding="utf-8") as f:
            profile = settings.deep_merge(profile, json.load(f))
    head = "".join("%16s" % ("c=%d rsn / rep" % n) for n in levels)
    print("%-32s%s" % ("configuration (speed-up)", head))
    for label, engine, _args in CONFIGS:
        if label not in SHAPES:
            continue
        method, depth, verify = SHAPES[label]
        base = timing.resolve(profile, engine, None)
        cand = timing.resolve(profile, engine, method)
        spec = timing.SpecShape(method, depth, verify)
        cells = []
        for n in levels:
            pair = [sum(timing.expected_speedup(base, cand, spec, p, n) for p in PROMPTS[kind]) / len(PROMPTS[kind])
                    for kind in ("reasoning", "repetitive")]
            cells.append("%16s" % ("x%.2f / x%.2f" % tuple(pair)))
        print("%-32s%s" % (label, "".join(cells)))


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--analytic", action="store_true", help="print the model's expected speed-ups, start nothing")
    ap.add_argument("--levels", default="1,8,32", help="concurrency levels for --analytic")
    ap.add_argument("--profile", help="partial profile merged over the shipped one, for --analytic")
    opts = ap.parse_args()
    if opts.analytic:
        analytic([int(n) for n in opts.levels.split(",")], opts.profile)
        return
    print("%-32s %22s %22s" % ("configuration", "reasoning tok/s (tpc)", "repetitive tok/s (tpc)"))
    with tempfile.TemporaryDirectory() as root:
        env = mock_host(root)
        for label, engine, args in CONFIGS:
            port = free_port()
            proc = start(engine, args, env, port)
            try:
                cells = []
                for kind in ("reasoning", "repetitive"):
                    runs = [stream(port, p, opts.max_tokens) for p in PROMPTS[kind]]
                    rate = sum(run[0] for run in runs) / len(runs)
                    tpc = sum(run[1] for run in runs) / len(runs)
                    cells.append("%8.1f  (%4.2f)" % (rate, tpc))
                print("%-32s %22s %22s" % (label, cells[0], cells[1]), flush=True)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)


if __name__ == "__main__":
    main()
