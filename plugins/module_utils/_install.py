# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server role's install in one call: the unit's files on the host, then systemd told of them.

``install(run_command, unit, path, text, ...)`` makes, in this order,
- the engine's working directory (its user and group, 0750);
- the secrets file (root, 0600, in a root-only 0700 directory), or removes it when the unit has none;
- SGLang's schedule file (root, 0644, its directory 0755);
- the unit file (root, 0644),

each written atomically and only when it differs (``_files``), so ``changed`` says what changed. When
the unit file or the secrets changed, systemd is reloaded and, with ``restart``, the unit restarted
and enabled or disabled as asked; ``n_restarts`` (systemd's count of automatic restarts, read after
that restart) lets the readiness wait notice a crash without a probe of its own first. In check mode
nothing is written or restarted; the result says what would change. The secrets' text is never returned.

Standard library only: modules ship this to the target.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _unitfile

__all__ = ["install", "InstallError"]


class InstallError(Exception):
    """A file of the unit could not be made as asked (systemctl's failures raise _unitfile.UnitFileError)."""


def _ids(user, group):
    try:
        return pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError as exc:
        raise InstallError("no such user or group: %s" % exc.args[0])


def _directory(path, uid, gid, mode, check_mode):
    """Make ``path`` a directory owned by uid:gid with ``mode``; return whether anything changed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not check_mode:
            os.makedirs(path, mode)
            os.chown(path, uid, gid)
            os.chmod(path, mode)  # makedirs' mode is masked by the umask
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise InstallError("%s exists and is not a directory" % path)
    changed = (st.st_uid, st.st_gid) != (uid, gid) or stat.S_IMODE(st.st_mode) != mode
    if changed and not check_mode:
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    return changed


def _users_directory(want, mode, check_mode):
    """``want`` (``{"path", "owner", "group"}``) made the service user's; whether it changed. In check mode on a
    fresh host the user does not exist yet (the role's user task has not run): the directory counts as changed."""
    try:
        uid, gid = _ids(want["owner"], want["group"])
    except InstallError:
        if not check_mode:
            raise
        return True
    return _directory(want["path"], uid, gid, mode, check_mode)


def _file(path, data, mode, check_mode):
    """Write ``data`` to ``path`` (root's, ``mode``) when it differs; return (changed, the old text or None)."""
    return _files.update(path, data, mode, root=True, check_mode=check_mode)


def _remove(path, check_mode):
    if not os.path.lexists(path):
        return False
    if not check_mode:
        os.unlink(path)
    return True


def _set_enabled(run_command, unit, enabled):
    if (_unitfile.systemctl(run_command, ["is-enabled", "--quiet", unit], ok_rc=range(256))[0] == 0) == enabled:
        return False
    _unitfile.systemctl(run_command, ["enable" if enabled else "disable", unit])
    return True


def install(run_command, unit, path, text, working_dir=None, env_file=None, env_text="", schedule=None,
            restart=False, enabled=True, check_mode=False, owned_only=False, cache_dir=None):
    """Install ``text`` as ``path`` with the files it reads; see the module docstring.

    ``working_dir`` and ``cache_dir`` are ``{"path", "owner", "group"}`` or None (0750 and 0700); ``env_file`` the secrets file's path,
    written with ``env_text`` when that is not empty and removed when it is; ``schedule`` is
    ``{"path", "text"}`` or None. Returns ``{"changed", "files", "unit_before", "schedule_before",
    "reloaded", "restarted", "enabled_changed", "n_restarts"}``; ``files`` maps each file or directory
    touched to whether it changed.

    ``owned_only``: a unit file already at ``path`` that the collection did not write (``_unitfile.check_ours``)
    is refused before anything is made (the candidate beside a parked baseline never replaces another unit).
    """
    if owned_only:
        _unitfile.check_ours(path)
    files = {}
    if working_dir:
        files[working_dir["path"]] = _users_directory(working_dir, 0o750, check_mode)
    if cache_dir:
        parent = os.path.dirname(cache_dir["path"].rstrip("/"))
        if parent and not os.path.isdir(parent):  # an existing parent (/var/cache) is never changed
            files[parent] = _directory(parent, 0, 0, 0o755, check_mode)
        files[cache_dir["path"]] = _users_directory(cache_dir, 0o700, check_mode)
    secrets_changed = False
    if env_file and env_text:
        files[os.path.dirname(env_file)] = _directory(os.path.dirname(env_file), 0, 0, 0o700, check_mode)
        # The secrets' old text is never read: it has no place in a diff.
        secrets_changed = _files.write_if_changed(env_file, env_text, 0o600, root=True, check_mode=check_mode)
        files[env_file] = secrets_changed
    elif env_file:
        # A stale file alone restarts nothing: a unit that read it changes too (its EnvironmentFile= goes).
        files[env_file] = _remove(env_file, check_mode)
    schedule_before = None
    if schedule and schedule.get("path"):
        files[os.path.dirname(schedule["path"])] = _directory(os.path.dirname(schedule["path"]), 0, 0, 0o755, check_mode)
        files[schedule["path"]], schedule_before = _file(schedule["path"], schedule["text"], 0o644, check_mode)
    unit_changed, unit_before = _file(path, text, 0o644, check_mode)
    files[path] = unit_changed
    done = {"changed": any(files.values()), "files": files, "unit_before": unit_before,
            "schedule_before": schedule_before, "reloaded": False, "restarted": False, "enabled_changed": False,
            "n_restarts": None}
    if check_mode or not (unit_changed or secrets_changed):
        return done
    _unitfile.systemctl(run_command, ["daemon-reload"])
    done["reloaded"] = True
    if restart:
        _unitfile.systemctl(run_command, ["restart", unit])
        done["restarted"] = True
        done["enabled_changed"] = _set_enabled(run_command, unit, enabled)
        done["n_restarts"] = _unitfile.n_restarts(run_command, unit)
    return done
