# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How exact and how cheap is spec_bench? Side by side with vllm bench serve and sglang.bench_serving.

Every client runs as its own process against bench/timed_server.py (known TTFT / TPOT / length),
one after the other, and is judged on:
- TTFT, TPOT and output tok/s against the configured truth (and the server's own record of what
  it did, GET /truth, to tell server lateness from client error);
- client CPU per 1000 output tokens between the first request's arrival and the last token's
  write at the server (the client's CPU sampled from /proc every 10 ms), so start-up and exit
  are not smeared over the tokens; start-up = spawn to the first request at the server (both
  clocks CLOCK_MONOTONIC) and the CPU spent by then.

Clients: `ours` (the spec_bench module itself, run as Ansible runs it: a process with an args
file; streaming over http.client on kept-alive connections), `ours-fresh` (the same module with a
connection per request, as it was before issue 14), `ours-ansible_urls` and `ours-open_url` (the same measurement core
over ansible.module_utils.urls: a Request with one shared SSL context, and open_url() per request;
they justify the transport choice), `vllm` (`vllm bench serve`, .build/venv-vllm) and `sglang`
(`python -m sglang.bench_serving`, .build/venv-sglang; --backend vllm and sglang-oai).

    .venv/bin/python bench/bench_fidelity.py                    # all scenarios, all clients found
    .venv/bin/python bench/bench_fidelity.py --scenarios c32 --clients ours,vllm
    .venv/bin/python bench/bench_fidelity.py --scenarios c1,c32 --clients ours,ours-fresh --arrivals kernel,parsed
--arrivals picks how the server stamps a request's arrival (bench/timed_server.py --arrival).
Results: bench/results/fidelity.json (and a markdown table on stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, '.build', 'collections')
RESULTS = os.path.join(REPO, 'bench', 'results')
VENV_VLLM = os.path.join(REPO, '.build', 'venv-vllm')
VENV_SGLANG = os.path.join(REPO, '.build', 'venv-sglang')
MODEL = 'timed-model'

# name: server options, concurrency, requests (R; a second run uses 2R), max_tokens, ignore_eos
SCENARIOS = {
    'c1': dict(ttft=50, tpot=12, chunk=1, conc=1, requests=4, tokens=256, ignore_eos=True),
    'c32': dict(ttft=50, tpot=12, chunk=1, conc=32, requests=64, tokens=256, ignore_eos=True),
    # about 25k tok/s aggregate: 32 streams of 800 tok/s; chunk 4 = speculative-style events
    'hi4': dict(ttft=50, tpot=1.25, chunk=4, conc=32, requests=128, tokens=256, ignore_eos=True),
    'hi1': dict(ttft=50, tpot=1.25, chunk=1, conc=32, requests=128, tokens=256, ignore_eos=True),
    # EOS after 100 of the 256 requested tokens: who counts generated, who counts requested?
    'eos': dict(ttft=50, tpot=12, chunk=1, conc=8, requests=16, tokens=256, ignore_eos=False, eos_after=100),
}


# ------------------------------------------------------------------ server


class TimedServer:
    def __init__(self, sc, arrival='kernel'):
        self.tmp = tempfile.mkdtemp(prefix='timed-')
        pf = os.path.join(self.tmp, 'port')
        args = [
            sys.executable,
            os.path.join(REPO, 'bench', 'timed_server.py'),
            '--port-file',
            pf,
            '--ttft-ms',
            str(sc['ttft']),
            '--tpot-ms',
            str(sc['tpot']),
            '--chunk',
            str(sc['chunk']),
            '--tokens',
            str(sc['tokens']),
            '--eos-after',
            str(sc.get('eos_after', 0)),
            '--model',
            MODEL,
            '--lifetime',
            '1200',
            '--arrival',
            arrival,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        for _attempt in range(200):
            if os.path.exists(pf):
                break
            time.sleep(0.05)
        with open(pf) as f:
            self.port = int(f.read())
        self.url = 'http://127.0.0.1:%d' % self.port

    def truth(self, reset=False):
        with urllib.request.urlopen(self.url + '/truth' + ('?reset=1' if reset else ''), timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


# ------------------------------------------------------------------ clients


def _tokenizer_dir():
    """A local word-level HF tokenizer for the reference tools' random datasets (no hub access)."""
    d = os.path.join(RESULTS, 'tokenizer')
    if os.path.exists(os.path.join(d, 'tokenizer.json')):
        return d
    os.makedirs(d, exist_ok=True)
    code = r'''
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"[UNK]": 0, "[BOS]": 1, "[EOS]": 2}
for i in range(2000):
    vocab["w%d" % i] = len(vocab)
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
d = sys.argv[1]
tok.save(d + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192, "unk_token": "[UNK]",
           "bos_token": "[BOS]", "eos_token": "[EOS]"}, open(d + "/tokenizer_config.json", "w"))
json.dump({"model_type": "llama", "vocab_size": len(vocab)}, open(d + "/config.json", "w"))
'''
    venv = VENV_VLLM if os.path.exists(VENV_VLLM) else VENV_SGLANG
    subprocess.run([os.path.join(venv, 'bin', 'python'), '-c', code, d], check=True)
    return d


def cmd_ours(sc, url, n, tmp):
    args = {
        'url': url,
        'model': MODEL,
        'prompts': ['Tell me a long story about a lighthouse keeper.'],
        'max_tokens': sc['tokens'],
        'concurrency': [sc['conc']],
        'requests': n,
        'warmup': 1,
        'metrics': 'none',
        'ignore_eos': sc['ignore_eos'],
        'output': os.path.join(tmp, 'out.json'),
    }
    path = os.path.join(tmp, 'args.json')
    with open(path, 'w') as f:
        json.dump({'ANSIBLE_MODULE_ARGS': args}, f)
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    return [sys.executable, os.path.join(REPO, 'plugins', 'modules', 'spec_bench.py'), path], env


def cmd_ours_fresh(sc, url, n, tmp):
    """The module as `ours` runs it, but with a connection per request (DirectTransport(keep_alive=False))."""
    argv, env = cmd_ours(sc, url, n, tmp)
    return [sys.executable, os.path.abspath(__file__), '--fresh-module', argv[-1]], env


def fresh_module_run(args_path):
    """Run spec_bench.py as a script, its DirectTransport without keep-alive (child process of the bench)."""
    import runpy

    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.llmops.specdec.plugins.module_utils import _http

    class FreshTransport(_http.DirectTransport):
        def __init__(self, *args, **kwargs):
            kwargs['keep_alive'] = False
            super().__init__(*args, **kwargs)

    _http.DirectTransport = FreshTransport
    module = os.path.join(REPO, 'plugins', 'modules', 'spec_bench.py')
    sys.argv = [module, args_path]
    runpy.run_path(module, run_name='__main__')


def read_ours(tmp):
    with open(os.path.join(tmp, 'out.json')) as f:
        lv = json.load(f)['levels'][0]
    return {
        'ttft_ms': lv['ttft_ms']['mean'],
        'tpot_ms': lv['tpot_ms']['mean'],
        'tok_s': lv['output_tok_s'],
        'tokens': lv['output_tokens'],
        'ok': lv['ok'],
        'itl_ms': lv['itl_ms']['mean'],
        'ttft_p99_ms': lv['ttft_ms']['p99'],
        'tpot_p99_ms': lv['tpot_ms']['p99'],
    }


def cmd_variant(transport):
    def cmd(sc, url, n, tmp):
        spec = dict(sc, url=url, n=n, transport=transport, out=os.path.join(tmp, 'out.json'))
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        return [sys.executable, os.path.abspath(__file__), '--variant-run', json.dumps(spec)], env

    return cmd


def cmd_vllm(sc, url, n, tmp):
    if sc['ignore_eos']:
        data = ['--dataset-name', 'random', '--random-input-len', '16', '--random-output-len', str(sc['tokens'])]
    else:
        # vllm bench forces ignore_eos for the random datasets; a custom one leaves EOS to the server
        path = os.path.join(tmp, 'prompts.jsonl')
        with open(path, 'w') as f:
            for i in range(n):
                f.write(json.dumps({'prompt': ' '.join('w%d' % ((i + j) % 2000) for j in range(16))}) + '\n')
        data = ['--dataset-name', 'custom', '--dataset-path', path, '--custom-output-len', str(sc['tokens']), '--skip-chat-template']
    argv = [
        os.path.join(VENV_VLLM, 'bin', 'vllm'),
        'bench',
        'serve',
        '--backend',
        'openai',
        '--base-url',
        url,
        '--endpoint',
        '/v1/completions',
        '--model',
        MODEL,
        '--tokenizer',
        _tokenizer_dir(),
    ]
    argv += data + [
        '--num-prompts',
        str(n),
        '--max-concurrency',
        str(sc['conc']),
        '--request-rate',
        'inf',
        '--temperature',
        '0',
        '--save-result',
        '--result-dir',
        tmp,
        '--result-filename',
        'out.json',
        '--disable-tqdm',
    ]
    if sc['ignore_eos']:
        argv.append('--ignore-eos')
    return argv, dict(os.environ, VLLM_TARGET_DEVICE='cpu', HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1')


def read_vllm(tmp):
    with open(os.path.join(tmp, 'out.json')) as f:
        r = json.load(f)
    return {
        'ttft_ms': r['mean_ttft_ms'],
        'tpot_ms': r['mean_tpot_ms'],
        'tok_s': r['output_throughput'],
        'tokens': r['total_output_tokens'],
        'ok': r['completed'],
        'itl_ms': r.get('mean_itl_ms'),
        'ttft_p99_ms': r.get('p99_ttft_ms'),
        'tpot_p99_ms': r.get('p99_tpot_ms'),
    }


def cmd_sglang(backend):
    def cmd(sc, url, n, tmp):
        argv = [
            os.path.join(VENV_SGLANG, 'bin', 'python'),
            '-m',
            'sglang.bench_serving',
            '--backend',
            backend,
            '--base-url',
            url,
            '--model',
            MODEL,
            '--tokenizer',
            _tokenizer_dir(),
            '--dataset-name',
            'random-ids',
            '--random-input-len',
            '16',
            '--random-output-len',
            str(sc['tokens']),
            '--random-range-ratio',
            '1.0',
            '--num-prompts',
            str(n),
            '--max-concurrency',
            str(sc['conc']),
            '--request-rate',
            'inf',
            '--output-file',
            os.path.join(tmp, 'out.jsonl'),
            '--disable-tqdm',
        ]
        if not sc['ignore_eos']:
            argv.append('--disable-ignore-eos')
        return argv, dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', PYTHONPATH=_torchvision_stub())

    return cmd


TORCHVISION_STUB = '''"""Stand-in for torchvision, for sglang.bench_serving only (written by bench_fidelity.py).

sglang.benchmark.serving imports sglang.srt's model configs, which import torchvision for an image
helper, and transformers then imports a few names from it. The benchmark client never calls any of
them; the engine venv's torch is the CPU build, and the PyPI torchvision (a CUDA build) fails to
register its ops against it ("operator torchvision::nms does not exist").
"""
import enum as _enum


class InterpolationMode(_enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _unavailable(*args, **kwargs):
        raise RuntimeError("torchvision stub: %s is not available to the benchmark client" % name)
    return _unavailable
'''


def _torchvision_stub():
    root = os.path.join(RESULTS, 'stubs')
    for sub in ('', 'transforms', 'transforms/v2', 'io', 'ops'):
        d = os.path.join(root, 'torchvision', sub)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, '__init__.py'), 'w') as f:
            f.write(TORCHVISION_STUB + ('__version__ = "0.0+stub"\n' if not sub else ''))
    for mod in ('transforms/functional.py', 'transforms/v2/functional.py'):
        with open(os.path.join(root, 'torchvision', mod), 'w') as f:
            f.write(TORCHVISION_STUB)
    return root


def read_sglang(tmp):
    with open(os.path.join(tmp, 'out.jsonl')) as f:
        r = json.loads(f.read().strip().splitlines()[-1])
    return {
        'ttft_ms': r['mean_ttft_ms'],
        'tpot_ms': r['mean_tpot_ms'],
        'tok_s': r['output_throughput'],
        'tokens': r['total_output_tokens'],
        'ok': r['completed'],
        'itl_ms': r.get('mean_itl_ms'),
        'ttft_p99_ms': r.get('p99_ttft_ms'),
        'tpot_p99_ms': r.get('p99_tpot_ms'),
    }


CLIENTS = {
    'ours': (cmd_ours, read_ours, None),
    'ours-fresh': (cmd_ours_fresh, read_ours, None),
    'ours-ansible_urls': (cmd_variant('ansible_urls'), read_ours, None),
    'ours-open_url': (cmd_variant('open_url'), read_ours, None),
    'vllm': (cmd_vllm, read_vllm, VENV_VLLM),
    'sglang-vllm': (cmd_sglang('vllm'), read_sglang, VENV_SGLANG),
    'sglang-oai': (cmd_sglang('sglang-oai'), read_sglang, VENV_SGLANG),
}


class CpuSampler:
    """Samples a process's CPU time (all threads, /proc/PID/stat) every 10 ms while it runs."""

    def __init__(self, pid):
        self.pid = pid
        self.samples = []  # (perf_counter_ns, cpu seconds)
        self.tick = os.sysconf('SC_CLK_TCK')
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        path = '/proc/%d/stat' % self.pid
        while True:
            try:
                with open(path) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                return
            if fields[0] == 'Z':
                return
            self.samples.append((time.perf_counter_ns(), (int(fields[11]) + int(fields[12])) / self.tick))
            time.sleep(0.01)

    def at(self, t_ns):
        """CPU seconds used by time t_ns (the last sample not after it)."""
        best = 0.0
        for t, cpu in self.samples:
            if t > t_ns:
                break
            best = cpu
        return best


def run_client(name, sc, server, n):
    cmd, read = CLIENTS[name][:2]
    tmp = tempfile.mkdtemp(prefix='fid-%s-' % name)
    argv, env = cmd(sc, server.url, n, tmp)
    server.truth(reset=True)
    t0 = time.perf_counter_ns()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp)
    sampler = CpuSampler(proc.pid)
    out = proc.stdout.read()
    sampler.thread.join()
    status, ru = os.wait4(proc.pid, 0)[1:]
    wall = (time.perf_counter_ns() - t0) / 1e9
    truth = server.truth()
    if status != 0:
        raise RuntimeError('%s exited %s:\n%s' % (name, status, out.decode(errors='replace')[-3000:]))
    res = read(tmp)
    first, last = truth['first_arrival_ns'], truth['last_token_ns']
    cpu_first, cpu_last = sampler.at(first), sampler.at(last)
    res.update(
        cpu_total_s=ru.ru_utime + ru.ru_stime,
        wall_s=wall,
        load1=os.getloadavg()[0],
        startup_s=(first - t0) / 1e9,
        startup_cpu_s=cpu_first,
        cpu_ms_per_1k_tok=(cpu_last - cpu_first) * 1e6 / truth['tokens'],
        server=truth,
    )
    return res


def judge(sc, name, r):
    """Errors against the configured truth."""
    n_tok = sc['tokens'] if sc['ignore_eos'] else min(sc['tokens'], sc.get('eos_after') or sc['tokens'])
    e2e = sc['ttft'] + (n_tok - 1) * sc['tpot']
    true_tok_s = sc['conc'] * n_tok / (e2e / 1000.0)
    srv = r['server']
    return {
        'client': name,
        'ttft_ms': r['ttft_ms'],
        'ttft_err_pct': 100 * (r['ttft_ms'] / sc['ttft'] - 1),
        'tpot_ms': r['tpot_ms'],
        'tpot_err_pct': 100 * (r['tpot_ms'] / sc['tpot'] - 1),
        'tok_s': r['tok_s'],
        'tok_s_err_pct': 100 * (r['tok_s'] / true_tok_s - 1),
        'true_tok_s': true_tok_s,
        'itl_ms': r['itl_ms'],
        'ttft_p99_ms': r['ttft_p99_ms'],
        'tpot_p99_ms': r['tpot_p99_ms'],
        'tokens_per_req_reported': r['tokens'] / float(r['ok']),
        'tokens_per_req_served': srv['tokens'] / float(srv['requests']),
        'cpu_ms_per_1k_tok': r['cpu_ms_per_1k_tok'],
        'cpu_total_s': r['cpu_total_s'],
        'startup_s': r['startup_s'],
        'startup_cpu_s': r['startup_cpu_s'],
        'load1_during': r['load1'],
        # against what the server actually did (its own lateness removed): the client's share
        'ttft_err_vs_server_pct': 100 * (r['ttft_ms'] / srv['ttft_ms_mean'] - 1),
        'tpot_err_vs_server_pct': 100 * (r['tpot_ms'] / srv['tpot_ms_mean'] - 1),
        'server_ttft_ms': srv['ttft_ms_mean'],
        'server_tpot_ms': srv['tpot_ms_mean'],
        'server_late_ms_mean': srv['late_ms_mean'],
        'server_late_ms_p99': srv['late_ms_p99'],
        'server_connections': srv.get('connections'),
        'server_requests': srv['requests'],
    }


# ------------------------------------------------------------------ in-process variants


def variant_run(spec):
    """Run the measurement core with another transport (child process of the bench)."""
    sys.path.insert(0, COLLECTIONS)
    from ansible.module_utils.urls import open_url
    from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _bench_stats, _bench_stream, _http

    class OpenUrlTransport:
        """ansible's open_url() per request, as the convention reads (a new SSL context per call)."""

        name = 'open_url'

        def post_stream(self, url, body):
            stamped = _http.StampedBody(body)
            resp = open_url(
                url,
                data=stamped,
                method='POST',
                timeout=60,
                use_proxy=False,
                decompress=False,
                headers={'Content-Type': 'application/json', 'Content-Length': str(len(body))},
            )
            return stamped.sent_ns, resp, resp.close

    if spec['transport'] == 'ansible_urls':
        tr = _http.AnsibleTransport(60)
    else:
        tr = OpenUrlTransport()
    url = _bench_stream.endpoint(spec['url'], 'completions')
    body = _bench_stream.request_body('completions', MODEL, 'Tell me a long story about a lighthouse keeper.', spec['tokens'], ignore_eos=spec['ignore_eos'])
    results, wall = _bench.run_level(tr, url, [body], spec['conc'], spec['n'], warmup=1)
    level = _bench_stats.summarise(results, spec['conc'], wall)
    with open(spec['out'], 'w') as f:
        json.dump({'levels': [level]}, f)


# ------------------------------------------------------------------ main


def table(path):
    """The markdown table of a results file (bench/README.md quotes it).

    Rows of a run with --arrivals name their arrival stamp beside the scenario, and rows that carry the
    server's connection count get a last column with it (connections / requests the server saw).
    """
    rows = json.load(open(path))
    conns = any(r.get('server_connections') is not None for r in rows)
    print(
        '| scenario | client | TTFT ms (err; vs server) | TPOT ms (err; vs server) | tok/s (err) | tok/req reported / served '
        '| CPU ms per 1k tok | start-up s (CPU s) |' + (' server conns / requests |' if conns else '')
    )
    print('|---|---|---|---|---|---|---|---|' + ('---|' if conns else ''))
    for r in rows:
        scenario = r['scenario'] + (' ' + r['arrival'] if r.get('arrival') else '')
        if 'error' in r:
            print('| %s | %s | failed: %s |||||| ' % (scenario, r['client'], r['error'].splitlines()[-1][:80]))
            continue
        line = '| %s | %s | %.2f (%+.1f%%; %+.1f%%) | %.3f (%+.3f%%; %+.3f%%) | %.1f (%+.2f%%) | %.0f / %.0f | %.0f | %.1f (%.1f) |' % (
            scenario,
            r['client'],
            r['ttft_ms'],
            r['ttft_err_pct'],
            r['ttft_err_vs_server_pct'],
            r['tpot_ms'],
            r['tpot_err_pct'],
            r['tpot_err_vs_server_pct'],
            r['tok_s'],
            r['tok_s_err_pct'],
            r['tokens_per_req_reported'],
            r['tokens_per_req_served'],
            r['cpu_ms_per_1k_tok'],
            r['startup_s'],
            r['startup_cpu_s'],
        )
        if conns:
            line += ' %s / %s |' % (r.get('server_connections'), r.get('server_requests'))
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('--scenarios', default='c1,c32,hi4,eos')
    ap.add_argument('--clients', default=','.join(CLIENTS))
    ap.add_argument('--quick', action='store_true', help='halve the request counts')
    ap.add_argument('--out', default=os.path.join(RESULTS, 'fidelity.json'))
    ap.add_argument('--arrivals', default='kernel', help='server arrival stamps to run each scenario under: kernel, parsed or both')
    ap.add_argument('--variant-run', help=argparse.SUPPRESS)
    ap.add_argument('--fresh-module', help=argparse.SUPPRESS)
    ap.add_argument('--table', metavar='RESULTS_JSON', help='print the markdown table of a results file')
    a = ap.parse_args()
    if a.table:
        return table(a.table)
    if a.variant_run:
        return variant_run(json.loads(a.variant_run))
    if a.fresh_module:
        return fresh_module_run(a.fresh_module)
    os.makedirs(RESULTS, exist_ok=True)
    rows = []
    for sname, arrival in [(s, arr) for s in a.scenarios.split(',') for arr in a.arrivals.split(',')]:
        sc = dict(SCENARIOS[sname])
        if a.quick:
            sc['requests'] = max(sc['conc'], sc['requests'] // 2)
        server = TimedServer(sc, arrival)
        try:
            for cname in a.clients.split(','):
                venv = CLIENTS[cname][2]
                if venv and not os.path.exists(venv):
                    print('skip %s: %s missing (scripts/engine-venvs --with-bench)' % (cname, venv), flush=True)
                    continue
                try:
                    r = run_client(cname, sc, server, sc['requests'])
                except Exception as exc:  # one client failing must not hide the others
                    print('FAIL %s/%s: %s' % (sname, cname, exc), flush=True)
                    rows.append({'scenario': sname, 'arrival': arrival, 'client': cname, 'error': str(exc)[-2000:]})
                    continue
                row = dict(judge(sc, cname, r), scenario=sname, arrival=arrival, setup=sc)
                rows.append(row)
                print(
                    '%-4s %-6s %-17s TTFT %7.2f ms (%+6.2f%%, srv %+6.2f%%) TPOT %7.3f ms (%+6.3f%%, srv %+6.3f%%) '
                    'tok/s %8.1f (%+6.2f%%) tok/req %5.1f/%5.1f  CPU %6.1f ms/1k tok  start %5.2f s (%.2f s CPU)  conns %s'
                    % (
                        sname,
                        arrival,
                        cname,
                        row['ttft_ms'],
                        row['ttft_err_pct'],
                        row['ttft_err_vs_server_pct'],
                        row['tpot_ms'],
                        row['tpot_err_pct'],
                        row['tpot_err_vs_server_pct'],
                        row['tok_s'],
                        row['tok_s_err_pct'],
                        row['tokens_per_req_reported'],
                        row['tokens_per_req_served'],
                        row['cpu_ms_per_1k_tok'] or -1,
                        row['startup_s'] or -1,
                        row['startup_cpu_s'],
                        row['server_connections'],
                    ),
                    flush=True,
                )
        finally:
            server.close()
    with open(a.out, 'w') as f:
        json.dump(rows, f, indent=1)
    print('wrote', a.out)


if __name__ == '__main__':
    main()
