# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_systemd: systemctl argv, state polling, SIGKILL escalation, cgroup walking.

systemctl is faked at the run_command boundary by a tiny unit state machine.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _systemd


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 0.001)


class FakeSystemctl:
    """Answers systemctl like systemd would for one unit; ``stop_after`` polls until inactive."""

    def __init__(self, state="active", stop_after=2, dies_on_kill=True, props=None):
        self.state = state
        self.stop_after = stop_after
        self.dies_on_kill = dies_on_kill
        self.props = props or {}
        self.calls = []
        self._countdown = None

    def __call__(self, argv):
        self.calls.append(list(argv))
        verb = argv[1]
        if verb == "show":
            if self._countdown is not None:
                if self._countdown <= 0:
                    self.state = "inactive"
                self._countdown -= 1
            want = argv[3].split("=", 1)[1].split(",")
            values = dict(self.props, ActiveState=self.state)
            return 0, "".join("%s=%s\n" % (k, values.get(k, "")) for k in want), ""
        if verb == "stop":
            self.state = "deactivating"
            if self.stop_after is not None:
                self._countdown = self.stop_after
            return 0, "", ""
        if verb == "kill":
            if self.dies_on_kill:
                self.state = "failed"
                self._countdown = None
            return 0, "", ""
        return 1, "", "unknown verb"


def test_show_parses_requested_properties():
    fake = FakeSystemctl(props={"MainPID": "123", "ControlGroup": "/system.slice/vllm.service"})
    got = _systemd.show(fake, "vllm.service", ["MainPID", "ControlGroup", "ActiveState"])
    assert got == {"MainPID": "123", "ControlGroup": "/system.slice/vllm.service", "ActiveState": "active"}
    assert fake.calls == [["systemctl", "show", "vllm.service", "--property=MainPID,ControlGroup,ActiveState"]]


def test_show_raises_on_systemctl_failure():
    def broken(argv):
        return 1, "", "Failed to connect to bus: Host is down"

    with pytest.raises(_systemd.SystemdError, match="Host is down"):
        _systemd.show(broken, "x.service", ["ActiveState"])


def test_stop_of_inactive_unit_changes_nothing():
    fake = FakeSystemctl(state="inactive")
    assert _systemd.stop(fake, "vllm.service", 5) is False
    assert [c[1] for c in fake.calls] == ["show"]


def test_stop_waits_until_inactive_without_kill():
    fake = FakeSystemctl(stop_after=3)
    clock = FakeClock()
    result = _systemd.stop_unit(fake, "vllm.service", 5, clock=clock, sleep=clock.sleep)
    assert result == {"was_active": True, "killed": False, "state": "inactive"}
    verbs = [c[1] for c in fake.calls]
    assert verbs[:2] == ["show", "stop"] and "kill" not in verbs
    assert ["systemctl", "stop", "--no-block", "vllm.service"] in fake.calls


def test_stop_escalates_to_sigkill_when_grace_expires():
    fake = FakeSystemctl(stop_after=None)  # ignores the stop: stays deactivating
    clock = FakeClock()
    result = _systemd.stop_unit(fake, "vllm.service", 0.5, clock=clock, sleep=clock.sleep)
    assert result["was_active"] and result["killed"] and result["state"] == "failed"
    assert ["systemctl", "kill", "--signal=SIGKILL", "vllm.service"] in fake.calls
    assert clock.now < 0.5 + _systemd.POLL_INTERVAL * 2  # bounded by the grace, not by systemd


def test_stop_raises_when_unit_survives_sigkill():
    fake = FakeSystemctl(stop_after=None, dies_on_kill=False)
    clock = FakeClock()
    with pytest.raises(_systemd.SystemdError, match="still deactivating after SIGKILL"):
        _systemd.stop_unit(fake, "vllm.service", 0.1, clock=clock, sleep=clock.sleep)


def test_cgroup_pids_walks_sub_cgroups(tmp_path):
    top = tmp_path / "system.slice" / "vllm.service"
    (top / "worker").mkdir(parents=True)
    (top / "cgroup.procs").write_text("10\n11\n")
    (top / "worker" / "cgroup.procs").write_text("12\n")
    assert _systemd.cgroup_pids("/system.slice/vllm.service", roots=(str(tmp_path),)) == [10, 11, 12]


def test_cgroup_pids_tries_hybrid_then_legacy_roots(tmp_path):
    legacy = tmp_path / "systemd" / "system.slice" / "a.service"
    legacy.mkdir(parents=True)
    (legacy / "cgroup.procs").write_text("7\n")
    roots = (str(tmp_path / "unified"), str(tmp_path / "systemd"))
    assert _systemd.cgroup_pids("/system.slice/a.service", roots=roots) == [7]
    assert _systemd.cgroup_pids("", roots=roots) == []
    assert _systemd.cgroup_pids("/system.slice/gone.service", roots=roots) == []


def test_environment_property_as_systemctl_prints_it():
    assert _systemd.environment("") == {}
    assert _systemd.environment("CUDA_VISIBLE_DEVICES=0,1 CUDA_DEVICE_ORDER=PCI_BUS_ID") == {
        "CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    # quoted when a value has a space (newer systemd); the later assignment wins
    assert _systemd.environment('"A=x y" CUDA_VISIBLE_DEVICES=0 CUDA_VISIBLE_DEVICES=3') == {
        "A": "x y", "CUDA_VISIBLE_DEVICES": "3"}
    # an unbalanced quote from an unquoting systemd: words as they are
    assert _systemd.environment('B=it"s CUDA_VISIBLE_DEVICES=2')["CUDA_VISIBLE_DEVICES"] == "2"
