#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_reclaim
short_description: Free NVIDIA GPUs - stop units, signal holders, verify through NVML
version_added: 0.1.0
description:
  - Replaces the manual C(systemctl stop), C(ps | grep | xargs kill -9), C(fuser -k /dev/nvidia*) and
    C(nvidia-smi) sequence and its fixed sleeps with bounded waits that end as soon as the GPUs are free.
  - "Order: NVML is initialised and the GPUs are selected first (a missing driver, GPU or unit fails before
    anything is stopped); then O(units) are stopped (O(stop_timeout), then SIGKILL of the unit's cgroup);
    then the processes that still hold a selected GPU and belong to the service get SIGTERM, and SIGKILL
    after O(term_timeout); then NVML is polled until no compute process remains on the selected GPUs and
    each one's used memory is at most O(max_used_mib)."
  - "Which GPUs: O(gpus) when given (V(all) for every GPU). Otherwise the service's own: the GPUs named by
    the C(CUDA_VISIBLE_DEVICES) of the units' C(Environment=) (C(systemctl show -p Environment)), plus
    those that the units' processes hold. Never every GPU by default. RV(gpus_source) says which."
  - "Whose processes: a holder is the service's when it is a process of O(units), lies in their cgroups,
    in the cgroups of O(allow_units) or below an O(allow_cgroups) prefix, or runs under a uid in
    O(allow_uids); with O(scope=gpu) also when it runs as the service's user (the units' C(User=)), which
    reaches the service's orphaned engine workers that left its cgroup. Any other holder (another user's
    job) is spared and, if it keeps a selected GPU busy, the module fails before stopping anything,
    naming its pid, user and command."
  - NVML's compute process list decides who holds GPU memory. An open C(/dev/nvidia<N>) counts only for
    processes of the stopped units, and, with O(scope=gpu), for CUDA processes when the module is proven
    to run in a child pid namespace (NVML then reports pids that C(/proc) cannot show). So a process that
    only initialised NVML (a monitor, an exporter, this module) is never signalled, and neither are
    processes on GPUs outside the selection.
  - A process that holds a selected GPU and also an unselected one (for example one process driving
    two GPUs) is never signalled; the module fails naming it, and the operator adds the other GPU to
    O(gpus) or stops the owning unit.
  - Any holder that would be left alone (protected, not the service's, or also on an unselected GPU) and
    that no unit in O(units) owns would keep its GPU busy, so the module fails before stopping or
    signalling anything, naming it; check mode fails the same way. Stopping a unit named in O(units)
    still ends such a process, because the operator asked for that unit.
  - A failure after a unit was stopped or a process signalled (NVML failing mid-run, a holder that does
    not die, a late holder that must be left alone) is a clean failure with RV(touched=true) and
    RV(stopped), so the caller knows the service was touched and must roll back.
  - A process that ignores SIGTERM (its C(SigIgn) mask has it) or is stopped gets SIGKILL at once, since
    no grace period could help it.
  - With O(lease), the guard's deadline is renewed before anything is stopped (a lost lease fails with nothing
    touched), while the reclaim runs, and once more when it ends, so the step after it (the candidate's install,
    a rollback's restore) needs no renewal of its own.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.lease
attributes:
  check_mode:
    support: full
    details:
      - Reports the units it would stop (C(action=would stop) in RV(units)) and the processes it would
        signal (RV(would_signal)); stops and signals nothing.
  diff_mode:
    support: full
    details:
      - Per selected GPU, used MiB and the compute processes before and after (predicted in check mode).
  idempotent:
    support: full
    details:
      - With the units already stopped and the GPUs free it reports C(changed=false).
options:
  units:
    description:
      - systemd units to stop first, for example C(vllm.service). Their processes (cgroup members and
        their descendants, recorded before the stop) are the ones O(scope=unit) may signal.
      - Without O(gpus) the units also tell which GPUs to free (their C(CUDA_VISIBLE_DEVICES) and the
        GPUs their processes hold), and their C(User=) is the service's user for O(scope=gpu).
      - A unit that does not exist fails the module before anything is stopped.
    type: list
    elements: str
    default: []
  gpus:
    description:
      - GPUs to free, by NVML index (C(0)) or UUID (C(GPU-...)), or V([all]) for every GPU of the host.
      - Empty means the service's GPUs, found from O(units) (see the description); with neither O(gpus)
        nor O(units) the module fails.
      - An index in C(CUDA_VISIBLE_DEVICES) is the NVML index only under C(CUDA_DEVICE_ORDER=PCI_BUS_ID);
        on a host with one GPU model both orders agree, on a mixed host the module refuses indices
        without it.
      - A GPU that is not present fails the module before anything is stopped.
    type: list
    elements: str
    default: []
  scope:
    description:
      - Which holders of the selected GPUs may be signalled.
      - C(unit) only processes of O(units), of their cgroups and of the allow-lists; any other holder is
        left alone and, if it keeps a GPU busy, the module fails naming it.
      - C(gpu) also every compute process on the selected GPUs that runs as the service's user (the
        units' C(User=), root when unset; with no O(units), the user running the module), for example
        orphaned engine workers outside the unit's cgroup. Another user's job is still spared unless
        O(allow_uids) names that user. O(protect), this module and its ancestors are always spared.
    type: str
    choices: [unit, gpu]
    default: unit
  protect:
    description:
      - Programs never signalled, as C(PROGRAM) or C(PROGRAM@USER), compared with the executable the
        kernel runs (C(/proc/PID/exe)), never with C(argv[0]) or C(comm), which any process can set.
      - An absolute C(PROGRAM) must equal the executable's path; a bare name must equal its basename
        and the file must be owned by root and not writable by group or others.
      - C(@USER) (name or uid) also requires the process's real uid to be that user's, for example
        C(/usr/bin/python3@gpumon) for a monitor written in Python.
      - The module itself and its ancestors are always spared. Setting this option replaces the list.
    type: list
    elements: str
    default: [nvidia-persistenced, nv-hostengine, dcgm-exporter, dcgmi, nvidia-smi, nvtop, nvitop, gpustat]
  allow_uids:
    description:
      - Users (names or uids) whose processes on the selected GPUs count as the service's, in both
        scopes. A process counts only when its real, effective and saved uids are all allowed (or the
        service's, with O(scope=gpu)).
    type: list
    elements: str
    default: []
  allow_cgroups:
    description:
      - Cgroup path prefixes (as in C(/proc/PID/cgroup), for example C(/system.slice/vllm-extra.service))
        whose processes count as the service's, in both scopes. Whole path components are compared;
        V(/) allows every cgroup.
    type: list
    elements: str
    default: []
  allow_units:
    description:
      - Units that are not stopped but whose cgroups (C(ControlGroup), sub-cgroups included) count as
        the service's, for example a sidecar that holds a GPU for the engine. A missing unit fails the
        module before anything is stopped.
    type: list
    elements: str
    default: []
  keep_units:
    description:
      - Units that keep running on the selected GPUs, typically the baseline parked by
        M(llmops.specdec.engine_park) beside its candidate. Their processes are never signalled nor
        counted as blockers, and their memory is taken out of what must be freed (RV(kept); C(kept_mib_*)
        in RV(gpus)). A unit cannot be in both O(units) and O(keep_units); a missing one fails the module
        before anything is stopped.
    type: list
    elements: str
    default: []
  stop_timeout:
    description:
      - Seconds to wait for each unit to stop before C(systemctl kill --signal=SIGKILL) on its cgroup.
    type: float
    default: 30
  term_timeout:
    description:
      - Seconds a process has to exit after SIGTERM before it gets SIGKILL. The wait ends as soon as all
        have exited.
    type: float
    default: 10
  verify_timeout:
    description:
      - Seconds, after the SIGTERM grace, to wait for the signalled processes to be gone and NVML to
        show the selected GPUs free. The module fails when it passes.
    type: float
    default: 30
  max_used_mib:
    description:
      - Used MiB per GPU still counted as free. Read from NVML's v2 memory struct, which leaves out
        driver-reserved memory, so C(0) is reachable.
      - On drivers without the v2 struct the v1 struct is read and 1024 MiB are allowed on top, for the
        reserved memory that v1 counts as used (615 MiB on an H200).
    type: int
    default: 0
requirements:
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver's C(libnvidia-ml.so.1) on the target
  - systemd, when O(units) is set
notes:
  - Runs as root on the GPU host. Process information is read from C(/proc).
  - Zombies and processes that exit on their own are not errors.
seealso:
  - name: GPU reclaim design and measurements
    description: docs/gpu_reclaim.md in this collection.
    link: https://example.invalid/llmops/specdec/docs/gpu_reclaim.md
"""

EXAMPLES = r"""
- name: Stop vLLM and free the GPUs its workers held
  llmops.specdec.gpu_reclaim:
    units: [vllm.service]

- name: Free GPUs 0 and 1, with orphaned engine workers and the batch user's stray jobs, sparing the exporter
  llmops.specdec.gpu_reclaim:
    units: [sglang.service]
    gpus: ['0', '1']
    scope: gpu
    allow_uids: [batch]
    protect: [nvidia-persistenced, nv-hostengine, dcgm-exporter, /opt/monitor/bin/node-gpu-monitor]
    term_timeout: 5

- name: Free every GPU of a host taken out of service
  llmops.specdec.gpu_reclaim:
    gpus: [all]
    scope: gpu

- name: See what a reclaim would do
  llmops.specdec.gpu_reclaim:
    units: [vllm.service]
    scope: gpu
  check_mode: true
  diff: true
  register: plan
"""

RETURN = r"""
lease_lost:
  description: Why the lease on the host's guard could not be renewed (the guard restored the host, or another run owns it).
  returned: when O(lease) was given and a renewal failed
  type: str
touched:
  description:
    - Whether a unit stop was issued or a process signalled. On a failure with V(true) the service was
      touched and the caller must roll back; with V(false) nothing was stopped or signalled.
  returned: always
  type: bool
  sample: true
stopped:
  description: The units of O(units) that this run stopped.
  returned: always
  type: list
  elements: str
  sample: [vllm.service]
gpus_source:
  description:
    - Where the selection came from. V(gpus) (given), V(all) (O(gpus=[all])), V(CUDA_VISIBLE_DEVICES) (of
      the units), V(unit processes) (GPUs the units' processes hold), V(CUDA_VISIBLE_DEVICES+unit processes),
      or V(none) (the units name no GPU and hold none; only the units are stopped, with a warning).
  returned: always
  type: str
  sample: CUDA_VISIBLE_DEVICES
gpus:
  description:
    - Per selected GPU, why it was selected (C(selected_by)), memory and compute processes before and after.
    - C(used_mib_*) leave out what the processes of O(keep_units) hold (C(kept_mib_*)).
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      uuid: GPU-6f1c0d2e-0000-0000-0000-000000000000
      name: NVIDIA H200
      selected_by: CUDA_VISIBLE_DEVICES of vllm.service
      memory_struct: v2
      used_mib_before: 120004
      used_mib_after: 0
      kept_mib_before: 0
      kept_mib_after: 0
      processes_before: [{pid: 4242, name: VLLM::Worker_TP, mib: 120004}]
      processes_after: []
units:
  description: The units named in O(units), their state before, their processes, and what was done.
  returned: always
  type: list
  elements: dict
  sample:
    - name: vllm.service
      active_before: active
      main_pid: 4200
      control_group: /system.slice/vllm.service
      pids: [4200, 4230, 4242]
      user: vllm
      cuda_visible_devices: '0'
      action: stopped
      killed: false
kept:
  description: The units of O(keep_units), their state and processes (left running).
  returned: always
  type: list
  elements: dict
  sample:
    - name: vllm.service
      active: active
      main_pid: 4200
      pids: [4200, 4230, 4242]
signalled:
  description:
    - Each process signalled, with the signal that ended it (C(SIGTERM) or C(SIGKILL)).
    - C(source) says how it was found (C(nvml), or a device node for unit members); C(reach) why it
      counts as the service's (C(unit process), C(in the cgroup of UNIT), C(service user NAME),
      C(allow_uids NAME), C(allow_cgroups PREFIX)); C(uid), C(user), C(exe), C(cgroup) who it is;
      C(late) that it appeared after the stop.
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 5150
      name: VLLM::Worker_TP
      cmdline: VLLM::Worker_TP0
      gpus: [0]
      mib: 8192
      unselected: []
      source: nvml
      uid: 998
      user: vllm
      exe: /usr/bin/python3.12
      cgroup: /
      reach: service user vllm
      signal: SIGKILL
would_signal:
  description: In check mode, the processes that would be signalled, and C(via) (C(unit stop) or C(signal)).
  returned: check mode
  type: list
  elements: dict
spared:
  description: Holders of selected GPUs that were left alone, each with its C(reason) (and C(uid), C(user), C(exe), C(cgroup)).
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 5300
      name: python3
      cmdline: python3 train.py
      gpus: [0]
      mib: 4096
      uid: 1001
      user: alice
      reason: owned by uid 1001 (alice), not the service's user (998 (vllm)) nor allow_uids, and outside the units' cgroups and allow_cgroups
elapsed:
  description: Seconds per phase (C(init), C(plan), C(stop), C(term), C(kill), C(verify)) and C(total).
  returned: always
  type: dict
  sample: {init: 0.013, plan: 0.004, stop: 0.41, term: 0.12, kill: 0.0, verify: 0.02, total: 0.57}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.specdec.plugins.module_utils import _lease, _nvml
from ansible_collections.llmops.specdec.plugins.module_utils._reclaim import (
    DEFAULTS, SCOPES, ReclaimError, reclaim)


def main():
    # The defaults are _reclaim.DEFAULTS (the guard's host-side reclaim fills in the same ones).
    lists = ("units", "gpus", "protect", "allow_uids", "allow_cgroups", "allow_units", "keep_units")
    spec = {key: dict(type="list", elements="str", default=list(DEFAULTS[key])) for key in lists}
    spec["scope"] = dict(type="str", choices=list(SCOPES), default=DEFAULTS["scope"])
    for key in ("stop_timeout", "term_timeout", "verify_timeout"):
        spec[key] = dict(type="float", default=DEFAULTS[key])
    spec["max_used_mib"] = dict(type="int", default=DEFAULTS["max_used_mib"])
    spec["lease"] = _lease.lease_argspec()
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
    )
    if _nvml.PYNVML.get() is None:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py") + "; nothing was stopped or signalled",
                         exception=_nvml.PYNVML.error, touched=False, stopped=[])
    params = dict(module.params)
    lease = params.pop("lease")
    if module.check_mode:
        lease = None  # a check stops nothing, so it holds no lease
    # The lease is renewed at the start (a guard that already restored the host, or belongs to another
    # run, must not see this run stop anything), while the reclaim runs, and once more at its end, so
    # the next step (an install, a restore) starts with a whole ttl.
    try:
        with _lease.Heartbeat(lease) as heartbeat:
            if heartbeat.lost:
                module.fail_json(msg="the lease on the host's guard was lost, the host is being restored to its "
                                     "previous configuration: %s; nothing was stopped or signalled" % heartbeat.lost,
                                 lease_lost=heartbeat.lost, touched=False, stopped=[])
            result = reclaim(params, module.run_command, check_mode=module.check_mode, warn=module.warn)
    except ReclaimError as exc:
        exc.result.pop("diff", None)
        if exc.exception:
            exc.result["exception"] = exc.exception
        module.fail_json(msg=exc.msg, **exc.result)
    try:
        _lease.renew(lease)
    except _lease.LeaseLost as exc:
        heartbeat.lost = heartbeat.lost or str(exc)
    if heartbeat.lost:
        result.pop("diff", None)
        module.fail_json(msg="the lease on the host's guard was lost while the GPUs were reclaimed, the host is being "
                             "restored to its previous configuration: %s" % heartbeat.lost,
                         lease_lost=heartbeat.lost, **result)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
