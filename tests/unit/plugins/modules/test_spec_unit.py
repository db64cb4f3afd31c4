# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_unit main(): the unit systemd loads, a verified snapshot, the check against the archive, the restore."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _reclaim, _unitfile
from ansible_collections.llmops.specdec.plugins.modules import spec_unit
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import FailJson, run_module

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
UNIT = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n"


@pytest.fixture
def host(tmp_path, monkeypatch):
    unit = tmp_path / "etc" / "vllm-server.service"
    unit.parent.mkdir()
    unit.write_text(UNIT)
    props = {"LoadState": "loaded", "FragmentPath": str(unit), "DropInPaths": "", "ActiveState": "active"}

    def run_command(self, argv, **_kw):
        if argv[:2] == ["systemctl", "show"] and "--value" in argv:  # NRestarts after a restart
            return 0, "2\n", ""
        if argv[:2] == ["systemctl", "show"]:
            return 0, "".join("%s=%s\n" % kv for kv in props.items() if kv[0] not in ("calls", "enabled")), ""
        if argv[:2] == ["systemctl", "is-enabled"]:
            return (0 if props.get("enabled", True) else 1), "", ""
        if argv[:2] == ["systemctl", "stop"]:  # the rollback's reclaim stops the candidate
            props["ActiveState"] = "inactive"
        if argv[:2] in (["systemctl", "enable"], ["systemctl", "disable"]):
            props["enabled"] = argv[1] == "enable"
        if argv[0] == "systemctl":  # the restore's reset-failed, daemon-reload and restart
            props.setdefault("calls", []).append(argv[1])
            return 0, "", ""
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    return tmp_path, unit, props


def args(tmp_path, unit, **more):
    return dict({"name": "vllm-server.service", "path": str(unit)}, **more)


def test_snapshot_then_unchanged_then_refused_for_an_unfinished_run(host):
    tmp_path, unit, _props = host
    snap = str(tmp_path / "snapshot.service")
    check = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap, _ansible_check_mode=True))
    assert check["changed"] and not os.path.exists(snap)
    first = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap))
    assert first["changed"] and first["snapshot"]["sha256"] == first["sha256"]
    assert run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap))["changed"] is False
    (tmp_path / "guard.json").write_text("{}")
    refused = run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap, unfinished=str(tmp_path / "guard.json")),
                         FailJson)
    assert "an unfinished switch still owns" in refused["msg"]
    # The unit is gone: the older snapshot goes too, unless the unfinished run still restores from it.
    unit.unlink()
    assert run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap, unfinished=str(tmp_path / "guard.json")))[
        "changed"] is False and os.path.exists(snap)
    (tmp_path / "guard.json").unlink()
    assert run_module(spec_unit.main, args(tmp_path, unit, snapshot=snap))["changed"] and not os.path.exists(snap)


def test_a_unit_from_elsewhere_or_an_exec_start_drop_in_is_refused(host):
    tmp_path, unit, props = host
    props["FragmentPath"] = "/lib/systemd/system/vllm-server.service"
    assert "is loaded from /lib/systemd/system" in run_module(spec_unit.main, args(tmp_path, unit), FailJson)["msg"]
    drop = tmp_path / "override.conf"
    drop.write_text("[Service]\nExecStart=\nExecStart=/bin/other\n")
    props.update(FragmentPath=str(unit), DropInPaths=str(drop))
    assert "set ExecStart=" in run_module(spec_unit.main, args(tmp_path, unit), FailJson)["msg"]


def test_the_check_before_a_rollback_against_the_archive(host):
    tmp_path, unit, _props = host
    kept = str(tmp_path / "kept")
    previous = tmp_path / "previous.service"
    previous.write_text(UNIT)
    assert _unitfile.archive(str(previous), kept, "vllm-server.service", 3)["changed"]  # as switch_record keeps it
    ok = run_module(spec_unit.main, args(tmp_path, unit, expect_archived={"path": str(previous), "dir": kept}))
    assert ok["changed"] is False
    previous.write_text(UNIT + "ExecStartPre=/bin/sh -c 'tampered'\n")
    refused = run_module(spec_unit.main, args(tmp_path, unit, expect_archived={"path": str(previous), "dir": kept}),
                         FailJson)
    assert "but the newest kept configuration" in refused["msg"] and "nothing was changed" in refused["msg"]


def test_restore_in_one_call_and_its_refusals(host):
    tmp_path, unit, props = host
    snap = tmp_path / "snapshot.service"
    snap.write_text(UNIT.replace("true", "false"))
    os.chmod(snap, 0o600)
    check = run_module(spec_unit.main, args(tmp_path, unit, restore={"src": str(snap)}, _ansible_check_mode=True))
    assert check["changed"] and check["restored"]["file"] == "restored" and unit.read_text() == UNIT
    assert "calls" not in props
    done = run_module(spec_unit.main, args(tmp_path, unit, restore={"src": str(snap)}))
    assert done["restored"] == {"file": "restored", "started": True, "n_restarts": 2, "reclaim": None, "warnings": []}
    assert unit.read_text() == snap.read_text()
    assert props["calls"] == ["reset-failed", "daemon-reload", "restart"]
    assert "either src or remove=true" in run_module(spec_unit.main, args(tmp_path, unit, restore={}), FailJson)["msg"]
    both = run_module(spec_unit.main, args(tmp_path, unit, restore={"src": str(snap)}, snapshot=str(snap)), FailJson)
    assert "mutually exclusive" in both["msg"]
    os.chmod(snap, 0o666)
    refused = run_module(spec_unit.main, args(tmp_path, unit, restore={"src": str(snap)}), FailJson)
    assert "writable by others than root" in refused["msg"] and "nothing was changed" in refused["msg"]
    removed = run_module(spec_unit.main, args(tmp_path, unit, restore={"remove": True}))
    assert removed["restored"] == {"file": "removed", "started": False, "n_restarts": None, "reclaim": None,
                                   "warnings": []} and not unit.exists()


def test_the_rollback_with_its_reclaim_and_lease(host, monkeypatch):
    """The controller's rollback (rollback.yml): the guard's restore with a reclaim first, under the lease."""
    tmp_path, unit, props = host
    snap = tmp_path / "snapshot.service"
    snap.write_text(UNIT.replace("true", "false"))
    os.chmod(snap, 0o600)
    digest = _unitfile.sha256_file(str(snap))
    lease = {"statefile": str(tmp_path / "guard" / "vllm-server.json"), "run_id": "run-1", "ttl": 60}
    want = {"src": str(snap), "sha256": digest, "reclaim": {"gpus": ["0"], "stop_timeout": 1, "verify_timeout": 1}}
    # No guard armed for this run (it restored the host already): nothing is stopped or written.
    lost = run_module(spec_unit.main, args(tmp_path, unit, restore=want, lease=lease), FailJson)
    assert lost["lease_lost"] and "nothing was stopped or changed" in lost["msg"]
    assert "calls" not in props and unit.read_text() == UNIT
    # Without the lease: a reclaim that cannot free the GPUs (no NVML on this test host) is a warning, and the
    # previous unit is put back and restarted all the same.
    monkeypatch.setattr(_reclaim, "Nvml", _no_nvml)
    done = run_module(spec_unit.main, args(tmp_path, unit, restore=want))
    assert done["restored"]["file"] == "restored" and done["restored"]["started"]
    assert not done["restored"]["reclaim"]["ok"] and done["restored"]["reclaim"]["stopped"]
    assert done["restored"]["warnings"][0].startswith("the candidate's GPUs were not verified free before the rollback: ")
    assert props["calls"][-3:] == ["reset-failed", "daemon-reload", "restart"] and "stop" in props["calls"]
    # A snapshot that changed since the guard was armed: nothing is stopped or written.
    snap.write_text(UNIT)
    props.pop("calls")
    changed = run_module(spec_unit.main, args(tmp_path, unit, restore=want), FailJson)
    assert "changed since the guard was armed" in changed["msg"] and "calls" not in props


def test_park_rollbacks_removal_of_the_candidate_beside_its_parked_baseline(host, monkeypatch):
    """park_rollback.yml's call: remove the candidate's unit (only one the collection wrote: owned_only) and its
    secrets (env_file), after a reclaim that keeps the parked baseline's unit (keep_units)."""
    tmp_path, unit, props = host
    seen = []
    monkeypatch.setattr(_reclaim, "reclaim", lambda params, _run, **_kw: seen.append(params) or {})
    env = tmp_path / "vllm-server.service.env"
    env.write_text("VLLM_API_KEY=x\n")
    want = {"remove": True, "owned_only": True, "env_file": str(env),
            "reclaim": {"gpus": ["1"], "keep_units": ["vllm-server-parked.service"]}}
    # A unit the collection did not write is left as it is; its secrets file still goes.
    done = run_module(spec_unit.main, args(tmp_path, unit, restore=want))
    assert done["restored"]["file"] == "foreign" and unit.exists() and not env.exists()
    assert seen[-1]["keep_units"] == ["vllm-server-parked.service"] and seen[-1]["units"] == ["vllm-server.service"]
    # One the collection wrote is removed.
    unit.write_text(_unitfile.MANAGED_HEADER + " (role spec_server)\n" + UNIT)
    done = run_module(spec_unit.main, args(tmp_path, unit, restore=want))
    assert done["restored"]["file"] == "removed" and not unit.exists() and done["changed"]


def _no_nvml(_lib=None):
    raise _reclaim.NvmlError("NVML is not on this host")


def test_the_stored_baseline_is_read_in_the_same_call(host):
    tmp_path, unit, _props = host
    stored = tmp_path / "baseline.json"
    stored.write_text('{"label": "production"}')
    done = run_module(spec_unit.main, args(tmp_path, unit, read=[str(stored), str(tmp_path / "absent.json")]))
    assert done["read"] == ['{"label": "production"}', None] and done["changed"] is False
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * (_unitfile.READ_LIMIT + 1))
    assert "larger than" in run_module(spec_unit.main, args(tmp_path, unit, read=[str(big)]), FailJson)["msg"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the install sets owners")
def test_install_in_one_call_with_its_diff_and_never_the_secrets(host):
    tmp_path, unit, props = host
    new = UNIT.replace("true", "false")
    want = {"text": new, "working_dir": str(tmp_path / "work"), "owner": "root", "group": "root",
            "env_file": str(tmp_path / "secrets" / "vllm-server.service.env"), "env_text": "HF_TOKEN=hf_secret\n",
            "restart": True}
    check = run_module(spec_unit.main, args(tmp_path, unit, install=want, _ansible_check_mode=True, _ansible_diff=True))
    assert check["changed"] and unit.read_text() == UNIT and "calls" not in props
    assert check["diff"] == [{"before_header": str(unit), "after_header": str(unit), "before": UNIT, "after": new}]
    done = run_module(spec_unit.main, args(tmp_path, unit, install=want))
    assert done["changed"] and unit.read_text() == new and done["installed"]["unit_changed"]
    assert done["installed"]["restarted"] and done["installed"]["n_restarts"] == 2 and "diff" not in done
    assert props["calls"] == ["daemon-reload", "restart"]  # enabled already (is-enabled answers 0)
    # Ansible masks a no_log option's value wherever it would appear in the output.
    assert done.pop("_no_log_values") == {want["env_text"]} and check.pop("_no_log_values") == {want["env_text"]}
    assert "hf_secret" not in repr(check) + repr(done)
    again = run_module(spec_unit.main, args(tmp_path, unit, install=want))
    assert again["changed"] is False and again["installed"]["restarted"] is False and props["calls"] == ["daemon-reload", "restart"]
    both = run_module(spec_unit.main, args(tmp_path, unit, install=want, restore={"remove": True}), FailJson)
    assert "mutually exclusive" in both["msg"]
    no_owner = run_module(spec_unit.main, args(tmp_path, unit, install={"text": new, "working_dir": "/x"}), FailJson)
    assert "working_dir" in no_owner["msg"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the install sets owners")
def test_install_a_schedule_and_the_enabled_state_through_the_module(host):
    tmp_path, unit, props = host
    new = UNIT.replace("true", "false")
    schedule = tmp_path / "schedules" / "k.json"
    want = {"text": new, "schedule_path": str(schedule), "schedule_text": '{"1": 5}\n', "enabled": False, "restart": True}
    check = run_module(spec_unit.main, args(tmp_path, unit, install=want, _ansible_check_mode=True, _ansible_diff=True))
    assert check["changed"] and not schedule.parent.exists() and unit.read_text() == UNIT and "calls" not in props
    assert check["diff"][1] == {"before_header": str(schedule), "after_header": str(schedule), "before": "", "after": '{"1": 5}\n'}
    done = run_module(spec_unit.main, args(tmp_path, unit, install=want))
    assert schedule.read_text() == '{"1": 5}\n' and oct(schedule.stat().st_mode & 0o777) == "0o644"
    assert oct(schedule.parent.stat().st_mode & 0o777) == "0o755"
    # Restarted as asked, then disabled: is-enabled said it was enabled.
    assert props["calls"] == ["daemon-reload", "restart", "disable"] and props["enabled"] is False
    assert done["installed"]["enabled_changed"] and done["installed"]["files"][str(schedule)]
    # A new schedule alone restarts nothing (a new schedule comes with a new unit text, which names it).
    other = dict(want, schedule_text='{"1": 3}\n')
    again = run_module(spec_unit.main, args(tmp_path, unit, install=other, _ansible_diff=True))
    assert again["changed"] and not again["installed"]["unit_changed"] and not again["installed"]["reloaded"]
    assert again["diff"][1]["before"] == '{"1": 5}\n' and again["diff"][1]["after"] == '{"1": 3}\n'
    assert props["calls"] == ["daemon-reload", "restart", "disable"] and schedule.read_text() == '{"1": 3}\n'


@pytest.mark.skipif(os.geteuid() != 0, reason="the install sets owners")
def test_install_makes_the_compilation_cache_directory_through_the_module(host):
    # issue 34: install.cache_dir (spec_server_cache_dir), the owner's and 0700; it needs owner and group
    tmp_path, unit, _props = host
    cache = tmp_path / "cache" / "vllm"
    want = {"text": UNIT, "cache_dir": str(cache), "owner": "root", "group": "root"}
    done = run_module(spec_unit.main, args(tmp_path, unit, install=want))
    assert done["installed"]["files"][str(cache)] and oct(cache.stat().st_mode & 0o777) == "0o700"
    assert oct(cache.parent.stat().st_mode & 0o777) == "0o755"
    no_owner = run_module(spec_unit.main, args(tmp_path, unit, install={"text": UNIT, "cache_dir": "/x"}), FailJson)
    assert "cache_dir" in no_owner["msg"]
