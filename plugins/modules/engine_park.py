#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_park
short_description: Park a running vLLM or SGLang engine (its GPU memory given back, the process kept), or wake it
version_added: 0.4.0
description:
  - "O(state=parked): checks first, touching nothing when a check fails (RV(refused) says why): the unit's
    running engine was started with vLLM's C(--enable-sleep-mode) and C(VLLM_SERVER_DEV_MODE=1), or
    SGLang's C(--enable-memory-saver) (read from the process itself); the host's C(MemAvailable) holds the
    weights (O(weights_bytes), or the size of the weight files under O(model_path)) plus
    O(cpu_headroom_gib). Then it parks the engine (vLLM C(POST /sleep?level=1): weights to CPU memory, KV
    cache dropped; SGLang C(POST /release_memory_occupation)), and reads through NVML what the unit's
    processes still keep on each GPU and what is free."
  - With O(candidate_share), the share a candidate may take beside the parked engine is returned in
    RV(candidate_share), lowered by what the parked engine keeps (measured, not guessed). When that
    leaves no room, the engine is woken again and RV(refused) says why.
  - "O(state=awake): wakes a parked engine (vLLM C(POST /wake_up), SGLang C(POST /resume_memory_occupation)).
    A wake-up the engine does not survive fails with RV(wake_failed): restart the unit then."
  - The host keeps a record of a parked engine in O(state_dir) (mode 0600, under C(/run), so a reboot, which
    starts the engine awake, clears it); gpu_reclaim and the host's guard read it.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.engine_api
options:
  engine:
    description: Which engine serves O(url); it selects the flag to check and the routes.
    type: str
    required: true
    choices: [vllm, sglang]
  unit:
    description: The systemd unit running the engine. Its main process is checked, its processes are accounted for.
    type: str
    required: true
  state:
    description: Whether the engine should be parked or awake.
    type: str
    default: parked
    choices: [parked, awake]
  gpus:
    description:
      - The service's GPUs (NVML indices or UUIDs) whose memory is accounted for after parking. Empty means every GPU.
    type: list
    elements: str
    default: []
  model_path:
    description:
      - The model's directory (or file) on this host; the size of its weight files is what parking copies
        to CPU memory. Ignored when O(weights_bytes) is given.
    type: path
  weights_bytes:
    description: Bytes of weights the engine moves to CPU memory when parked, when they are not files under O(model_path).
    type: int
  cpu_headroom_gib:
    description: CPU memory in GiB left to the host beyond the weights.
    type: float
    default: 8
  candidate_share:
    description:
      - The GPU memory share (0 to 1) a candidate asks for (vLLM C(--gpu-memory-utilization), SGLang
        C(--mem-fraction-static)); RV(candidate_share) is it lowered to what parking leaves free.
    type: float
  gpu_headroom_mib:
    description: GPU memory in MiB left free beside the parked engine and the candidate.
    type: int
    default: 1024
  timeout:
    description: Seconds the park or wake-up call may take (weights move at tens of GB/s; a 1T model takes tens of seconds).
    type: float
    default: 300
  state_dir:
    description: Where the host keeps the records of parked engines.
    type: path
    default: /run/llmops-specdec/parked
requirements:
  - nvidia-ml-py (pynvml) on the host, for O(state=parked)
attributes:
  check_mode:
    support: full
    details:
      - Runs every check and says whether it would park or wake; sends no park or wake-up request.
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - Runs on the host that runs the engine, so a server bound to C(127.0.0.1) is reachable.
  - A parked engine still holds its CUDA context and allocator pools on every GPU (2.8 GiB per process on an H200).
"""

EXAMPLES = r"""
- name: Park the baseline, and get the share a candidate may take beside it
  llmops.specdec.engine_park:
    url: http://127.0.0.1:8000
    engine: vllm
    unit: vllm-server.service
    gpus: ["0", "1"]
    model_path: /models/qwen3-32b
    candidate_share: 0.9
  register: park

- name: Wake it again (the candidate lost)
  llmops.specdec.engine_park:
    url: http://127.0.0.1:8000
    engine: vllm
    unit: vllm-server.service
    state: awake
"""

RETURN = r"""
parked:
  description: Whether the engine is parked when the module ends.
  returned: always
  type: bool
refused:
  description: Why the engine was not parked (a check failed, or parking left no room for the candidate); V(null) otherwise.
  returned: always
  type: str
  sample: the running vllm was started without --enable-sleep-mode, so parking would free no GPU memory
seconds:
  description: How long the park or wake-up call took; V(null) when none was sent.
  returned: always
  type: float
  sample: 1.61
weights_bytes:
  description: The bytes of weights checked against the host's CPU memory.
  returned: when O(state=parked)
  type: int
mem_available_bytes:
  description: The host's C(MemAvailable) before parking.
  returned: when O(state=parked)
  type: int
gpus:
  description: Per GPU after parking, through NVML.
  returned: when the engine was parked
  type: list
  elements: dict
  contains:
    index:
      description: NVML index.
      type: int
    total_mib:
      description: Memory of the GPU.
      type: int
    used_mib:
      description: Memory in use (driver-reserved memory not included).
      type: int
    kept_mib:
      description: What the unit's processes keep on it while parked.
      type: int
    free_mib:
      description: What an allocation would find free.
      type: int
kept_mib:
  description: The most any one GPU keeps for the parked engine.
  returned: when the engine was parked
  type: int
  sample: 2867
candidate_share:
  description: O(candidate_share), lowered to what the fullest GPU leaves free after parking.
  returned: when O(candidate_share) was given and the engine is parked
  type: float
  sample: 0.87
wake_failed:
  description: V(true) when the engine did not survive its wake-up (restart the unit).
  returned: failure
  type: bool
msg:
  description: One human line.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _http, _nvml, _park, _secrets, _systemd


def _accounting(module, gpus, pids):
    """The Accounting rows of ``gpus`` for ``pids`` (fails the module without NVML)."""
    if _nvml.PYNVML.get() is None:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py"), exception=_nvml.PYNVML.error)
    nvml = _nvml.Nvml()
    try:
        return _park.Accounting(nvml, nvml.resolve(gpus), pids).rows
    finally:
        nvml.close()


def main():
    module = AnsibleModule(
        argument_spec=_http.engine_api_argspec(
            engine=dict(type='str', required=True, choices=list(_engine.NAMES)),
            unit=dict(type='str', required=True),
            state=dict(type='str', default='parked', choices=['parked', 'awake']),
            gpus=dict(type='list', elements='str', default=[]),
            model_path=dict(type='path'),
            weights_bytes=dict(type='int'),
            cpu_headroom_gib=dict(type='float', default=8),
            candidate_share=dict(type='float'),
            gpu_headroom_mib=dict(type='int', default=1024),
            timeout=dict(type='float', default=300),
            state_dir=dict(type='path', default=_park.STATE_DIR),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problem = _secrets.api_key_problem(p['api_key'])
    if problem:
        module.fail_json(msg=problem, parked=False, refused=None, seconds=None, changed=False)
    if p['candidate_share'] is not None and not 0 < p['candidate_share'] <= 1:
        module.fail_json(msg='candidate_share must be in (0, 1], got %s' % p['candidate_share'])

    def get(url, **kwargs):
        return open_url(url, **kwargs)

    try:
        parking = _park.Parking(module.run_command, get, p['engine'], p['unit'], _http.server_root(p['url']),
                                p['timeout'], _secrets.auth_headers(p['api_key']), p['validate_certs'],
                                state_dir=p['state_dir'])
    except _systemd.SystemdError as e:
        module.fail_json(msg=str(e), parked=False, refused=None, seconds=None, changed=False)
    result = _park.run(parking, p, module.check_mode, lambda pids: _accounting(module, p['gpus'], pids))
    if result.pop('failed', False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
