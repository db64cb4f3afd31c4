#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: switch_guard
short_description: Commit-confirmed switches - the host restores the previous unit unless the controller confirms
version_added: 0.2.0
description:
  - Before anything may stop production, O(state=armed) writes the guard's state file
    C(STATE_DIR/guard/UNIT_STEM.json) (root C(0600), directory C(0700), atomic) and starts a watcher as the
    transient systemd unit C(llmops-specdec-guard-UNIT_STEM.service). The watcher runs in its own cgroup, so
    it outlives the controller, its SSH connection and its AWX job.
  - Unless the controller renews (O(state=renewed)) or confirms (O(state=confirmed)) before the deadline,
    the watcher restores the previous configuration by itself. It checks the snapshot's sha256 (a mismatch
    changes nothing and is recorded), stops the unit and frees its GPUs with the rules of
    M(llmops.specdec.gpu_reclaim) (O(reclaim)), puts the previous unit file back (or removes the candidate
    when there was none, O(snapshot=absent)) and the O(baseline_files), runs C(daemon-reload) and
    C(reset-failed), starts the unit and waits until it answers (O(ready_url)). It then appends a
    C(restored_by_guard) record with its times to O(history), releases the lock O(lock_path) and removes
    the state file.
    A restore that does not end with the service answering is recorded as C(guard_restore_failed); the lock
    is kept with a note (M(llmops.specdec.switch_lock) then reports it dead).
  - A reboot mid-switch boots the previous configuration. The module installs and enables
    C(llmops-specdec-guard-boot@.service), ordered before the unit and conditioned on the state file. At boot
    it puts the files back before the unit starts and queues the start.
  - The guard's code on the host is this collection's own module_utils, written by the module from its
    own payload under O(lib_dir), and only when the content changed. It needs the standard library, and
    pynvml for the GPU reclaim.
  - O(state=status) reports whether a guard is armed, its deadline and owner, the watcher's state and the
    last guard record in the history.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
attributes:
  check_mode:
    support: full
    details:
      - O(state=armed) reports whether the guard's code, boot unit or state file would be written and the
        watcher started; O(state=confirmed) whether a guard would be disarmed. Nothing is written or started.
  diff_mode:
    support: full
    details:
      - The guard's run id, phase, deadline and restore source, before and after.
  idempotent:
    support: partial
    details:
      - O(state=confirmed) on a guard that is not armed and O(state=status) report C(changed=false).
      - O(state=armed) and O(state=renewed) move the deadline, which is a change on the host, so they
        report C(changed=true).
options:
  state:
    description:
      - C(armed) arms (or, with the same O(run_id), re-arms) the guard. C(renewed) moves the deadline to
        now + O(ttl). C(confirmed) disarms it. C(status) only reads.
      - C(following), for a worker node of a serving group before its head is confirmed, moves the deadline to
        now + O(ttl) and records the unit's main PID and restart count. At that deadline the guard keeps what runs
        when the unit still runs under the same main process, never restarted (its engine stayed joined to a head
        that was confirmed), and restores otherwise (the head was restored, which took the group down). At boot it
        restores.
      - C(renewed) fails when the guard belongs to another run, was confirmed, or is restoring or restored.
      - C(confirmed) fails when the guard already restored the previous configuration for this run, or is
        restoring it. The result then has RV(restored) and RV(last_record), so the play can skip its own
        rollback.
    type: str
    required: true
    choices: [armed, renewed, following, confirmed, status]
  unit:
    description:
      - The service unit under switch, for example C(vllm-server.service). Templates and instances
        (C(name@.service)) are not supported.
    type: str
    required: true
  run_id:
    description:
      - The run's id. The lock must be taken with the same id. Required for C(armed), C(renewed), C(following)
        and, unless O(force=true), C(confirmed).
    type: str
  state_dir:
    description:
      - The switch's state directory on the host. The guard's state lives in its C(guard/) subdirectory.
    type: path
    default: /var/lib/llmops-specdec
  ttl:
    description:
      - Seconds from now until the deadline (C(armed), C(renewed)). Renew before each long step with a ttl
        that covers it (a 30-minute load), or renew often with a short one from the waiting task.
    type: float
    default: 900
  unit_path:
    description:
      - The unit file the guard restores (C(armed)).
    type: path
  snapshot:
    description:
      - The copy of the unit file as it was before the switch (C(armed)). Its sha256 is taken when the
        guard is armed and checked again before the restore.
      - C(absent) when there was no unit before. The restore then removes the candidate unit file and
        disables it.
    type: str
  snapshot_checksum:
    description:
      - The sha256 the snapshot must have. When given, the guard is not armed if the snapshot differs.
    type: str
  baseline_files:
    description:
      - Files put back by the restore, for example the copy of C(baselines/KEY.json) taken before a kept
        candidate overwrote it. Each O(baseline_files[].src) must exist when the guard is armed; its sha256
        is checked again before the restore.
    type: list
    elements: dict
    default: []
    suboptions:
      src:
        description: The saved copy.
        type: path
        required: true
      dest:
        description: Where the restore puts it.
        type: path
        required: true
      checksum:
        description: The sha256 O(baseline_files[].src) must have now.
        type: str
      take:
        description:
          - Copy O(baseline_files[].dest) to O(baseline_files[].src) (0600) when the guard is armed, so the restore puts
            back the file as it was before the switch. Without a O(baseline_files[].dest) yet, the item is left out
            (there is nothing to put back).
        type: bool
        default: false
  ready_url:
    description:
      - Base URL the restored service answers on, probed from the host. vLLM is ready when C(GET /health)
        answers 200 and, when O(model) is set, C(/v1/models) lists it. SGLang is ready when
        C(GET /health_generate) answers 200.
      - Without it, "ready" means the unit is C(active).
    type: str
  engine:
    description:
      - The engine that answers O(ready_url).
    type: str
    choices: [vllm, sglang]
    default: vllm
  model:
    description:
      - A model name C(/v1/models) must list (vLLM only).
    type: str
  api_key_file:
    description:
      - A file on the host holding the API key that the readiness probe sends. The file is either an
        environment file (C(NAME=value) lines; see O(api_key_var)) or a file holding only the key.
        The key itself never goes into the state file.
    type: path
  api_key_var:
    description:
      - The variable in O(api_key_file) that holds the key.
      - Default is the engine's own (its adapter's), the variable the P(llmops.specdec.spec_server#role) role writes.
    type: str
  ready_timeout:
    description:
      - Seconds the restore waits for the service to answer (a large model loads for 30 minutes).
    type: float
    default: 1800
  reclaim:
    description:
      - How the restore frees the GPUs. These are the options of M(llmops.specdec.gpu_reclaim), passed
        through unchanged. Leave out an option to get that module's default.
    type: dict
    default: {}
    suboptions:
      units:
        description: Units to stop first; empty means O(unit).
        type: list
        elements: str
      gpus:
        description: GPUs to free (indices or UUIDs; C(all)).
        type: list
        elements: str
      scope:
        description: Which holders may be signalled.
        type: str
        choices: [unit, gpu]
      protect:
        description: Process names never signalled.
        type: list
        elements: str
      allow_uids:
        description: Users whose processes count as the service's.
        type: list
        elements: str
      allow_cgroups:
        description: Cgroup prefixes whose processes count as the service's.
        type: list
        elements: str
      allow_units:
        description: Units whose processes count as the service's.
        type: list
        elements: str
      keep_units:
        description: Units never stopped nor signalled, their memory out of what must be freed.
        type: list
        elements: str
      stop_timeout:
        description: Seconds to wait for each unit to stop.
        type: float
      term_timeout:
        description: Seconds between SIGTERM and SIGKILL.
        type: float
      verify_timeout:
        description: Seconds to wait for the GPUs to be free.
        type: float
      max_used_mib:
        description: Used MiB per GPU still counted as free.
        type: int
  lock_path:
    description:
      - The switch lock. The guard moves its deadline with its own. After a restore it releases the lock
        if O(run_id) holds it; after a failed restore it adds a note that makes the lock count as dead.
    type: path
    default: /run/llmops-specdec.lock
  history:
    description:
      - The host's history (JSON lines) that the restore appends to. Defaults to
        C(STATE_DIR/history.jsonl).
    type: path
  owner:
    description:
      - Who armed the guard; copied into the state and into the guard's history record.
    type: dict
    default: {}
    suboptions:
      controller:
        description: The controller's host name.
        type: str
      user:
        description: The user running the playbook.
        type: str
      pid:
        description: The C(ansible-playbook) process id.
        type: int
      awx_job_id:
        description: The AWX job id, when there is one.
        type: str
      label:
        description: What the run does (the candidate's label).
        type: str
  force:
    description:
      - With O(state=confirmed), disarm a guard armed by another run (whose run is known to be dead).
    type: bool
    default: false
  lib_dir:
    description:
      - Where the guard's code is installed on the host (root-owned, C(0755) directories, C(0644) files).
    type: path
    default: /usr/local/lib/llmops-specdec
  python:
    description:
      - The Python that runs the watcher and the boot unit. Defaults to the interpreter running this module.
    type: path
  poll_interval:
    description:
      - Seconds between the watcher's looks at the state file (and between readiness probes while it
        restores).
    type: float
    default: 1.0
  park:
    description:
      - The switch parked the baseline (M(llmops.specdec.engine_park)) and runs the candidate as this second
        unit beside it. A restore then stops this unit with O(unit) kept, removes its files, wakes O(unit)
        and waits until it answers; when the wake-up fails or it does not answer, the restore goes on as
        without parking (stop, put back, start). See docs/park.md.
    type: dict
    suboptions:
      unit:
        description: The candidate's unit (C(NAME.service)), other than O(unit).
        type: str
        required: true
      unit_path:
        description: The candidate's unit file, removed by the restore.
        type: path
        required: true
      env_file:
        description: The candidate's secrets file, removed by the restore.
        type: path
      wake_timeout:
        description: Seconds the wake-up request may take (the weights come back from CPU memory).
        type: float
        default: 300
requirements:
  - systemd (C(systemd-run), C(systemctl)) on the host; root.
  - nvidia-ml-py (module C(pynvml)) for the GPU reclaim of a restore.
notes:
  - The deadline is wall-clock time (epoch seconds); a large clock step on the host moves it.
  - The lock (M(llmops.specdec.switch_lock)) and the guard must use the same O(run_id).
seealso:
  - module: llmops.specdec.switch_lock
  - module: llmops.specdec.gpu_reclaim
  - name: The switch guard
    description: docs/guard.md in this collection.
    link: https://example.invalid/llmops/specdec/docs/guard.md
"""

EXAMPLES = r"""
- name: Arm the guard before the reclaim may stop production
  llmops.specdec.switch_guard:
    state: armed
    unit: vllm-server.service
    unit_path: /etc/systemd/system/vllm-server.service
    snapshot: /var/lib/llmops-specdec/snapshot/vllm-server.service
    run_id: "{{ switch_run_id }}"
    ttl: 600
    ready_url: http://127.0.0.1:8000
    engine: vllm
    reclaim:
      scope: gpu
      verify_timeout: 60
    owner:
      controller: "{{ lookup('ansible.builtin.pipe', 'hostname') }}"
      awx_job_id: "{{ awx_job_id | default(omit) }}"
      label: ngram k=4

- name: Renew before the candidate's 30-minute load
  llmops.specdec.switch_guard:
    state: renewed
    unit: vllm-server.service
    run_id: "{{ switch_run_id }}"
    ttl: 2100

- name: On a serving group's worker node, follow the head before the head is confirmed
  llmops.specdec.switch_guard:
    state: following
    unit: vllm-server.service
    run_id: "{{ switch_run_id }}"
    ttl: 300

- name: Confirm once the kept candidate is the baseline (or the rollback is healthy)
  llmops.specdec.switch_guard:
    state: confirmed
    unit: vllm-server.service
    run_id: "{{ switch_run_id }}"

- name: Is a guard armed on this host?
  llmops.specdec.switch_guard:
    state: status
    unit: vllm-server.service
  register: guard
"""

RETURN = r"""
armed:
  description: Whether a guard is armed for O(unit) now (after the task).
  returned: always
  type: bool
  sample: true
restored:
  description: Whether the guard already restored (or tried to restore) the previous configuration for this run.
  returned: always
  type: bool
  sample: false
guard:
  description: The guard's state document (run id, owner, unit, restore source and sha256, baseline files,
    readiness, reclaim options, lock, history, deadline); V(null) when none is armed.
  returned: always
  type: dict
  sample:
    run_id: 20261201T091200Z-4711
    phase: armed
    unit: vllm-server.service
    restore: {source: /var/lib/llmops-specdec/snapshot/vllm-server.service, sha256: 9f86d0..., size: 1210}
    deadline: 1796116320.5
    deadline_at: "2026-12-01T09:22:00.500000Z"
deadline:
  description: The deadline in epoch seconds; V(null) when no guard is armed.
  returned: always
  type: float
deadline_at:
  description: The deadline as UTC ISO 8601.
  returned: always
  type: str
  sample: "2026-12-01T09:22:00.500000Z"
remaining:
  description: Seconds until the deadline (negative once it passed).
  returned: always
  type: float
  sample: 599.9
statefile:
  description: The guard's state file on the host.
  returned: always
  type: str
  sample: /var/lib/llmops-specdec/guard/vllm-server.json
watcher:
  description: The watcher unit (C(unit)), its C(active_state), C(sub_state), C(result), whether it is C(active),
    and C(started) when this task started it.
  returned: always
  type: dict
  sample: {unit: llmops-specdec-guard-vllm-server.service, active_state: active, active: true}
boot_unit:
  description: The boot instance (C(name)), whether it is C(enabled), and the template path when this task
    C(written) it.
  returned: always
  type: dict
library:
  description: With O(state=armed), C(dir) and the files C(written) (empty when the code on the host was current).
  returned: when O(state=armed)
  type: dict
last_record:
  description: The newest guard record (C(restored_by_guard), C(guard_restore_failed), or C(kept_with_group) for a
    serving group's worker that followed its confirmed head) for O(unit) in the history, with C(why), C(deadline),
    C(fault_at), C(restored_at), C(ready_at), C(seconds_deadline_to_ready).
  returned: always
  type: dict
lock_renewed:
  description: With O(state=renewed), whether the lock's deadline moved too (this run holds the lock).
  returned: when O(state=renewed)
  type: bool
msg:
  description: What happened.
  returned: always
  type: str
"""

import sys
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _guard_lease, _guard_state, _systemd

OWNER_OPTIONS = dict(controller=dict(type="str"), user=dict(type="str"), pid=dict(type="int"),
                     awx_job_id=dict(type="str"), label=dict(type="str"))
RECLAIM_OPTIONS = dict(
    units=dict(type="list", elements="str"), gpus=dict(type="list", elements="str"),
    scope=dict(type="str", choices=["unit", "gpu"]), protect=dict(type="list", elements="str"),
    allow_uids=dict(type="list", elements="str"), allow_cgroups=dict(type="list", elements="str"),
    allow_units=dict(type="list", elements="str"), keep_units=dict(type="list", elements="str"),
    stop_timeout=dict(type="float"),
    term_timeout=dict(type="float"), verify_timeout=dict(type="float"), max_used_mib=dict(type="int"))


def _view(statefile, state, history, unit, run_id):
    deadline = (state or {}).get("deadline")
    rec = _guard_state.last_record(history, unit)
    return {"statefile": statefile, "guard": state, "armed": bool(state) and state.get("phase") == _guard_state.PHASE_ARMED,
            "deadline": deadline, "deadline_at": _guard_state.iso(deadline) if deadline else None,
            "remaining": round(deadline - time.time(), 1) if deadline else None,
            "last_record": rec, "restored": bool(rec and run_id and rec.get("run_id") == run_id
                                                 and rec.get("outcome") != _guard_state.OUTCOME_FOLLOWED)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["armed", "renewed", "following", "confirmed", "status"]),
            unit=dict(type="str", required=True),
            run_id=dict(type="str"),
            state_dir=dict(type="path", default="/var/lib/llmops-specdec"),
            ttl=dict(type="float", default=900),
            unit_path=dict(type="path"),
            snapshot=dict(type="str"),
            snapshot_checksum=dict(type="str"),
            baseline_files=dict(type="list", elements="dict", default=[], options=dict(
                src=dict(type="path", required=True), dest=dict(type="path", required=True),
                checksum=dict(type="str"), take=dict(type="bool", default=False))),
            ready_url=dict(type="str"),
            engine=dict(type="str", choices=list(_engine.NAMES), default=_engine.DEFAULT),
            model=dict(type="str"),
            api_key_file=dict(type="path"),
            api_key_var=dict(type="str", no_log=False),
            ready_timeout=dict(type="float", default=1800),
            reclaim=dict(type="dict", default={}, options=RECLAIM_OPTIONS),
            lock_path=dict(type="path", default="/run/llmops-specdec.lock"),
            history=dict(type="path"),
            owner=dict(type="dict", default={}, options=OWNER_OPTIONS),
            force=dict(type="bool", default=False),
            lib_dir=dict(type="path", default=_guard_lease.LIB_DIR),
            python=dict(type="path"),
            poll_interval=dict(type="float", default=1.0),
            park=dict(type="dict", options=dict(
                unit=dict(type="str", required=True), unit_path=dict(type="path", required=True),
                env_file=dict(type="path"), wake_timeout=dict(type="float", default=300))),
        ),
        required_if=[("state", "armed", ("run_id", "unit_path", "snapshot")),
                     ("state", "renewed", ("run_id",)), ("state", "following", ("run_id",))],
        supports_check_mode=True,
    )
    p = dict(module.params)
    p["python"] = p["python"] or sys.executable
    p["history"] = p["history"] or "%s/history.jsonl" % p["state_dir"].rstrip("/")
    unit, run_id, state = p["unit"], p["run_id"], p["state"]
    try:
        statefile = _guard_state.state_path(p["state_dir"], unit)
        before = _guard_state.read_state(statefile)
        extra = {}
        if state in ("armed", "renewed", "following") and p["ttl"] <= 0:
            module.fail_json(msg="ttl must be > 0, got %s; nothing was changed" % p["ttl"])
        if state == "confirmed" and not run_id and not p["force"]:
            module.fail_json(msg="state=confirmed needs run_id (or force=true to disarm any run's guard)")
        if state == "armed":
            res = _guard_lease.arm(p, module.run_command, check_mode=module.check_mode,
                                   systemd_run=module.get_bin_path("systemd-run", required=True))
            changed = res["changed"]
            after = res["guard"]
            extra = {"library": res["library"], "boot_unit": res["boot_unit"], "watcher": res["watcher"]}
            msg = "guard armed for %s (run %s) until %s" % (unit, run_id, res["guard"]["deadline_at"])
        elif state == "renewed":
            if module.check_mode:
                after, changed, lock_renewed = before, True, None
                if not before or before.get("run_id") != run_id or before.get("phase") != _guard_state.PHASE_ARMED:
                    raise _guard_state.GuardError("no guard of run %s is armed for %s (%s)"
                                                  % (run_id, unit, _guard_state.summary(before) or "none"), state=before)
            else:
                after = _guard_state.renew(statefile, run_id, p["ttl"])
                lock_renewed = after.pop("lock_renewed")
                changed = True
            extra = {"lock_renewed": lock_renewed}
            watcher = _guard_lease.watcher_state(module.run_command, unit)
            if not watcher["active"] and not module.check_mode:
                module.warn("the guard's watcher %s was not running (%s); starting it again"
                            % (watcher["unit"], watcher["active_state"] or "not loaded"))
                _guard_lease.start_watcher(module.run_command, unit, statefile, after.get("lib_dir") or p["lib_dir"],
                                           after.get("python") or p["python"], after["timings"]["poll"], run_id,
                                           module.get_bin_path("systemd-run", required=True))
            msg = "guard for %s renewed until %s" % (unit, after["deadline_at"])
        elif state == "following":
            if module.check_mode:
                after, changed = before, True
                if not before or before.get("run_id") != run_id or before.get("phase") != _guard_state.PHASE_ARMED:
                    raise _guard_state.GuardError("no guard of run %s is armed for %s (%s)"
                                                  % (run_id, unit, _guard_state.summary(before) or "none"), state=before)
            else:
                shown = _systemd.show(module.run_command, unit, ["MainPID", "NRestarts"])
                after = _guard_state.follow(statefile, run_id, p["ttl"], {
                    "unit": unit, "main_pid": shown.get("MainPID") or 0, "n_restarts": shown.get("NRestarts") or 0})
                after.pop("lock_renewed")
                changed = True
            msg = "guard for %s follows its group's head until %s" % (unit, after["deadline_at"])
        elif state == "confirmed":
            res = _guard_lease.confirm(statefile, run_id, module.run_command, force=p["force"], history=p["history"],
                                       unit=unit, check_mode=module.check_mode)
            changed = res["changed"]
            after = before if module.check_mode else _guard_state.read_state(statefile)
            msg = ("guard for %s confirmed (run %s): disarmed" % (unit, run_id)) if changed else \
                "no guard is armed for %s" % unit
        else:
            info = _guard_lease.status(p["state_dir"], unit, module.run_command, p["history"])
            changed, after = False, info["guard"]
            extra = {"watcher": info["watcher"], "boot_unit": info["boot_unit"]}
            msg = ("guard armed for %s by run %s until %s" % (unit, after["run_id"], after["deadline_at"])) \
                if info["armed"] else "no guard is armed for %s%s" % (
                    unit, " (phase %s)" % info["phase"] if info["phase"] else "")
    except _guard_state.GuardError as exc:
        view = {}
        try:
            statefile = _guard_state.state_path(p["state_dir"], unit)
            view = _view(statefile, _guard_state.read_state(statefile), p["history"], unit, run_id)
        except _guard_state.GuardError:
            pass
        if exc.record:
            view.update(last_record=exc.record, restored=True)
        module.fail_json(msg=exc.msg, **view)
    except (OSError, _systemd.SystemdError) as exc:
        module.fail_json(msg="switch_guard %s for %s: %s" % (state, unit, exc))
    result = _view(statefile, after, p["history"], unit, run_id)
    result.update(extra, changed=changed, msg=msg)
    result.setdefault("watcher", _guard_lease.watcher_state(module.run_command, unit))
    result.setdefault("boot_unit", {"name": _guard_lease.boot_instance(unit)})
    if module._diff:
        result["diff"] = {"before": _guard_state.summary(before), "after": _guard_state.summary(after)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
