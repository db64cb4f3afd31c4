# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's own filter loader, in a fresh Python as in each forked worker: finding one of our filters
loads the collection's filter files before it, but no module_util beyond the one the filter uses."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import ansible_collections.llmops.specdec as collection

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
PROBE = r"""
import json, sys
from ansible.plugins.loader import filter_loader, init_plugin_loader
init_plugin_loader([sys.argv[1]])
PREFIX = "ansible_collections.llmops.specdec.plugins."
def ours(kind):
    return sorted(m[len(PREFIX) + len(kind) + 1:] for m in sys.modules if m.startswith(PREFIX + kind + "."))
plan = filter_loader.get("llmops.specdec.verdict_plan")
found = {"filter_files": ours("filter"), "module_utils": ours("module_utils")}
found["plan"] = plan.j2_function({"first_round": 3, "round_requests": 3, "max_requests": 6})
found["after_call"] = ours("module_utils")
print(json.dumps(found))
"""


def test_finding_a_filter_imports_only_the_module_utils_it_runs():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", PROBE, ROOT], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout)
    # verdict.py comes after fleet.py, spec.py, spec_params.py and tune.py: the loader imported them all.
    assert {"fleet", "spec", "spec_params", "tune", "verdict"} <= set(found["filter_files"])
    assert found["module_utils"] == ["_lazy"]
    assert found["plan"]["max_requests"] == 6
    # The call imports _verdict and what it needs, not the other files' module_utils.
    assert "_verdict" in found["after_call"]
    assert not {"_fleet", "_gate", "_server", "_spec", "_tune", "_request", "_watch"} & set(found["after_call"])
