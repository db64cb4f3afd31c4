# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server role's install in one call: real files, modes and owners; systemctl recorded (the lowest boundary)."""
from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _install, _restore, _unitfile

UNIT = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n"
SERVICE = "vllm-server.service"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


class Systemctl:
    """run_command answering systemctl as systemd would; records every call."""

    def __init__(self, enabled=False, n_restarts=0, fail=None):
        self.calls, self.enabled, self.n_restarts, self.fail = [], enabled, n_restarts, fail

    def __call__(self, argv):
        assert argv[0] == "systemctl"
        self.calls.append(argv[1:])
        if argv[1] == self.fail:
            return 1, "", "Job for %s failed because the control process exited with error code." % SERVICE
        if argv[1] == "is-enabled":
            return (0 if self.enabled else 1), "", ""
        if argv[1] in ("enable", "disable"):
            self.enabled = argv[1] == "enable"
        if argv[1] == "show":
            return 0, "%d\n" % self.n_restarts, ""
        return 0, "", ""

    def verbs(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def host(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    user = pwd.getpwnam("nobody")
    return {
        "unit": etc / SERVICE,
        "working_dir": {"path": str(tmp_path / "var" / "lib" / "vllm"), "owner": user.pw_name,
                        "group": grp.getgrgid(user.pw_gid).gr_name},
        "env_file": tmp_path / "secrets" / (SERVICE + ".env"),
        "schedule": {"path": str(tmp_path / "schedules" / "sched-1.json"), "text": '{"1": 4}\n'},
        "uid": user.pw_uid, "gid": user.pw_gid,
    }


# Paths opened while a test records them: Python's own "open" audit event (builtins.open, io.open, os.open),
# so nothing of ours is replaced to count. A hook cannot be removed; outside a recording it does nothing.
_OPENED = []
_RECORDING = []


def _audit(event, args):
    if event == "open" and _RECORDING and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@contextlib.contextmanager
def opened():
    del _OPENED[:]
    _RECORDING.append(True)
    try:
        yield _OPENED
    finally:
        _RECORDING.pop()


def install(h, run, text=UNIT, env_text="HF_TOKEN=hf_secret\n", **kw):
    kw.setdefault("working_dir", h["working_dir"])
    kw.setdefault("schedule", h["schedule"])
    kw.setdefault("restart", True)
    return _install.install(run, SERVICE, str(h["unit"]), text, env_file=str(h["env_file"]), env_text=env_text, **kw)


def mode_owner(path):
    st = os.stat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def test_a_first_install_makes_every_file_then_reloads_restarts_enables_and_reads_the_restart_count(host):
    run = Systemctl(n_restarts=0)
    done = install(host, run)
    assert done["changed"] and all(done["files"].values()) and done["unit_before"] is None
    assert host["unit"].read_text() == UNIT and mode_owner(host["unit"]) == (0o644, 0, 0)
    assert mode_owner(host["working_dir"]["path"]) == (0o750, host["uid"], host["gid"])
    assert host["env_file"].read_text() == "HF_TOKEN=hf_secret\n" and mode_owner(host["env_file"]) == (0o600, 0, 0)
    assert mode_owner(host["env_file"].parent) == (0o700, 0, 0)
    assert mode_owner(host["schedule"]["path"]) == (0o644, 0, 0)
    assert mode_owner(os.path.dirname(host["schedule"]["path"])) == (0o755, 0, 0)
    # The files the unit reads are in place before the unit that names them.
    assert os.stat(host["env_file"]).st_mtime_ns <= os.stat(host["schedule"]["path"]).st_mtime_ns \
        <= os.stat(host["unit"]).st_mtime_ns
    assert run.verbs() == ["daemon-reload", "restart", "is-enabled", "enable", "show"]
    assert done["reloaded"] and done["restarted"] and done["enabled_changed"] and done["n_restarts"] == 0
    assert "hf_secret" not in repr(done)


def test_the_same_install_again_changes_nothing_and_restarts_nothing(host):
    install(host, Systemctl())
    run = Systemctl(enabled=True)
    done = install(host, run)
    assert done["changed"] is False and not any(done["files"].values()) and run.calls == []
    assert done["unit_before"] == UNIT and done["restarted"] is False and done["n_restarts"] is None


def test_the_unit_and_the_schedule_are_read_once_each_for_the_diff_and_the_comparison(host):
    install(host, Systemctl())
    schedule = dict(host["schedule"], text='{"1": 5}\n')
    new = UNIT + "Restart=on-failure\n"
    for check_mode in (True, False):
        with opened() as paths:
            done = install(host, Systemctl(enabled=True), text=new, schedule=schedule, check_mode=check_mode)
        assert done["unit_before"] == UNIT and done["schedule_before"] == '{"1": 4}\n'
        assert paths.count(str(host["unit"])) == 1 and paths.count(schedule["path"]) == 1
    with opened() as paths:
        done = install(host, Systemctl(enabled=True), text=new, schedule=schedule)
    assert not done["changed"] and done["unit_before"] == new and done["schedule_before"] == '{"1": 5}\n'
    assert paths.count(str(host["unit"])) == 1 and paths.count(schedule["path"]) == 1


def test_new_secrets_alone_restart_the_unit(host):
    install(host, Systemctl())
    run = Systemctl(enabled=True, n_restarts=3)
    done = install(host, run, env_text="HF_TOKEN=hf_rotated\n")
    assert done["files"] == {k: k == str(host["env_file"]) for k in done["files"]}
    assert run.verbs() == ["daemon-reload", "restart", "is-enabled", "show"] and done["n_restarts"] == 3
    assert host["env_file"].read_text() == "HF_TOKEN=hf_rotated\n"


def test_no_secrets_removes_the_file_without_a_restart_of_its_own(host):
    install(host, Systemctl())
    run = Systemctl(enabled=True)
    done = install(host, run, env_text="")
    assert not host["env_file"].exists() and done["files"][str(host["env_file"])] and done["changed"]
    assert run.calls == []  # the unit that read it changes too (its EnvironmentFile= goes), and restarts then
    assert install(host, run, env_text="")["changed"] is False


def test_a_unit_of_another_owner_is_replaced_by_roots_and_a_unit_not_to_run_is_only_reloaded(host):
    install(host, Systemctl())
    os.chown(host["unit"], host["uid"], host["gid"])
    run = Systemctl(enabled=True)
    done = install(host, run, restart=False)
    assert done["files"][str(host["unit"])] and mode_owner(host["unit"]) == (0o644, 0, 0)
    assert run.verbs() == ["daemon-reload"] and done["restarted"] is False and done["n_restarts"] is None


def test_a_working_directory_with_the_wrong_owner_or_mode_is_fixed(host):
    install(host, Systemctl())
    os.chown(host["working_dir"]["path"], 0, 0)
    os.chmod(host["working_dir"]["path"], 0o777)
    done = install(host, Systemctl(enabled=True))
    assert done["files"][host["working_dir"]["path"]] and not done["restarted"]
    assert mode_owner(host["working_dir"]["path"]) == (0o750, host["uid"], host["gid"])


def test_check_mode_writes_and_restarts_nothing_but_says_what_would_change(host):
    run = Systemctl()
    done = install(host, run, check_mode=True)
    assert done["changed"] and done["files"][str(host["unit"])] and run.calls == []
    assert not host["unit"].exists() and not os.path.exists(host["working_dir"]["path"])
    assert not host["env_file"].exists() and done["restarted"] is False


def test_check_mode_on_a_fresh_host_before_the_service_user_exists(host):
    run = Systemctl()
    done = install(host, run, check_mode=True, working_dir=dict(host["working_dir"], owner="no-such-user-specdec"))
    assert done["files"][host["working_dir"]["path"]] and done["changed"] and run.calls == []


def test_a_failed_restart_is_an_error_with_systemds_words(host):
    with pytest.raises(_unitfile.UnitFileError, match="systemctl restart vllm-server.service failed .rc=1.: Job for"):
        install(host, Systemctl(fail="restart"))
    assert host["unit"].read_text() == UNIT  # the file is in place for the next try; the caller's rescue decides


def test_an_unknown_user_or_a_file_where_the_directory_goes_is_refused_before_anything_is_written(host):
    with pytest.raises(_install.InstallError, match="no such user or group"):
        install(host, Systemctl(), working_dir=dict(host["working_dir"], owner="no-such-user-specdec"))
    assert not host["unit"].exists()
    os.makedirs(os.path.dirname(host["working_dir"]["path"]))
    with open(host["working_dir"]["path"], "w", encoding="utf-8"):
        pass
    with pytest.raises(_install.InstallError, match="exists and is not a directory"):
        install(host, Systemctl())
    assert not host["unit"].exists()


# --------------------------------------------------------------------------- issue 31, item 3

FOREIGN = "[Unit]\nDescription=OpenSSH server\n\n[Service]\nExecStart=/usr/sbin/sshd -D\n"


def test_owned_only_never_writes_over_a_unit_the_collection_did_not_write(host):
    host["unit"].write_text(FOREIGN)
    run = Systemctl()
    with pytest.raises(_unitfile.UnitFileError, match="was not written by llmops.specdec"):
        install(host, run, owned_only=True)
    assert host["unit"].read_text() == FOREIGN and run.calls == []
    assert not host["env_file"].exists() and not os.path.exists(host["working_dir"]["path"])


OURS = _unitfile.MANAGED_HEADER + " (role spec_server): edits here are overwritten.\n" + UNIT


def test_owned_only_replaces_a_unit_the_collection_wrote_and_makes_a_new_one(host):
    assert install(host, Systemctl(), text=OURS, owned_only=True)["changed"]  # none there: made
    assert host["unit"].read_text() == OURS
    new = OURS.replace("/usr/bin/true", "/usr/bin/false")
    assert install(host, Systemctl(), text=new, owned_only=True)["changed"]
    assert host["unit"].read_text() == new


def test_a_candidate_unit_is_removed_only_when_the_collection_wrote_it(tmp_path):
    foreign = tmp_path / "sshd-candidate.service"
    foreign.write_text(FOREIGN)
    run = Systemctl()
    done = _restore.restore(_restore.plan("sshd-candidate.service", str(foreign), None), run, free=False, owned_only=True)
    assert done["file"] == "foreign" and not done["changed"] and foreign.read_text() == FOREIGN
    ours = tmp_path / "vllm-server-candidate.service"
    ours.write_text(OURS)
    done = _restore.restore(_restore.plan("vllm-server-candidate.service", str(ours), None), run, free=False,
                            owned_only=True)
    assert done["file"] == "removed" and not ours.exists()


def test_the_compilation_cache_directory_is_the_users_0700_under_a_root_parent(host, tmp_path):
    # issue 34: the caches of every unit of the user in one persistent directory; an existing parent is left alone
    cache = dict(host["working_dir"], path=str(tmp_path / "var" / "cache" / "llmops-specdec" / "vllm"))
    done = install(host, Systemctl(n_restarts=0), cache_dir=cache)
    parent = os.path.dirname(cache["path"])
    assert done["files"][cache["path"]] and done["files"][parent]
    assert mode_owner(cache["path"]) == (0o700, host["uid"], host["gid"])
    assert mode_owner(parent) == (0o755, 0, 0)
    os.chmod(parent, 0o775)  # the operator's own parent, as found: never changed
    again = install(host, Systemctl(n_restarts=0), cache_dir=cache)
    assert not again["files"][cache["path"]] and parent not in again["files"]
    assert mode_owner(parent)[0] == 0o775
