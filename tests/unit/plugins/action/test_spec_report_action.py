# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The spec_report action plugin, run by ansible-playbook as the report play runs it: its options checked by
the argument spec, the files written on the controller in the worker's process, check mode, a bad record,
and the warning when matplotlib cannot be imported (a stand-in package that raises ImportError).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.specdec.tests.unit.plugins.modules.test_spec_report import REC

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Write
      llmops.specdec.spec_report: {records: "{{ records }}", dest: "{{ out }}/r", chart: "{{ chart }}"}
      register: first
    - name: Write the same again
      llmops.specdec.spec_report: {records: "{{ records }}", dest: "{{ out }}/r", chart: "{{ chart }}"}
      register: second
    - name: Preview
      llmops.specdec.spec_report: {records: "{{ records }}", dest: "{{ out }}/preview"}
      check_mode: true
      register: preview
    - name: A record without its outcome
      llmops.specdec.spec_report: {records: [{host: h}], dest: "{{ out }}/bad"}
      register: bad
      ignore_errors: true
    - name: An option it does not have
      llmops.specdec.spec_report: {records: [], dest: "{{ out }}/x", colour: red}
      register: unknown
      ignore_errors: true
    - name: Keep the results
      ansible.builtin.copy:
        content: "{{ {'first': first, 'second': second, 'preview': preview, 'bad': bad, 'unknown': unknown} | to_json }}"
        dest: "{{ out }}/results.json"
        mode: "0644"
"""


def play(tmp_path, chart=True, pythonpath=None):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath] + [p for p in [env.get("PYTHONPATH")] if p])
    extra = json.dumps({"records": [REC], "out": str(tmp_path), "chart": chart, "ansible_python_interpreter": sys.executable})
    proc = subprocess.run([PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"), "-e", extra],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads((tmp_path / "results.json").read_text()), proc.stdout + proc.stderr


def test_the_action_writes_on_the_controller_checks_its_options_and_previews(tmp_path):
    pytest.importorskip("matplotlib")
    res, _log = play(tmp_path)
    first, second = res["first"], res["second"]
    assert first["changed"] is True and first["png"] == str(tmp_path / "r" / "chart.png")
    assert first["lines"][0].startswith("gpu1: ROLLED BACK ngram k=5 on reasoning (x0.50)")
    assert json.loads((tmp_path / "r" / "results.json").read_text()) == [REC]
    assert (tmp_path / "r" / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The history grows by the record each run, so the second run changed a file too; the others stand.
    assert second["changed"] is True and len((tmp_path / "r" / "history.jsonl").read_text().splitlines()) == 2
    assert res["preview"]["changed"] is False and res["preview"]["lines"] == first["lines"]
    assert not (tmp_path / "preview").exists()
    assert res["bad"]["failed"] is True and res["bad"]["msg"].startswith("record without ") and not (tmp_path / "bad").exists()
    assert res["unknown"]["failed"] is True and "colour" in res["unknown"]["msg"]


def test_without_matplotlib_the_chart_is_skipped_with_a_warning(tmp_path):
    stub = tmp_path / "stub" / "matplotlib"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('matplotlib is absent in this test')\n")
    res, log = play(tmp_path, pythonpath=str(tmp_path / "stub"))
    assert res["first"]["png"] is None and not (tmp_path / "r" / "chart.png").exists()
    assert (tmp_path / "r" / "report.md").exists()
    assert "matplotlib" in log and "The chart was skipped." in log
