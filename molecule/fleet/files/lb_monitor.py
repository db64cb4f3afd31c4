# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch a mock fleet as its load balancer would, independently of Ansible: one thread per host enters
the host's network namespace (setns, per thread) and polls the engine's GET /health on 127.0.0.1
every --interval seconds. Writes, when --stop-file appears (or after --max-seconds), a JSON summary:
per host the intervals it was out of service, and the most hosts out of service at the same time.

    python3 lb_monitor.py --host NAME=NETNS:PORT ... --out FILE --stop-file FILE [--interval 0.2]
"""
from __future__ import annotations

import argparse
import ctypes
import http.client
import json
import os
import threading
import time

CLONE_NEWNET = 0x40000000


def enter_netns(name):
    fd = os.open('/run/netns/%s' % name, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), 'setns %s' % name)
    finally:
        os.close(fd)


def healthy(port, timeout):
    try:
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
        conn.request('GET', '/health')
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


def watch(name, netns, port, args, samples, stop):
    enter_netns(netns)  # this thread only: network namespaces are per thread
    while not stop.is_set():
        samples.append((time.time(), healthy(port, args.timeout)))
        stop.wait(args.interval)


def intervals(samples):
    """[start, end] spans of consecutive unhealthy samples."""
    spans, start = [], None
    for t, ok in samples:
        if not ok and start is None:
            start = t
        elif ok and start is not None:
            spans.append([start, t])
            start = None
    if start is not None:
        spans.append([start, samples[-1][0]])
    return spans


def max_concurrent(spans_by_host):
    # An end sorts before a start at the same instant: back up before the next one goes down.
    events = sorted([(span[0], 1) for spans in spans_by_host.values() for span in spans]
                    + [(span[1], -1) for spans in spans_by_host.values() for span in spans])
    cur = best = 0
    for event in events:
        cur += event[1]
        best = max(best, cur)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--host', action='append', required=True, help='NAME=NETNS:PORT')
    ap.add_argument('--out', required=True)
    ap.add_argument('--stop-file', required=True)
    ap.add_argument('--interval', type=float, default=0.2)
    ap.add_argument('--timeout', type=float, default=1.0)
    ap.add_argument('--max-seconds', type=float, default=900)
    args = ap.parse_args()
    stop = threading.Event()
    samples, threads = {}, []
    for spec in args.host:
        name, rest = spec.split('=', 1)
        netns, port = rest.rsplit(':', 1)
        samples[name] = []
        th = threading.Thread(target=watch, args=(name, netns, int(port), args, samples[name], stop), daemon=True)
        th.start()
        threads.append(th)
    deadline = time.time() + args.max_seconds
    while time.time() < deadline and not os.path.exists(args.stop_file):
        time.sleep(0.2)
    stop.set()
    for th in threads:
        th.join(5)
    spans = {h: intervals(s) for h, s in samples.items()}
    summary = {
        'hosts': {h: {'samples': len(samples[h]), 'healthy_at_end': bool(samples[h] and samples[h][-1][1]),
                      'down': [[round(a, 2), round(b, 2)] for a, b in spans[h]]} for h in samples},
        'max_down_at_once': max_concurrent(spans),
    }
    with open(args.out, 'w', encoding='utf-8') as fh:
        json.dump(summary, fh, indent=1)


if __name__ == '__main__':
    main()
