# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test-run payload cache (tests/ansible_plugins/callback/ansiballz_cache.py): a changed file under
plugins/ gives another cache, so a run never meets a payload built from older code; a real
ansible-playbook run with the callback enabled fills the kept cache."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "tests" / "ansible_plugins" / "callback" / "ansiballz_cache.py"


def _load():
    spec = importlib.util.spec_from_file_location("ansiballz_cache_under_test", PLUGIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_key_follows_the_content_of_plugins(tmp_path):
    mod = _load()
    (tmp_path / "plugins" / "modules").mkdir(parents=True)
    module = tmp_path / "plugins" / "modules" / "m.py"
    module.write_text("A = 1\n")
    first = mod.cache_key(str(tmp_path))
    assert mod.cache_key(str(tmp_path)) == first
    module.write_text("A = 2\n")
    assert mod.cache_key(str(tmp_path)) != first


def test_a_run_with_the_callback_keeps_its_payloads(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n")
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=str(PLUGIN.parent), ANSIBLE_CALLBACKS_ENABLED="ansiballz_cache",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    env.pop("ANSIBLE_CONFIG", None)
    kept = ROOT / ".build" / "ansiballz-cache" / _load().cache_key()
    for old in kept.glob("ansible.modules.ping-*"):
        old.unlink()  # so that only this run can have written it
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(play)],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    assert (kept / "ansible.modules.ping-ZIP_DEFLATED-none").is_file()
