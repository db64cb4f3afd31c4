#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: switch_lock
short_description: Take, renew or release the per-host switch lock, with an honest owner and a deadline
version_added: 0.2.0
description:
  - One switch (or deploy, reclaim, rollback, baseline, nightly run) per host at a time. O(state=locked) creates
    the lock directory O(path) atomically (C(mkdir)) and writes its owner into C(owner) in it, one JSON
    document with run id, controller host, user, pid, AWX job id, label, start and deadline.
  - A lock held by a live run is never taken. The module fails at once (O(wait=0)) or after waiting
    O(wait) seconds, naming the owner.
  - A lock whose run is dead (its deadline passed, or the host's guard ended that run, see
    M(llmops.specdec.switch_guard)) is reported with its owner and taken over only with O(takeover=true).
  - O(state=renewed) moves the deadline of a lock this run holds; the guard renews the lock together with
    its own deadline, so a run armed with a guard need not renew the lock itself.
  - O(state=unlocked) releases the lock only when O(run_id) owns it; another run's lock is left alone,
    with a warning.
  - Every operation runs under an exclusive C(flock) of C(PATH.flock), so two takeovers, or a takeover and
    a release, can never both act on the same lock.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
attributes:
  check_mode:
    support: full
    details:
      - Says whether the lock would be taken, taken over or released; fails as the real run would when it
        is held. Creates and writes nothing.
  diff_mode:
    support: full
    details:
      - The owner before and after.
  idempotent:
    support: full
    details:
      - Taking a lock this run already holds, or releasing one that is not held, reports C(changed=false).
        O(state=renewed) always moves the deadline and reports C(changed=true).
options:
  state:
    description:
      - C(locked) takes the lock, C(renewed) moves its deadline to now + O(ttl), C(unlocked) releases it.
    type: str
    choices: [locked, renewed, unlocked]
    default: locked
  path:
    description:
      - The lock directory. Under C(/run), so a reboot clears a lock left by a dead run.
    type: path
    default: /run/llmops-specdec.lock
  run_id:
    description:
      - Identifies this run (one per playbook run and host); the same id arms the guard, so the guard can
        release or annotate the lock.
    type: str
    required: true
  owner:
    description:
      - Who takes the lock, written into the owner document. Pass what the controller knows.
    type: dict
    default: {}
    suboptions:
      controller:
        description: The controller's host name (in AWX, the execution node or pod).
        type: str
      user:
        description: The user running the playbook (in AWX, the user who launched the job).
        type: str
      pid:
        description: The C(ansible-playbook) process id on the controller.
        type: int
      awx_job_id:
        description: The AWX job id (C(awx_job_id) / C(tower_job_id)), when the run is an AWX job.
        type: str
      label:
        description: What the run does, for example C(switch ngram k=4) or C(nightly baseline).
        type: str
  ttl:
    description:
      - Seconds from now until the lock counts as dead (O(state=locked) and O(state=renewed)).
      - Make it longer than the work between renewals; a run armed with the guard gets the lock renewed
        with every guard renewal.
    type: float
    default: 3600
  wait:
    description:
      - Seconds to wait for a live lock to be released before failing. C(0) fails at once.
      - A dead lock is not waited for; it fails at once unless O(takeover=true).
    type: float
    default: 0
  takeover:
    description:
      - Take over a lock whose run is dead (deadline passed, or ended by the guard). The old owner is
        returned in RV(previous) and kept in the new owner document (C(took_over)). A live lock is never
        taken over.
    type: bool
    default: false
  directories:
    description:
      - Directories to create (mode C(0755)) before the lock is taken, in the same round trip, for example
        the state directory's C(baselines), C(previous) and C(snapshot).
    type: list
    elements: path
    default: []
notes:
  - Runs as root on the host. Stdlib only.
seealso:
  - module: llmops.specdec.switch_guard
  - name: The switch guard and the lock
    description: docs/guard.md in this collection.
    link: https://example.invalid/llmops/specdec/docs/guard.md
"""

EXAMPLES = r"""
- name: Take the host's switch lock (fail at once if another switch holds it)
  llmops.specdec.switch_lock:
    run_id: "{{ switch_run_id }}"
    owner:
      controller: "{{ lookup('ansible.builtin.pipe', 'hostname') }}"
      user: "{{ awx_user_name | default(lookup('ansible.builtin.env', 'USER')) }}"
      awx_job_id: "{{ awx_job_id | default(omit) }}"
      label: "switch {{ switch_label }}"
    ttl: 900
    directories:
      - /var/lib/llmops-specdec/baselines
      - /var/lib/llmops-specdec/snapshot

- name: Take over a lock left by a dead run (its deadline passed)
  llmops.specdec.switch_lock:
    run_id: "{{ switch_run_id }}"
    takeover: true

- name: Release the lock (only if this run holds it)
  llmops.specdec.switch_lock:
    run_id: "{{ switch_run_id }}"
    state: unlocked
"""

RETURN = r"""
lock:
  description: The owner document of the lock as it is now (V(null) once released).
  returned: always
  type: dict
  sample:
    run_id: 20261201T091200Z-4711
    controller: awx-task-7f9c
    user: ops
    pid: 31337
    awx_job_id: "1234"
    label: switch ngram k=4
    host: gpu-node-3
    started: "2026-12-01T09:12:00.123000Z"
    deadline: 1796116320.123
    deadline_at: "2026-12-01T09:27:00.123000Z"
previous:
  description: The owner document of a dead lock that was taken over, or of the lock that was released.
  returned: always
  type: dict
holder:
  description: On failure, the owner document of the run that holds the lock.
  returned: failure
  type: dict
dead:
  description: On failure, why the holding run counts as dead (V(null) when it is alive).
  returned: failure
  type: str
waited:
  description: Seconds spent waiting for the lock.
  returned: when O(state=locked)
  type: float
msg:
  description: What happened, naming the lock and its owner.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["locked", "renewed", "unlocked"], default="locked"),
            path=dict(type="path", default="/run/llmops-specdec.lock"),
            run_id=dict(type="str", required=True),
            owner=dict(type="dict", default={}, options=dict(
                controller=dict(type="str"),
                user=dict(type="str"),
                pid=dict(type="int"),
                awx_job_id=dict(type="str"),
                label=dict(type="str"),
            )),
            ttl=dict(type="float", default=3600),
            wait=dict(type="float", default=0),
            takeover=dict(type="bool", default=False),
            directories=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"].rstrip("/") or "/"
    before = _lock.read_owner(path)
    try:
        if p["state"] == "locked":
            res = _lock.acquire(path, p["run_id"], p["owner"], ttl=p["ttl"], wait=p["wait"], takeover=p["takeover"],
                                directories=p["directories"], check_mode=module.check_mode)
            result = {"changed": res["changed"], "lock": res["lock"], "previous": res["previous"],
                      "waited": res["waited"], "msg": res["msg"]}
        elif p["state"] == "renewed":
            if module.check_mode:
                current = before or {}
                if current.get("run_id") != p["run_id"]:
                    raise _lock.LockError("%s is not held by run %s (%s)" % (path, p["run_id"], _lock.describe(before)),
                                          before)
                owner = current
            else:
                owner = _lock.renew(path, p["run_id"], p["ttl"])
            result = {"changed": True, "lock": owner, "previous": before,
                      "msg": "%s renewed until %s" % (path, _lock.iso(owner.get("deadline")))}
        else:
            res = _lock.release(path, p["run_id"], check_mode=module.check_mode)
            if res.get("foreign"):
                module.warn(res["msg"])
            result = {"changed": res["changed"], "lock": res["owner"] if not res["changed"] else None,
                      "previous": res["owner"], "msg": res["msg"]}
    except _lock.LockError as exc:
        module.fail_json(msg=exc.msg, holder=exc.owner, dead=exc.dead, lock=before)
    except OSError as exc:
        module.fail_json(msg="lock %s: %s" % (path, exc), lock=_lock.read_owner(path))
    if module._diff:
        result["diff"] = {"before": before or {}, "after": result["lock"] or {}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
