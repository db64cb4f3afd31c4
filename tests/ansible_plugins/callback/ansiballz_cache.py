# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-run speed-up: keep Ansible's AnsiballZ payload cache across ansible-playbook runs.

ansible-core builds each module's payload (the module plus every module_util it imports, found by
parsing them) once per run, in a cache inside the run's own temporary directory, which is removed at
exit. A test run starts ansible-playbook a few hundred times, and the builds were about 12 CPU-s of
each switch run's 23 (py-spy, bench/README.md "Controller CPU"). This callback points that cache at
.build/ansiballz-cache/KEY, where KEY hashes ansible-core's version, the interpreter and every file
of this checkout's plugins/ (the cache's own key is only the module's name), so a changed module or
module_util never meets an old payload. Enabled by scripts/test only; nothing the collection ships
uses it.
"""
from __future__ import annotations

import hashlib
import os
import sys

from ansible import constants as C
from ansible import release
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: ansiballz_cache
    type: aggregate
    short_description: keep AnsiballZ payloads across test runs (scripts/test)
    description: Links the run's ansiballz_cache directory to one kept under .build, keyed by content.
    requirements: [enable in callbacks_enabled]
"""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def cache_key(root=ROOT):
    """The kept cache's name: ansible-core's version, the interpreter, the checkout and its plugins/."""
    digest = hashlib.sha256()
    # realpath: python and python3 of one venv are the same interpreter, so they share the cache
    digest.update(("%s\0%s\0%s\0" % (release.__version__, os.path.realpath(sys.executable), root)).encode())
    plugins = os.path.join(root, "plugins")
    for top, dirs, files in os.walk(plugins):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, name)
            digest.update(os.path.relpath(path, plugins).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:24]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansiballz_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Before any worker forks: the run's temporary directory exists, its cache does not yet.
        try:
            kept = os.path.join(ROOT, ".build", "ansiballz-cache", cache_key())
            os.makedirs(kept, exist_ok=True)
            link = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")
            if not os.path.lexists(link):
                os.symlink(kept, link)
        except OSError as exc:  # a read-only checkout: build payloads per run, as Ansible does
            self._display.vvv("ansiballz_cache: not kept (%s)" % exc)
