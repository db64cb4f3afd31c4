#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spec_unit
short_description: Check that systemd loads the unit the role manages, snapshot, install or restore it
version_added: 0.2.0
description:
  - Reads C(systemctl show) (C(LoadState), C(FragmentPath), C(DropInPaths), C(ActiveState)) and the drop-ins of
    O(name), and fails before anything is stopped when the unit is loaded from another file than O(path) (a unit
    shipped in C(/lib/systemd/system), a copy in C(/run)) or a drop-in sets C(ExecStart=), which would silently
    replace every candidate's command.
  - With O(snapshot), copies O(path) there (mode 0600, atomically), checks the copy's SHA-256 against the unit and
    that C(systemd-analyze verify) reads it, and fails when either check fails. A snapshot is never written while
    O(unfinished) exists (the guard of a run that did not finish still restores from it).
  - One call for what the switch reads before it touches the host, with the state files of O(read).
  - With O(restore), the rollback instead, in one call (the one restore that the host's guard runs when the
    controller is lost, docs/guard.md, from the same inputs). It checks the source (a regular file owned by root
    that nobody else can write, with O(restore.sha256) its checksum); with O(restore.reclaim) it stops the unit
    and frees its GPUs (the rules of M(llmops.specdec.gpu_reclaim)); it puts the source back at O(path), clears
    the unit's failed state and start-limit counter, reloads systemd and restarts the unit. With
    O(restore.remove), it removes the candidate's unit instead (there was none before, its links disabled) and
    reloads systemd. Nothing is written when the source check fails.
  - A reclaim that fails does not stop the restore (production is started whatever happens); its error is a
    warning and in the C(warnings) of RV(restored). A lost O(lease) after the reclaim stops it before the files
    (the guard is restoring the host itself).
  - With O(install), the server role's install in one call. It makes the working directory, the secrets file
    (or removes it when the unit has none), SGLang's schedule file and the unit file, each only when it differs.
    When the unit or its secrets changed, it reloads systemd and, with O(install.restart), restarts the unit,
    enables or disables it as O(install.enabled) says, and returns systemd's restart count for the readiness wait.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.lease
options:
  name:
    description: The systemd unit.
    type: str
    required: true
  path:
    description: The unit file the role manages (C(spec_server_unit_path)).
    type: path
    required: true
  snapshot:
    description:
      - Where to keep the verified copy of O(path); omit to only inspect. Without a unit at O(path), an older copy
        there is removed (unless O(unfinished) exists).
    type: path
  unfinished:
    description: A file whose existence means an unfinished run still owns the snapshot (its guard state).
    type: path
  read:
    description:
      - Small state files read in the same call (the stored baseline), returned as text in RV(read) in the same
        order; at most 16 MiB each.
    type: list
    elements: path
    default: []
  expect_archived:
    description:
      - Before a rollback installs O(expect_archived.path), check that its SHA-256 is the newest one in the archive's
        C(MANIFEST.json) (O(expect_archived.dir)); fail when it is not, before anything is stopped.
    type: dict
    suboptions:
      path:
        description: The file a rollback will install.
        type: path
        required: true
      dir:
        description: The archive directory.
        type: path
        required: true
  restore:
    description:
      - Put the previous unit back and restart it (O(restore.src)), or remove the candidate's unit (O(restore.remove)).
        Not with O(snapshot) or O(expect_archived).
    type: dict
    suboptions:
      src:
        description:
          - The file to put back at O(path) (the switch's snapshot, or C(previous/UNIT) of a kept switch). Either this
            or O(restore.remove=true).
        type: path
      remove:
        description: Remove O(path) instead; there was no unit before the switch.
        type: bool
        default: false
      owned_only:
        description:
          - With O(restore.remove), remove O(path) only when the collection wrote it (its first line is
            C(# Managed by llmops.specdec)); another file there is left as it is, without a failure, and
            the C(file) of RV(restored) says V(foreign).
        type: bool
        default: false
      env_file:
        description:
          - With O(restore.remove), a secrets file removed with the unit (the candidate's beside a parked baseline),
            also when the unit file is left as it is (O(restore.owned_only)).
        type: path
      sha256:
        description:
          - The SHA-256 that O(restore.src) must have (the snapshot's, as the guard was armed with it); nothing is
            changed when it differs.
        type: str
      reclaim:
        description:
          - Stop the unit and free its GPUs before the files are put back, as M(llmops.specdec.gpu_reclaim) does
            with these options (scoped to the service's own GPUs and processes; omitted ones take its defaults).
            Omit to leave the unit running until its restart.
        type: dict
        suboptions:
          gpus:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:gpus).
            type: list
            elements: str
          scope:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:scope).
            type: str
            choices: [unit, gpu]
          stop_timeout:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:stop_timeout).
            type: float
          term_timeout:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:term_timeout).
            type: float
          verify_timeout:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:verify_timeout).
            type: float
          allow_uids:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:allow_uids).
            type: list
            elements: str
          allow_cgroups:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:allow_cgroups).
            type: list
            elements: str
          allow_units:
            description: As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:allow_units).
            type: list
            elements: str
          keep_units:
            description:
              - As M(llmops.specdec.gpu_reclaim)'s O(llmops.specdec.gpu_reclaim#module:keep_units) (the parked
                baseline beside the candidate that O(name) is).
            type: list
            elements: str
  install:
    description:
      - Install O(install.text) at O(path) (root, 0644) with the files it reads. Not with O(snapshot), O(restore) or
        O(expect_archived).
    type: dict
    suboptions:
      text:
        description: The unit file's text (the role's rendered unit).
        type: str
        required: true
      working_dir:
        description: The engine's working directory, made with O(install.owner) and O(install.group), mode 0750.
        type: path
      cache_dir:
        description:
          - The engine's compilation cache directory, made with O(install.owner) and O(install.group), mode 0700 (its
            parent, when missing, root's and 0755).
        type: path
      owner:
        description: The user of O(install.working_dir) and O(install.cache_dir).
        type: str
      group:
        description: The group of O(install.working_dir) and O(install.cache_dir).
        type: str
      env_file:
        description:
          - The unit's secrets file (root, 0600, its directory 0700). Written with O(install.env_text), or removed when
            that is empty.
        type: path
      env_text:
        description: The secrets file's text (C(NAME=value) lines). Never logged or returned.
        type: str
        default: ""
      schedule_path:
        description: SGLang's schedule file (root, 0644, its directory 0755); omit when the unit names none.
        type: path
      schedule_text:
        description: The schedule file's text.
        type: str
        default: ""
      restart:
        description: Restart the unit when the unit file or the secrets changed (after the reload).
        type: bool
        default: false
      enabled:
        description: With a restart, enable (V(true)) or disable (V(false)) the unit at boot.
        type: bool
        default: true
      owned_only:
        description:
          - Fail before anything is written when a file is at O(path) that the collection did not write (its first
            line is not C(# Managed by llmops.specdec)). The candidate beside a parked baseline sets it, so that
            its unit never replaces another unit of the same name.
        type: bool
        default: false
attributes:
  check_mode:
    support: full
    details: The snapshot is not written; RV(snapshot) says whether it would change. A restore or an install writes,
      removes and restarts nothing; RV(restored) and RV(installed) say what they would do.
  diff_mode:
    support: partial
    details: An install shows the unit file's and the schedule's changes (never the secrets').
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Check the unit and snapshot it before the switch
  llmops.specdec.spec_unit:
    name: llm-server.service
    path: /etc/systemd/system/llm-server.service
    snapshot: /var/lib/llmops-specdec/snapshot/llm-server.service
    unfinished: /var/lib/llmops-specdec/guard/llm-server.json
  register: unit

- name: Install a unit and restart it when it changed
  llmops.specdec.spec_unit:
    name: llm-server.service
    path: /etc/systemd/system/llm-server.service
    install:
      text: "{{ unit_text }}"
      working_dir: /var/lib/llm
      owner: llm
      group: llm
      env_file: /etc/llmops-specdec/secrets/llm-server.service.env
      env_text: "{{ secrets }}"
      restart: true
  register: installed

- name: Roll back to the snapshot and restart the service
  llmops.specdec.spec_unit:
    name: llm-server.service
    path: /etc/systemd/system/llm-server.service
    restore:
      src: /var/lib/llmops-specdec/snapshot/llm-server.service

- name: Roll back as the guard would, the candidate stopped and its GPUs freed first
  llmops.specdec.spec_unit:
    name: llm-server.service
    path: /etc/systemd/system/llm-server.service
    restore:
      src: /var/lib/llmops-specdec/snapshot/llm-server.service
      sha256: "{{ unit.snapshot.sha256 }}"
      reclaim:
        scope: gpu
        verify_timeout: 30
    lease:
      statefile: /var/lib/llmops-specdec/guard/llm-server.json
      run_id: "{{ run_id }}"
      ttl: 300
  register: restored
"""

RETURN = r"""
exists:
  description: Whether O(path) exists.
  returned: always
  type: bool
sha256:
  description: SHA-256 of O(path); empty when it does not exist.
  returned: always
  type: str
load_state:
  description: systemd's C(LoadState) of the unit (V(loaded), V(not-found)...).
  returned: always
  type: str
active_state:
  description: systemd's C(ActiveState).
  returned: always
  type: str
fragment_path:
  description: The file systemd loads the unit from; empty when it is not loaded.
  returned: always
  type: str
drop_in_paths:
  description: The unit's drop-ins.
  returned: always
  type: list
  elements: str
exec_start_drop_ins:
  description: The drop-ins that set C(ExecStart=) (the module fails when there are any).
  returned: always
  type: list
  elements: str
read:
  description: The text of each file of O(read), in its order; null for a file that does not exist.
  returned: always
  type: list
  elements: str
snapshot:
  description: The verified copy, C(path), C(sha256), C(changed); null without O(snapshot) or without a unit.
  returned: always
  type: dict
restored:
  description: What the restore did.
  returned: when O(restore) is given
  type: dict
  contains:
    file:
      description:
        - V(restored), V(unchanged), V(removed), V(absent), or V(foreign) when the file was not removed because the
          collection did not write it.
      returned: always
      type: str
    started:
      description: Whether the unit was restarted.
      returned: always
      type: bool
    n_restarts:
      description: systemd's C(NRestarts) read after the restart; null without one.
      returned: always
      type: int
    reclaim:
      description:
        - With O(restore.reclaim), what the reclaim did (C(ok), C(error), C(stopped), C(units), C(signalled),
          C(gpus), C(elapsed)), as the guard records it; null without one or in check mode.
      returned: always
      type: dict
    warnings:
      description: Why the restore went on after a step that failed (a reclaim that could not free the GPUs).
      returned: always
      type: list
      elements: str
lease_lost:
  description: Why the lease on the host's guard could not be renewed (the guard restored the host, or another run owns it).
  returned: when O(lease) was given and a renewal failed
  type: str
installed:
  description: What the install did.
  returned: when O(install) is given
  type: dict
  contains:
    files:
      description: Each file and directory the install manages, mapped to whether it changed.
      returned: always
      type: dict
    unit_changed:
      description: Whether the unit file changed.
      returned: always
      type: bool
    reloaded:
      description: Whether systemd was reloaded.
      returned: always
      type: bool
    restarted:
      description: Whether the unit was restarted.
      returned: always
      type: bool
    enabled_changed:
      description: Whether the unit's enablement changed.
      returned: always
      type: bool
    n_restarts:
      description: systemd's C(NRestarts) read after the restart; null without one.
      returned: always
      type: int
  sample: {files: {/var/lib/llm: false, /etc/systemd/system/llm-server.service: true}, unit_changed: true,
           reloaded: true, restarted: true, enabled_changed: false, n_restarts: 0}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _install, _lease, _restore, _unitfile


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            path=dict(type="path", required=True),
            snapshot=dict(type="path"),
            unfinished=dict(type="path"),
            read=dict(type="list", elements="path", default=[]),
            expect_archived=dict(type="dict", options=dict(path=dict(type="path", required=True),
                                                           dir=dict(type="path", required=True))),
            restore=dict(type="dict", options=dict(
                src=dict(type="path"), remove=dict(type="bool", default=False),
                owned_only=dict(type="bool", default=False), sha256=dict(type="str"),
                reclaim=dict(type="dict", options=dict(
                    gpus=dict(type="list", elements="str"), scope=dict(type="str", choices=["unit", "gpu"]),
                    stop_timeout=dict(type="float"), term_timeout=dict(type="float"), verify_timeout=dict(type="float"),
                    allow_uids=dict(type="list", elements="str"), allow_cgroups=dict(type="list", elements="str"),
                    allow_units=dict(type="list", elements="str"), keep_units=dict(type="list", elements="str"))),
                env_file=dict(type="path"))),
            lease=_lease.lease_argspec(),
            install=dict(type="dict", options=dict(
                text=dict(type="str", required=True),
                working_dir=dict(type="path"),
                cache_dir=dict(type="path"),
                owner=dict(type="str"),
                group=dict(type="str"),
                env_file=dict(type="path"),
                env_text=dict(type="str", default="", no_log=True),
                schedule_path=dict(type="path"),
                schedule_text=dict(type="str", default=""),
                restart=dict(type="bool", default=False),
                enabled=dict(type="bool", default=True),
                owned_only=dict(type="bool", default=False),
            ), required_by={"working_dir": ["owner", "group"], "cache_dir": ["owner", "group"]}),
        ),
        mutually_exclusive=[["restore", "snapshot"], ["restore", "expect_archived"], ["install", "restore"],
                            ["install", "snapshot"], ["install", "expect_archived"]],
        supports_check_mode=True,
    )
    p = module.params

    def run(argv):
        return module.run_command(argv)

    if p["restore"]:
        restore(module, run, p)
    if p["install"]:
        install(module, run, p)

    try:
        info = _unitfile.inspect(run, p["name"], p["path"])
    except _unitfile.UnitFileError as exc:
        module.fail_json(msg=str(exc))
    info["sha256"] = _unitfile.sha256_file(p["path"]) if info["exists"] else ""
    info["snapshot"] = None
    try:
        info["read"] = [_unitfile.read_small(path) for path in p["read"]]
    except (_unitfile.UnitFileError, OSError) as exc:
        module.fail_json(msg="%s; nothing was changed." % exc)
    problem = info.pop("problem")
    if problem:
        module.fail_json(msg=problem + "; nothing was changed.", **info)
    changed = False
    want = p["expect_archived"]
    if want:
        newest = _unitfile.newest_archived(want["dir"])
        got = _unitfile.sha256_file(want["path"]) if os.path.isfile(want["path"]) else None
        if newest and got != newest["sha256"]:
            module.fail_json(msg="%s has SHA-256 %s, but the newest kept configuration in %s is %s (%s): refusing to "
                                 "install it; nothing was changed"
                                 % (want["path"], got, want["dir"], newest["sha256"], newest["file"]), **info)
    if p["snapshot"] and info["exists"]:
        if p["unfinished"] and os.path.exists(p["unfinished"]):
            module.fail_json(msg="an unfinished switch still owns %s (its guard state %s exists): it restores from that "
                                 "snapshot, so it is not overwritten; nothing was changed" % (p["snapshot"], p["unfinished"]),
                             **info)
        if module.check_mode:
            same = os.path.isfile(p["snapshot"]) and _unitfile.sha256_file(p["snapshot"]) == info["sha256"]
            info["snapshot"] = {"path": p["snapshot"], "sha256": info["sha256"], "changed": not same}
        else:
            try:
                info["snapshot"] = _unitfile.snapshot(run, p["path"], p["snapshot"])
            except (_unitfile.UnitFileError, OSError) as exc:
                module.fail_json(msg="%s; nothing was changed." % exc, **info)
        changed = changed or info["snapshot"]["changed"]
    elif p["snapshot"] and os.path.lexists(p["snapshot"]) and not (p["unfinished"] and os.path.exists(p["unfinished"])):
        # No unit now: an older snapshot must not be restored over a unit this switch creates.
        if not module.check_mode:
            os.unlink(p["snapshot"])
        changed = True
    module.exit_json(changed=changed, **info)


def restore(module, run, p):
    """The rollback (``_restore``, the guard's restore): no inspection first, a wrong view of the unit must not
    keep production down."""
    want = p["restore"]
    if bool(want["src"]) == want["remove"]:
        module.fail_json(msg="restore needs either src or remove=true; nothing was changed")
    plan = _restore.plan(p["name"], p["path"], want["src"], want["sha256"], want["reclaim"], want["env_file"])
    lease = None if module.check_mode else p["lease"]  # a check stops nothing, so it holds no lease
    # The lease is renewed before anything is stopped (a guard that restored the host already, or another run's,
    # must not see this run stop anything) and while the reclaim runs; lost after it, the files are not touched.
    with _lease.Heartbeat(lease) as heartbeat:
        def lease_lost():
            """Renewed once more after the reclaim: the restart and the readiness wait start with a whole ttl."""
            try:
                _lease.renew(lease)
            except _lease.LeaseLost as exc:
                heartbeat.lost = heartbeat.lost or str(exc)
            return heartbeat.lost

        if heartbeat.lost:
            module.fail_json(msg="the lease on the host's guard was lost, the host is being restored to its previous "
                                 "configuration: %s; nothing was stopped or changed" % heartbeat.lost,
                             lease_lost=heartbeat.lost)
        try:
            done = _restore.restore(plan, run, check_mode=module.check_mode, free=want["reclaim"] is not None,
                                    check_owner=True, owned_only=want["owned_only"], warn=module.warn,
                                    lease_lost=lease_lost)
        except _restore.RestoreError as exc:
            extra = {"lease_lost": heartbeat.lost} if exc.stage == "lease" else {}
            module.fail_json(msg="restoring %s: %s" % (p["path"], exc.msg), restored=exc.result, **extra)
    done.pop("restored_at")
    module.exit_json(changed=done.pop("changed"), restored=done)


def install(module, run, p):
    """The server role's install: no inspection first, the unit may not exist yet."""
    want = p["install"]
    try:
        done = _install.install(
            run, p["name"], p["path"], want["text"],
            working_dir={"path": want["working_dir"], "owner": want["owner"], "group": want["group"]} if want["working_dir"] else None,
            cache_dir={"path": want["cache_dir"], "owner": want["owner"], "group": want["group"]} if want["cache_dir"] else None,
            env_file=want["env_file"], env_text=want["env_text"],
            schedule={"path": want["schedule_path"], "text": want["schedule_text"]} if want["schedule_path"] else None,
            restart=want["restart"], enabled=want["enabled"], check_mode=module.check_mode,
            owned_only=want["owned_only"])
    except (_install.InstallError, _unitfile.UnitFileError, OSError) as exc:
        module.fail_json(msg="installing %s: %s" % (p["path"], exc))
    result = {"changed": done.pop("changed"), "installed": done}
    unit_before, schedule_before = done.pop("unit_before"), done.pop("schedule_before")
    done["unit_changed"] = done["files"][p["path"]]
    if module._diff:
        result["diff"] = [{"before_header": p["path"], "after_header": p["path"], "before": unit_before or "",
                           "after": want["text"]}]
        if want["schedule_path"]:
            result["diff"].append({"before_header": want["schedule_path"], "after_header": want["schedule_path"],
                                   "before": schedule_before or "", "after": want["schedule_text"]})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
