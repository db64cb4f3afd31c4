# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback for bench/switch_overhead.py: one JSON line per task start and per task result (name,
action, host, times, status) appended to $TASK_TIMER_OUT, with the target's CPU time so far when
$TASK_TIMER_CPU_STAT names a cgroup v2 cpu.stat (a mock host's cgroup). Needs no collection
(ansible.posix's profile_tasks is not installed)."""
from __future__ import annotations

import json
import os
import re
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
name: task_timer
type: aggregate
short_description: write per-task wall times as JSON lines to $TASK_TIMER_OUT
description: used by bench/switch_overhead.py
requirements: [enable in ANSIBLE_CALLBACKS_ENABLED, set TASK_TIMER_OUT]
'''

_FILTER = re.compile(r"\|\s*llmops\.specdec\.(\w+)")  # a filter call, not a module or role name


def _cpu_us(path):
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("usage_usec "))
    except (OSError, StopIteration, ValueError):
        return None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'task_timer'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._out = os.environ.get('TASK_TIMER_OUT')
        self._start = {}
        self._play_start = time.time()
        if self._out:
            self._write({'event': 'start', 't': self._play_start})

    def _write(self, record):
        record["host_cpu_us"] = _cpu_us(os.environ.get("TASK_TIMER_CPU_STAT"))
        if self._out:
            with open(self._out, 'a', encoding='utf-8') as fh:
                fh.write(json.dumps(record) + '\n')

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start[task._uuid] = time.time()
        # path: the task file (file:line) it was read from; filters: the collection's filters its arguments call
        # (each a trip from Jinja into the collection's Python and back), for switch_overhead's file and trip counts
        self._write({'event': 'task_start', 't': self._start[task._uuid], 'uuid': task._uuid,
                     'name': task.get_name(), 'action': task.action, 'path': task.get_path(),
                     'filters': sorted(set(_FILTER.findall(json.dumps(task.args, default=str) + ' ' + json.dumps(task.when, default=str))))})

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def _result(self, result, status):
        task = result._task
        now = time.time()
        self._write({'event': 'result', 't': now, 'uuid': task._uuid, 'name': task.get_name(),
                     'action': task.action, 'host': result._host.get_name(), 'status': status,
                     'started': self._start.get(task._uuid, now),
                     'changed': bool(result._result.get('changed')),
                     'delegated': bool(result._result.get('_ansible_delegated_vars'))})

    def v2_runner_on_ok(self, result):
        self._result(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, 'failed')

    def v2_runner_on_skipped(self, result):
        self._result(result, 'skipped')

    def v2_runner_on_unreachable(self, result):
        self._result(result, 'unreachable')

    def v2_playbook_on_stats(self, stats):
        self._write({'event': 'end', 't': time.time()})
