# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of an engine's server: one bounded probe cycle over its unit and its HTTP API.

Used by the engine_ready module. The caller injects ``open_url`` (HTTP) and ``run_command``
(systemctl), so tests run the real logic against a local HTTP server and a fake systemctl.

Ready means: GET the engine's ``HEALTH_PATH`` (its adapter in ``_engine``) is 200 and, where the adapter
says ``READY_LISTS_MODEL``, GET /v1/models lists the expected model (any model if none given).

A cycle fails fast (Crashed) when the unit is failed, inactive, waiting to auto-restart, or its
NRestarts grew past the caller's baseline: under Restart=always a dying engine is restarted by
systemd, and without this check the wait would poll a crash loop until the overall timeout.
"""
from __future__ import annotations

import json
import os
import re
import time
from urllib.parse import urlparse

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _http, _secrets, _systemd

UNIT_PROPS = [
    'ActiveState', 'SubState', 'Result', 'NRestarts', 'MainPID',
    'ExecMainStatus', 'ExecMainCode', 'ExecMainStartTimestampMonotonic', 'LoadState',
]

# An exception line of a traceback, perhaps behind the prefixes an engine's logger puts before it (each
# adapter's LOG_PREFIX: a process prefix, a logger's level, time and source).
EXCEPTION_LINE = re.compile(r'^%s(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception):'
                            % ''.join(mod.LOG_PREFIX for mod in _engine.ENGINES.values()))
# The wrappers the engines raise after the real error, pointing back at it ("please check the stack trace
# above for the root cause", "See root cause above").
POINTS_BACK = re.compile(r'\babove\b', re.I)

# The path that must answer 200 per engine (its adapter's HEALTH_PATH); /v1/models is checked too where the
# adapter says READY_LISTS_MODEL.
HEALTH_PATH = dict((name, mod.HEALTH_PATH) for name, mod in _engine.ENGINES.items())

POLL_INTERVAL = 2.0
# One request may not use the whole cycle: a health path that generates (SGLang's) waits up to 20 s by itself.
MAX_REQUEST_TIMEOUT = 25.0


UnitQueryError = _systemd.SystemdError


class Crashed(Exception):
    """The unit died or restarted while we waited: waiting longer cannot help."""

    def __init__(self, msg, state):
        super().__init__(msg)
        self.msg = msg
        self.state = state


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def unit_state(run_command, unit):
    """Return the unit's state as a small dict with stable snake_case keys."""
    props = _systemd.show(run_command, unit, UNIT_PROPS)
    state = {
        'unit': unit,
        'load_state': props.get('LoadState', ''),
        'active_state': props.get('ActiveState', ''),
        'sub_state': props.get('SubState', ''),
        'result': props.get('Result', ''),
        'n_restarts': _int(props.get('NRestarts')),
        'main_pid': _int(props.get('MainPID')),
        'exec_main_status': _int(props.get('ExecMainStatus')),
        'exec_main_code': _int(props.get('ExecMainCode')),
        'running_seconds': None,
    }
    started_us = _int(props.get('ExecMainStartTimestampMonotonic'))
    if started_us and state['active_state'] in ('active', 'activating', 'reloading'):
        # systemd's monotonic timestamps are CLOCK_MONOTONIC in microseconds, as is time.monotonic().
        state['running_seconds'] = max(0, int(time.monotonic() - started_us / 1e6))
    return state


def describe_state(state):
    text = '%s %s/%s' % (state['unit'], state['active_state'], state['sub_state'])
    if state.get('running_seconds') is not None:
        text += ' for %d s' % state['running_seconds']
    return text


def check_crash(state, since_restarts):
    """Raise Crashed when the unit's state says the engine died; return None otherwise."""
    unit = state['unit']
    exit_info = 'last exit status %d, result %s' % (state['exec_main_status'], state['result'] or 'unknown')
    if state['load_state'] == 'not-found':
        raise Crashed('%s does not exist (LoadState=not-found)' % unit, state)
    if state['active_state'] == 'failed':
        raise Crashed('%s failed (%s); see journalctl -u %s' % (unit, exit_info, unit), state)
    if state['active_state'] == 'activating' and state['sub_state'] == 'auto-restart':
        raise Crashed('%s exited and waits to be restarted by systemd (%s, NRestarts=%d); see journalctl -u %s'
                      % (unit, exit_info, state['n_restarts'], unit), state)
    if state['active_state'] in ('inactive', 'deactivating'):
        raise Crashed('%s is %s/%s, not starting (%s); see journalctl -u %s'
                      % (unit, state['active_state'], state['sub_state'], exit_info, unit), state)
    if since_restarts is not None and state['n_restarts'] > since_restarts:
        raise Crashed('%s restarted %d time(s) while waiting (NRestarts %d -> %d, %s): the engine is '
                      'crash-looping under Restart=always; see journalctl -u %s'
                      % (unit, state['n_restarts'] - since_restarts, since_restarts,
                         state['n_restarts'], exit_info, unit), state)


def engine_log_tail(run_command, unit, lines=5, scan=200):
    """The engine's last ``lines`` log lines from the journal (systemd's own lines left out), led by the
    root cause when it is further up: the last exception line of the unit's last run that is not a
    wrapper pointing back at it (a worker's error comes before the engine's "see root cause above").

    Best effort: returns [] when journalctl is missing or fails; it only enriches a crash message.
    """
    try:
        rc, out, _err = run_command(['journalctl', '--unit', unit, '--lines', str(scan), '--output', 'json',
                                     '--no-pager', '--quiet'])
    except (OSError, ValueError):
        return []
    if rc != 0:
        return []
    found = []  # (invocation id, message)
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get('_PID') == '1' or entry.get('SYSLOG_IDENTIFIER') == 'systemd':
            continue  # "Main process exited..." says less than the engine's own last words
        msg = entry.get('MESSAGE')
        if isinstance(msg, list):  # journald sends non-UTF-8 messages as byte arrays
            msg = bytes(b & 0xff for b in msg if isinstance(b, int)).decode('utf-8', 'replace')
        if isinstance(msg, str) and msg.strip():
            found.append((entry.get('_SYSTEMD_INVOCATION_ID'), msg.rstrip()))
    if not found:
        return []
    last_run = [msg for run, msg in found if run == found[-1][0]]  # not an earlier start's errors
    tail = last_run[-lines:]
    causes = [m for m in last_run if EXCEPTION_LINE.match(m) and not POINTS_BACK.search(m)]
    if causes and causes[-1] not in tail:
        tail = [causes[-1]] + tail
    return tail


def start_log(run_command, unit, max_lines=20000):
    """The journal of the unit's current start (its invocation): ``[(seconds since the main process started,
    message)]``, the engine's lines only. Best effort: [] when systemd or journalctl cannot tell (it only adds the
    load's breakdown and progress, docs/load.md)."""
    try:
        props = _systemd.show(run_command, unit, ['InvocationID', 'ExecMainStartTimestampMonotonic'])
        rc, out, _err = run_command(['journalctl', '_SYSTEMD_INVOCATION_ID=%s' % props.get('InvocationID', ''),
                                     '--lines', str(max_lines), '--output', 'json', '--output-fields', 'MESSAGE',
                                     '--no-pager', '--quiet'])
    except (OSError, ValueError, UnitQueryError):
        return []
    started_us = _int(props.get('ExecMainStartTimestampMonotonic'))
    if rc != 0 or not props.get('InvocationID') or not started_us:
        return []
    entries = []
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = entry.get('MESSAGE')
        if isinstance(msg, list):  # journald sends non-UTF-8 messages as byte arrays
            msg = bytes(b & 0xff for b in msg if isinstance(b, int)).decode('utf-8', 'replace')
        if isinstance(msg, str):
            entries.append((max(0.0, (_int(entry.get('__MONOTONIC_TIMESTAMP')) - started_us) / 1e6), msg))
    return entries


# /proc/net/tcp{,6} rows of listening sockets: "sl local_address(hex ip:hex port) remote st ... inode".
_TCP_LISTEN = '0A'
_LOCAL_HOSTS = ('127.0.0.1', 'localhost', '::1', '0.0.0.0', '::')


def port_listeners(port, proc='/proc'):
    """Pids of the processes that hold a listening TCP socket on ``port`` (any address, v4 or v6)."""
    inodes = set()
    for table in ('net/tcp', 'net/tcp6'):
        try:
            with open(os.path.join(proc, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == _TCP_LISTEN and int(cols[1].rsplit(':', 1)[1], 16) == int(port):
                inodes.add('socket:[%s]' % cols[9])
    if not inodes:
        return []
    pids = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        fd_dir = os.path.join(proc, name, 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in inodes:
                    pids.append(int(name))
                    break
            except OSError:
                continue
    return sorted(pids)


def _in_cgroup(pid, cgroup, proc='/proc'):
    """True when ``pid`` runs in ``cgroup`` (systemd's ControlGroup path) or below it, in any hierarchy."""
    try:
        with open(os.path.join(proc, str(pid), 'cgroup')) as f:
            paths = [line.rstrip('\n').split(':', 2)[2] for line in f if line.count(':') >= 2]
    except OSError:
        return False
    return any(path == cgroup or path.startswith(cgroup.rstrip('/') + '/') for path in paths)


def listener_problem(run_command, unit, url, proc='/proc'):
    """Why the server answering ``url`` on this host is not ``unit``'s own process (None: it is, or the URL
    is not on this host). A candidate that never started must not look ready because another process holds
    its port (a parked baseline's neighbour, a stray server), nor be benchmarked in its place."""
    parsed = urlparse(url)
    if unit is None or parsed.hostname not in _LOCAL_HOSTS:
        return None
    port = parsed.port or (443 if parsed.scheme == 'https' else 80)
    cgroup = _systemd.show(run_command, unit, ['ControlGroup']).get('ControlGroup') or ''
    if not cgroup:  # systemd names no control group (the unit runs nothing): nothing to compare with
        return None
    strangers = [pid for pid in port_listeners(port, proc) if not _in_cgroup(pid, cgroup, proc)]
    if not strangers:
        return None
    names = []
    for pid in strangers:
        try:
            with open(os.path.join(proc, str(pid), 'comm')) as f:
                names.append('%d (%s)' % (pid, f.read().strip()))
        except OSError:
            names.append(str(pid))
    return ('port %d is held by pid %s, not by a process of %s (%s): another server answers in its place'
            % (port, ', '.join(names), unit, cgroup))


def model_ids(body):
    """The model ids listed by an OpenAI-style /v1/models body; None when the body is not that."""
    try:
        doc = json.loads(body.decode('utf-8'))
        return [m['id'] for m in doc['data']]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def probe_http(open_url, base_url, engine, model=None, timeout=10.0, api_key=None):
    """One probe of the engine's API. Return (ready, detail text).

    Raises _secrets.BadHeaderValue, before any request, for an api_key that cannot be sent.
    """
    headers = _secrets.auth_headers(api_key)
    base = _http.server_root(base_url)
    health = HEALTH_PATH[engine]
    status, body, err = _http.http_get(open_url, base + health, timeout)
    if status != 200:
        return False, '%s: %s' % (health, err or 'HTTP %s' % status)
    if not _engine.get(engine).READY_LISTS_MODEL:
        return True, '%s: 200' % health
    status, body, err = _http.http_get(open_url, base + '/v1/models', timeout, headers)
    if status != 200:
        return False, '%s: 200, /v1/models: %s' % (health, err or 'HTTP %s' % status)
    ids = model_ids(body)
    if ids is None:
        return False, '%s: 200, /v1/models: not an OpenAI model list' % health
    if model is not None and model not in ids:
        return False, '%s: 200, /v1/models lists %s, not %r' % (health, ids, model)
    if model is None and not ids:
        return False, '%s: 200, /v1/models lists no model' % health
    return True, '%s: 200, /v1/models lists %s' % (health, ', '.join(ids))


def probe_cycle(open_url, run_command, url, engine, unit=None, model=None, timeout=30.0,
                since_restarts=None, api_key=None, interval=POLL_INTERVAL, clock=time.monotonic,
                sleep=time.sleep, proc='/proc'):
    """Poll until ready or until ``timeout`` seconds pass; raise Crashed on a dead unit.

    Returns a dict: ready, msg, state (unit state dict or None), elapsed, probes. An api_key that
    cannot be sent (a control character) raises _secrets.BadHeaderValue before any request.
    """
    _secrets.check_api_key(api_key)
    t0 = clock()
    deadline = t0 + max(0.0, float(timeout))
    probes = 0
    while True:
        state = None
        if unit:
            state = unit_state(run_command, unit)
            check_crash(state, since_restarts)
        remaining = deadline - clock()
        request_timeout = min(MAX_REQUEST_TIMEOUT, max(1.0, remaining))
        ready, detail = probe_http(open_url, url, engine, model, request_timeout, api_key)
        probes += 1
        where = describe_state(state) if state else url
        if ready:
            stranger = listener_problem(run_command, unit, url, proc) if unit else None
            if stranger:
                raise Crashed('%s answers %s, but %s' % (url, detail, stranger), state)
            return _result(True, 'ready: %s, %s' % (where, detail), state, clock() - t0, probes)
        if unit:
            # The engine may have died during the request; report that rather than the HTTP error.
            state = unit_state(run_command, unit)
            check_crash(state, since_restarts)
            where = describe_state(state)
        remaining = deadline - clock()
        if remaining <= 0:
            return _result(False, 'loading: %s, %s' % (where, detail), state, clock() - t0, probes)
        sleep(min(interval, remaining))


def _result(ready, msg, state, elapsed, probes):
    return {'ready': ready, 'msg': msg, 'state': state, 'elapsed': round(elapsed, 1), 'probes': probes}
