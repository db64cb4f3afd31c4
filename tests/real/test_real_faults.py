# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real engine under the faults the mocks were built for: a lost controller, parking a build without
sleep mode. Each test starts from the baseline (deploy.yml puts it back when a test before left
another unit) and ends with the baseline serving.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from test_real_switch import KEEP, SHORT, _serving, _spec_of, _verdict_line  # tests/real is on sys.path

pytestmark = pytest.mark.real
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def baseline(real_host):
    rc, out = real_host.playbook("deploy.yml")
    assert rc == 0, out[-4000:]
    show = _serving(real_host)
    assert _spec_of(real_host, int(show["MainPID"])) is None
    return show


def test_park_falls_back_to_stop_start(real_host, baseline, tmp_path):
    """The CPU build cannot sleep (--enable-sleep-mode is refused at start): the switch finds that out
    before it relies on parking, says so in one line, and stops and starts instead."""
    host = real_host
    rc, out = host.playbook("switch_spec.yml", host.cfg["methods"]["ngram"], SHORT, KEEP,
                            {"spec_switch_park": True}, report=str(tmp_path))
    line = _verdict_line(host, out)
    assert rc == 0 and " KEPT ngram" in line, (line, out[-5000:])
    said = [text for text in out.splitlines() if "not parked, stopping it instead" in text]
    assert len(said) == 1 and "--enable-sleep-mode" in said[0], said
    rec = host.history()[-1]
    assert rec["park"]["parked"] is False and "--enable-sleep-mode" in rec["park"]["refused"], rec["park"]
    # The baseline was stopped, not left beside the candidate: one engine, on production's unit.
    show = _serving(host)
    assert show["MainPID"] != baseline["MainPID"]
    assert host.sh("systemctl list-units --plain --no-legend '%s-candidate*' | wc -l"
                   % host.unit.replace(".service", "")).strip() == "0"


def test_controller_lost_during_the_candidates_load(real_host, baseline, tmp_path):
    """The controller's link is cut while the real candidate loads: the host's guard restores the baseline
    by itself within its margin, and the restored engine serves."""
    host = real_host
    extra = dict(host.cfg["methods"]["draft_model"], **SHORT, **KEEP, spec_switch_guard_margin=40,
                 specdec_report_dir=str(tmp_path))
    done = subprocess.run(
        [os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, "molecule", "guard", "files", "fault.py"),
         "--host", host.name, "--address", host.address, "--key", host.key, "--inventory", host.inventory,
         "--unit", host.unit, "--port", str(host.port), "--stage", "load", "--fault", "link",
         "--extra", json.dumps(extra), "--timeout", "420", "--log", str(tmp_path / "switch.log")],
        capture_output=True, text=True, cwd=ROOT, timeout=900, check=False,
        env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                 ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections")))
    lost = json.loads(done.stdout) if done.stdout.strip() else {"reached": False, "error": done.stderr[-3000:]}
    print("controller lost during load: %s" % {k: v for k, v in lost.items() if k != "history"})
    # The fault reached the candidate's load (the case really ran), and production came back by itself.
    assert lost["reached"], lost
    assert lost.get("answering_seen_at"), lost
    show = _serving(host)
    assert _spec_of(host, int(show["MainPID"])) is None
    outcomes = [rec["outcome"] for rec in host.history()]
    assert "restored_by_guard" in outcomes[-2:], outcomes
    assert host.sh("test -e /run/llmops-specdec.lock && echo held || echo free").strip() == "free"
