#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_ready
short_description: Probe whether a vLLM or SGLang server is ready, for one bounded cycle
version_added: 0.1.0
description:
  - Polls the inference server's HTTP API for at most O(timeout) seconds and returns whether it is ready.
  - "vLLM is ready when C(GET /health) answers 200 and C(GET /v1/models) lists O(model)
    (any model when O(model) is omitted). SGLang is ready when C(GET /health_generate) answers 200."
  - When O(unit) is given, the systemd unit's state is read on every poll, and the module fails at once
    when the unit is failed, inactive, waiting for an automatic restart, or has restarted more often than
    O(since_restarts). A crash-looping engine under C(Restart=always) therefore fails the wait in seconds
    instead of at the overall timeout.
  - Meant to be called in an C(until) loop, so each cycle prints a line and long loads show progress.
    See the P(llmops.specdec.spec_server#role) role's C(wait_ready.yml).
  - On a crash the engine's last journal lines are returned (RV(log_tail)) and added to the message.
  - The module never changes anything.
  - O(api_key) is sent to C(/v1/models) only; the health endpoints of both engines answer without a key.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.engine_api
  - llmops.specdec.lease
options:
  engine:
    description:
      - Which engine serves O(url); it selects the readiness check.
    type: str
    required: true
    choices: [vllm, sglang]
  unit:
    description:
      - The systemd unit running the engine. When set, its state is checked on every poll (fail fast).
    type: str
  model:
    description:
      - Model name that C(/v1/models) must list (vLLM's C(--served-model-name), or the model argument).
      - Ignored for SGLang.
    type: str
  timeout:
    description:
      - Longest time in seconds this one probe cycle polls before it returns RV(ready=false).
      - C(0) probes once.
    type: float
    default: 30
  since_restarts:
    description:
      - Baseline of the unit's C(NRestarts). The module fails when C(NRestarts) is above it.
      - Omit it to skip that check (the unit's other states are still checked).
    type: int
attributes:
  check_mode:
    support: full
    details:
      - Probing only reads, so it runs unchanged in check mode and reports the real readiness.
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - Runs on the host that runs the engine, so a server bound to C(127.0.0.1) is reachable.
"""

EXAMPLES = r"""
- name: Wait until vLLM serves the model (one line per 30 s cycle, fail fast on a crash)
  llmops.specdec.engine_ready:
    url: http://127.0.0.1:8000
    engine: vllm
    unit: vllm-server.service
    model: llama-3.1-8b
    since_restarts: 0
    timeout: 30
  register: ready
  until: ready.ready or ready is failed
  retries: 60
  delay: 0

- name: Check once whether SGLang answers a generation
  llmops.specdec.engine_ready:
    url: http://127.0.0.1:30000
    engine: sglang
    timeout: 0
"""

RETURN = r"""
lease_lost:
  description: Why the lease on the host's guard could not be renewed (the guard restored the host, or another run owns it).
  returned: when O(lease) was given and a renewal failed
  type: str
ready:
  description: Whether the server passed the readiness check.
  returned: success
  type: bool
  sample: false
msg:
  description: One human line with the unit state, how long it runs and the last HTTP result.
  returned: always
  type: str
  sample: "loading: vllm-server.service active/running for 125 s, /health: connection refused"
elapsed:
  description: Seconds this probe cycle took.
  returned: always
  type: float
  sample: 30.0
probes:
  description: How many HTTP probes this cycle sent.
  returned: success
  type: int
  sample: 15
state:
  description: The unit's state at the end of the cycle; V(null) when O(unit) is not given.
  returned: always
  type: dict
  contains:
    unit:
      description: Unit name.
      type: str
      sample: vllm-server.service
    load_state:
      description: C(LoadState).
      type: str
      sample: loaded
    active_state:
      description: C(ActiveState).
      type: str
      sample: active
    sub_state:
      description: C(SubState).
      type: str
      sample: running
    result:
      description: C(Result) of the last run.
      type: str
      sample: success
    n_restarts:
      description: C(NRestarts), automatic restarts since the last manual start.
      type: int
      sample: 0
    main_pid:
      description: C(MainPID), 0 when not running.
      type: int
      sample: 4242
    exec_main_status:
      description: Exit status (or signal) of the last main process.
      type: int
      sample: 0
    exec_main_code:
      description: C(ExecMainCode) (1 exited, 2 killed, 3 dumped).
      type: int
      sample: 0
    running_seconds:
      description: Seconds since the current main process started; V(null) when not running.
      type: int
      sample: 125
crashed:
  description: V(true) when the module failed because the unit died or restarted.
  returned: failure
  type: bool
  sample: true
log_tail:
  description: The engine's last log lines from the journal (systemd's own lines left out) after a crash.
  returned: failure
  type: list
  elements: str
  sample: ["RuntimeError: Engine core initialization failed. See root cause above."]
stage:
  description:
    - What the engine is doing, from its own start-up lines in the journal (also appended to RV(msg)), with the
      weights' progress where the engine prints it.
  returned: when O(unit) is given, the engine is not ready yet and its start is under an hour old
  type: str
  sample: loading weights 41 %
load:
  description:
    - "Where the start's time went (docs/load.md): from the unit's start to the engine's ready line
      (C(total)), the engine's own figures for C(weights), C(compile), C(graph_capture) and C(kv_profile)
      (null where it reports none), C(other) the rest, and C(compile_cache_hit)."
    - "C(compile_cache): what became of the compiled graphs in the cache: C(hit) (loaded), C(load_failed) (found
      but not loadable, compiled again; the engine's reason in C(compile_cache_error)), C(miss) (none found), or
      null (nothing compiled, or the engine does not say)."
  returned: when O(unit) is given, the engine is ready and its start is under an hour old
  type: dict
  sample: {weights: 172.0, compile: 48.37, graph_capture: 21.0, kv_profile: 11.13, other: 47.5, total: 300.0,
           compile_cache: miss, compile_cache_hit: false}
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _http, _lease, _load, _ready, _secrets

# Only a start this recent is read from the journal (a day-old server's journal is long, and its load is past).
LOAD_WINDOW_S = 3600


def _load_info(module, engine, unit, result):
    """Add the load's stage (not ready) or breakdown (ready) of a recent start to ``result``, from its journal."""
    running = (result.get('state') or {}).get('running_seconds')
    if running is None or running > LOAD_WINDOW_S:
        return
    entries = _ready.start_log(module.run_command, unit)
    if not entries:
        return
    lines = [msg for _t, msg in entries]
    if result.get('ready'):
        result['load'] = _load.breakdown(engine, lines, _load.ready_after(engine, entries), entries)
    else:
        result['stage'] = _load.stage(engine, lines)
        result['msg'] = '%s; %s' % (result['msg'], result['stage'])


def main():
    module = AnsibleModule(
        argument_spec=_http.engine_api_argspec(
            engine=dict(type='str', required=True, choices=list(_engine.NAMES)),
            unit=dict(type='str'),
            model=dict(type='str'),
            timeout=dict(type='float', default=30),
            since_restarts=dict(type='int'),
            lease=_lease.lease_argspec(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problem = _secrets.api_key_problem(p['api_key'])
    if problem:
        module.fail_json(msg=problem, ready=False, state=None, elapsed=0.0, changed=False)
    if p['timeout'] < 0:
        module.fail_json(msg='timeout must be >= 0, got %s' % p['timeout'])

    def get(url, **kwargs):
        kwargs['validate_certs'] = p['validate_certs']
        return open_url(url, **kwargs)

    t0 = time.monotonic()
    try:
        _lease.renew(p['lease'])
    except _lease.LeaseLost as e:
        module.fail_json(msg="the lease on the host's guard was lost, the host is being restored to its previous "
                             "configuration: %s" % e, lease_lost=str(e), ready=False, state=None, elapsed=0.0, changed=False)
    try:
        result = _ready.probe_cycle(get, module.run_command, p['url'], p['engine'], unit=p['unit'],
                                    model=p['model'], timeout=p['timeout'],
                                    since_restarts=p['since_restarts'], api_key=p['api_key'])
    except _ready.Crashed as e:
        log_tail = _ready.engine_log_tail(module.run_command, p['unit'])
        msg = 'crashed: %s' % e.msg
        if log_tail:
            msg += '; last engine log lines: %s' % ' | '.join(log_tail)
        module.fail_json(msg=msg, crashed=True, ready=False, state=e.state, log_tail=log_tail,
                         elapsed=round(time.monotonic() - t0, 1), changed=False)
    except _ready.UnitQueryError as e:
        module.fail_json(msg=str(e), ready=False, state=None,
                         elapsed=round(time.monotonic() - t0, 1), changed=False)
    if p['unit']:
        _load_info(module, p['engine'], p['unit'], result)
    module.exit_json(changed=False, **_secrets.scrub(result, [p['api_key']] if p['api_key'] else []))


if __name__ == '__main__':
    main()
