# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the wall time of playbooks/switch_spec.yml grows with the number of hosts (issue 8).

Boots the mock fleet (inventory/mock/fleet up N), deploys the baseline service on every host (not
timed), then for each fleet size runs the switch on the first N hosts, with the capacity guard, and
times every task with bench/callbacks/task_timer.py. Engine load (the role's readiness wait) and
benchmark time (spec_bench) are taken out: what is left is the orchestration this issue is about.
Stored baselines are removed before each run, so every run does the same work (measure the baseline,
reclaim, install, start, wait, bench the candidate, decide, roll back or keep, record, report).

Also reports where the CPU went: the controller's ansible processes, the mock hosts (their cgroups),
and everything else on the machine (other jobs), since all of it shares the same cores.

    .venv/bin/python bench/fleet_scaling.py                # 1, 4, 16 hosts, then halts the fleet
    .venv/bin/python bench/fleet_scaling.py --sizes 1,4 --keep
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / 'inventory' / 'mock' / 'fleet'
INVENTORY = ['-i', str(REPO / '.build' / 'inventory' / 'mock'), '-i', str(REPO / 'inventory' / 'mock' / 'fleet.yml')]
CGROUP = Path('/sys/fs/cgroup/unified/llmops-specdec')


def host_names(n):
    return ['fleet-%02d' % i for i in range(1, n + 1)]


def ansible_env(timer_out=None):
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
    env['PATH'] = '%s:%s' % (REPO / '.venv' / 'bin', env.get('PATH', ''))
    if timer_out:
        env.update(ANSIBLE_CALLBACK_PLUGINS=str(REPO / 'bench' / 'callbacks'), ANSIBLE_CALLBACKS_ENABLED='task_timer', TASK_TIMER_OUT=str(timer_out))
    return env


def run(argv, env=None, log=None, check=True):
    with open(log or os.devnull, 'w', encoding='utf-8') as out:
        proc = subprocess.run(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if check and proc.returncode != 0:
        sys.exit('failed (rc %d): %s%s' % (proc.returncode, ' '.join(argv), ('; log: %s' % log) if log else ''))
    return proc.returncode


def playbook(args, hosts, env=None, log=None, check=True):
    return run(
        [str(REPO / '.venv' / 'bin' / 'ansible-playbook')] + INVENTORY + ['--limit', ','.join(hosts)] + args, env=env or ansible_env(), log=log, check=check
    )


def guest_cpu_s(hosts):
    """CPU seconds the mock hosts' cgroups used so far (cgroup2 cpu.stat usage_usec)."""
    total = 0
    for h in hosts:
        try:
            for line in (CGROUP / h / 'cpu.stat').read_text(encoding='utf-8').splitlines():
                if line.startswith('usage_usec '):
                    total += int(line.split()[1])
        except OSError:
            return None
    return total / 1e6


def machine_cpu_s():
    """CPU seconds the whole machine spent busy so far (/proc/stat, all cores)."""
    fields = [int(x) for x in Path('/proc/stat').read_text(encoding='utf-8').splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


def task_times(timer_file):
    """Per task (in order): name, action, seconds from its start to its last host's result."""
    events = [json.loads(line) for line in Path(timer_file).read_text(encoding='utf-8').splitlines()]
    tasks, order = {}, []
    for e in events:
        if e['event'] == 'task_start':
            # A task include can start the same task object again (new batch): key by start.
            key = (e['uuid'], e['t'])
            tasks[key] = {'name': e['name'], 'action': e['action'], 'start': e['t'], 'end': e['t'], 'hosts': 0}
            order.append(key)
        elif e['event'] == 'result':
            key = next((k for k in reversed(order) if k[0] == e['uuid']), None)
            if key:
                tasks[key]['end'] = max(tasks[key]['end'], e['t'])
                tasks[key]['hosts'] += 1
    out = []
    for i, key in enumerate(order):
        t = tasks[key]
        # Under the linear strategy the next task starts when every host finished this one.
        end = tasks[order[i + 1]]['start'] if i + 1 < len(order) else t['end']
        out.append({'name': t['name'], 'action': t['action'], 'seconds': max(end - t['start'], 0.0), 'hosts': t['hosts']})
    return out


def engine_or_bench(task):
    """Time the issue excludes: the engines loading (the role's readiness wait) and the benchmarks."""
    if task['action'].endswith('spec_bench'):
        return 'bench'
    if task['action'].endswith('engine_ready') and not task['name'].startswith('Capacity guard'):
        return 'load'
    return None


def measure(n, forks, method, logdir):
    hosts = host_names(n)
    # Same work every run: no stored baseline, so each switch measures its baseline first.
    run(
        [str(REPO / '.venv' / 'bin' / 'ansible')]
        + INVENTORY
        + ['--limit', ','.join(hosts), 'inference', '-m', 'ansible.builtin.file', '-a', 'path=/var/lib/llmops-specdec/baselines state=absent'],
        env=ansible_env(),
        log=logdir / ('clean-%d.log' % n),
    )
    timer = logdir / ('timer-%d.jsonl' % n)
    timer.unlink(missing_ok=True)
    guest0, machine0 = guest_cpu_s(hosts), machine_cpu_s()
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    rc = playbook(
        ['playbooks/switch_spec.yml', '--forks', str(forks), '-e', 'method=' + method, '-e', 'specdec_report_dir=%s' % (logdir / ('report-%d' % n))],
        hosts,
        env=ansible_env(timer),
        log=logdir / ('switch-%d.log' % n),
        check=False,
    )
    wall = time.perf_counter() - t0
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    guest1, machine1 = guest_cpu_s(hosts), machine_cpu_s()
    tasks = task_times(timer)
    excluded = {'load': 0.0, 'bench': 0.0}
    for t in tasks:
        kind = engine_or_bench(t)
        if kind:
            excluded[kind] += t['seconds']
    orchestration = wall - excluded['load'] - excluded['bench']
    controller_cpu = (child1.ru_utime - child0.ru_utime) + (child1.ru_stime - child0.ru_stime)
    guests_cpu = (guest1 - guest0) if guest0 is not None and guest1 is not None else None
    slowest = sorted((t for t in tasks if not engine_or_bench(t)), key=lambda t: -t['seconds'])[:8]
    return {
        'hosts': n,
        'forks': forks,
        'rc': rc,
        'wall_s': round(wall, 2),
        'engine_load_s': round(excluded['load'], 2),
        'bench_s': round(excluded['bench'], 2),
        'orchestration_s': round(orchestration, 2),
        'orchestration_per_host_s': round(orchestration / n, 2),
        'tasks_run': len(tasks),
        'cpu': {
            'controller_ansible_s': round(controller_cpu, 1),
            'mock_hosts_s': round(guests_cpu, 1) if guests_cpu is not None else None,
            'machine_busy_s': round(machine1 - machine0, 1),
            'capacity_s': round(wall * os.cpu_count(), 1),
            'loadavg_1m_before': round(load0, 2),
        },
        'slowest_orchestration_tasks': [{'name': t['name'], 's': round(t['seconds'], 2)} for t in slowest],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--sizes', default='1,4,16', help='fleet sizes to time, comma separated (max 16)')
    ap.add_argument('--forks', type=int, default=0, help='ansible forks (default: the largest size)')
    ap.add_argument('--method', default='ngram')
    ap.add_argument('--keep', action='store_true', help='leave the fleet up afterwards')
    ap.add_argument('--out', default=str(REPO / 'bench' / 'results' / 'fleet_scaling.json'))
    args = ap.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(',')})
    top = sizes[-1]
    forks = args.forks or top
    logdir = Path(tempfile.mkdtemp(prefix='fleet-scaling-'))
    print('logs: %s' % logdir, file=sys.stderr)
    t0 = time.perf_counter()
    run([str(FLEET), 'up', str(top)], log=logdir / 'up.log')
    boot = time.perf_counter() - t0
    t0 = time.perf_counter()
    playbook(['playbooks/deploy.yml', '--forks', str(forks)], host_names(top), log=logdir / 'deploy.log')
    deploy = time.perf_counter() - t0
    print('fleet of %d up in %.1f s, deployed in %.1f s (not timed below)' % (top, boot, deploy), file=sys.stderr)
    results = []
    try:
        for n in sizes:
            r = measure(n, forks, args.method, logdir)
            results.append(r)
            print(json.dumps(r), file=sys.stderr)
    finally:
        if not args.keep:
            run([str(FLEET), 'down'], log=logdir / 'down.log', check=False)
    base = results[0]['orchestration_s']
    print('\n%5s %5s %8s %8s %8s %8s %9s %7s %9s %9s' % ('hosts', 'forks', 'wall_s', 'load_s', 'bench_s', 'orch_s', 'orch/host', 'x(1)', 'ctl_cpu', 'host_cpu'))
    for r in results:
        r['orchestration_vs_smallest'] = round(r['orchestration_s'] / base, 2) if base else None
        print(
            '%5d %5d %8.1f %8.1f %8.1f %8.1f %9.2f %7.2f %9.1f %9s'
            % (
                r['hosts'],
                r['forks'],
                r['wall_s'],
                r['engine_load_s'],
                r['bench_s'],
                r['orchestration_s'],
                r['orchestration_per_host_s'],
                r['orchestration_vs_smallest'] or 0,
                r['cpu']['controller_ansible_s'],
                r['cpu']['mock_hosts_s'],
            )
        )
    print('rc: %s  (goal: %d hosts within 3x the orchestration time of %d, issue 16)' % ([r['rc'] for r in results], sizes[-1], sizes[0]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({'cpus': os.cpu_count(), 'method': args.method, 'boot_s': round(boot, 1), 'deploy_s': round(deploy, 1), 'runs': results}, indent=1) + '\n',
        encoding='utf-8',
    )
    print('written: %s' % args.out)
    return 0 if all(r['rc'] == 0 for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
