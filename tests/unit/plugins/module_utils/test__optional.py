# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_optional: a library is imported by the first get(), not before; a missing one is None with its traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.llmops.specdec.plugins.module_utils import _optional


def test_a_present_module_and_a_name_of_it():
    assert _optional.Optional("json").get() is sys.modules["json"]
    found = _optional.Optional("json", "dumps")
    assert found.get() is sys.modules["json"].dumps and found.error is None


def test_a_missing_module_is_none_with_the_import_error():
    missing = _optional.Optional("no_such_library_for_specdec")
    assert missing.get() is None and missing.get() is None
    assert "ModuleNotFoundError" in missing.error and "no_such_library_for_specdec" in missing.error


def test_importing_the_users_does_not_import_the_libraries():
    # In a fresh interpreter: the module_utils that declare matplotlib, pynvml and prometheus_client
    # load without them, and the first get() brings one in.
    code = (
        "import sys\n"
        "from ansible_collections.llmops.specdec.plugins.module_utils import _nvml, _prom, _report, _tune\n"
        "heavy = ('matplotlib', 'pynvml', 'prometheus_client')\n"
        "assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]\n"
        "_prom.PARSER.get()\n"
        "print('prometheus_client' in sys.modules, 'matplotlib' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "False"]
