#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: switch_record
short_description: Write what a switch leaves on the host, its history, its textfile and a kept baseline, in one call
version_added: 0.2.0
description:
  - Appends O(record) to C(history.jsonl) in O(state_dir) (0600), one JSON document per line.
  - Writes node_exporter's C(llmops_specdec.prom) (0644, atomically) from O(record) when O(textfile_dir) is a
    directory; without one (node_exporter not installed) it writes none and creates no directory.
  - With O(kept), makes the kept candidate the baseline. The unit and the baseline it replaced are copied to
    C(previous/) (for C(playbooks/rollback.yml)) and the replaced unit is archived in C(kept/) with its SHA-256
    (the newest O(kept.archive_keep) stay). The acceptance measured now goes to C(acceptance/KEY.json), and
    the candidate's figures are stored last as C(baselines/KEY.json), so a failure part-way leaves the old
    baseline in place. The SHA-256 of O(kept.unit_path) joins the baseline's settings.
  - With O(release_lock), then releases the switch lock this run holds, as M(llmops.specdec.switch_lock) with
    O(llmops.specdec.switch_lock#module:state=unlocked) does; the record is the run's last step on the host.
    When writing the record fails, the lock is left to the caller's own release.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
options:
  state_dir:
    description: The switch's state directory on the host (C(spec_switch_state_dir)); it exists (the lock made it).
    type: path
    required: true
  record:
    description: The switch's outcome record (C(spec_switch_record)).
    type: dict
    required: true
  textfile_dir:
    description: node_exporter's textfile collector directory; empty, or a directory that does not exist, writes no C(.prom).
    type: path
    default: ""
  kept:
    description: The kept candidate, to make it the baseline; omit when the candidate was not kept.
    type: dict
    suboptions:
      unit:
        description: The systemd unit.
        type: str
        required: true
      unit_path:
        description: The unit file that runs now (the kept candidate's).
        type: path
        required: true
      replaced_unit:
        description: Whether a unit ran before the switch (its verified snapshot is in C(snapshot/UNIT)).
        type: bool
        required: true
      baseline_key:
        description: The name of this host's baseline for its engine, model and suite.
        type: str
        required: true
      baseline:
        description: The candidate's measurement, stored as the new baseline (its settings are replaced by O(kept.settings)).
        type: dict
        required: true
      settings:
        description: The settings the baseline was measured with; C(unit_sha256) is added.
        type: dict
        required: true
      acceptance:
        description: The acceptance measured now, with C(kept_at), C(label) and C(spec).
        type: dict
        default: {}
      archive_keep:
        description: How many replaced configurations stay in C(kept/).
        type: int
        default: 5
  release_lock:
    description: The switch lock to release once the record is written; omit while the host's guard owns the lock.
    type: dict
    suboptions:
      path:
        description: The lock (C(spec_switch_lock_path)).
        type: path
        required: true
      run_id:
        description: This run's id; a lock another run holds is left alone.
        type: str
        required: true
attributes:
  check_mode:
    support: full
    details: Writes nothing; reports C(changed=true), since every switch appends its record.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Each run appends one line to the history.
"""

EXAMPLES = r"""
- name: Record the outcome on the host
  llmops.specdec.switch_record:
    state_dir: /var/lib/llmops-specdec
    record: "{{ spec_switch_record }}"
    textfile_dir: /var/lib/node_exporter/textfile_collector
    release_lock:
      path: /run/llmops-specdec.lock
      run_id: 20261202T101500Z-k3j9x2a1
"""

RETURN = r"""
written:
  description: The files this call wrote or appended to.
  returned: always
  type: list
  elements: str
textfile:
  description: The C(.prom) file, or null when O(textfile_dir) is not a directory.
  returned: always
  type: str
lock:
  description:
    - For O(release_lock), what the release did (C(changed), C(owner), C(msg), and C(foreign) for a lock another run
      holds); null otherwise.
  returned: always
  type: dict
kept:
  description:
    - For O(kept), C(unit_sha256) (of O(kept.unit_path)) and C(archived) (C(path), C(sha256), C(pruned), C(changed), or
      null when no unit was replaced); null otherwise.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _lock, _record


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_dir=dict(type="path", required=True),
            record=dict(type="dict", required=True),
            textfile_dir=dict(type="path", default=""),
            kept=dict(type="dict", options=dict(
                unit=dict(type="str", required=True),
                unit_path=dict(type="path", required=True),
                replaced_unit=dict(type="bool", required=True),
                baseline_key=dict(type="str", required=True, no_log=False),
                baseline=dict(type="dict", required=True),
                settings=dict(type="dict", required=True),
                acceptance=dict(type="dict", default={}),
                archive_keep=dict(type="int", default=5),
            )),
            release_lock=dict(type="dict", options=dict(
                path=dict(type="path", required=True),
                run_id=dict(type="str", required=True),
            )),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["kept"] and p["kept"]["archive_keep"] < 1:
        module.fail_json(msg="kept.archive_keep must be at least 1; nothing was written")
    if not os.path.isdir(p["state_dir"]):
        module.fail_json(msg="the state directory %s does not exist; nothing was written" % p["state_dir"])
    if module.check_mode:
        module.exit_json(changed=True, written=[], textfile=None, kept=None, lock=None)
    try:
        out = _record.write(p["state_dir"], p["record"], p["textfile_dir"], p["kept"])
    except _record.RecordError as exc:
        module.fail_json(msg=str(exc), lock=None)
    out["lock"] = None
    if p["release_lock"]:
        try:
            out["lock"] = _lock.release(p["release_lock"]["path"], p["release_lock"]["run_id"])
        except (OSError, _lock.LockError) as exc:
            module.fail_json(msg="the record was written, but releasing %s failed: %s" % (p["release_lock"]["path"], exc), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
