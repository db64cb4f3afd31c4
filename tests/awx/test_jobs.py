# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nightly and switch job templates run through ansible-runner against a mock GPU host.

Extra vars are built as AWX builds them (template extra_vars, survey defaults and answers, a
schedule's extra_data); the verdict and figures are read from the runner's artifacts, where AWX reads
a job's set_stats. Needs root and systemd-nspawn (tests/mockgpu/host); hosts use index 60.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _verdict
from jobs import MockFleet, run_job
import controller_rules as awx

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("systemd-nspawn") is None,
    reason="mock GPU hosts need root and systemd-nspawn (apt-get install systemd-container)")

HOST = "awx-60"
UNIT = "vllm-server.service"
FLEET_VARS = {
    "spec_server_engine": "vllm",
    "spec_server_model": "facebook/opt-125m",
    "spec_server_cuda_visible_devices": [0],
    "spec_server_ready_timeout": 120,
    # A short benchmark: these tests check the wiring, bench/ measures speed.
    "spec_switch_bench_requests": 4,
    "spec_switch_bench_max_tokens": 64,
    "spec_switch_textfile_dir": "",
    # Single stream and short rounds: these jobs check the wiring; molecule/verdict shows the default plan.
    "spec_switch_bench_concurrency": [1],
    "spec_switch_plan": {"first_round": 4, "round_requests": 4, "max_requests": 8},
}
# Keep anything that serves without errors / roll back anything that is not 50x faster.
KEEP_ANY = {"min_speedup": 0.0, "max_tpot_regression": 100.0, "max_ttft_regression": 100.0, "max_error_rate": 1.0}
KEEP_NONE = {"min_speedup": 50.0}


@pytest.fixture(scope="module")
def fleet():
    # A directory of our own: pytest prunes old basetemp dirs when other sessions start, and these
    # jobs run for minutes.
    workdir = Path(tempfile.mkdtemp(prefix="specdec-awx-"))
    fleet = MockFleet(workdir, {HOST: (60, {})}, FLEET_VARS)
    try:
        fleet.up()
        deploy = fleet.playbook("playbooks/deploy.yml")
        assert deploy.returncode == 0, deploy.stdout[-4000:] + deploy.stderr[-2000:]
        yield fleet
    finally:
        fleet.down()
        shutil.rmtree(workdir, ignore_errors=True)


_JOB_IDS = itertools.count(1)


@pytest.fixture
def job(fleet, templates):
    def launch(name, answers=None, launch_vars=None, from_ui=True):
        extra = awx.launch_extra_vars(templates[name], answers, launch_vars, from_ui=from_ui)
        return run_job(templates[name], extra, fleet.inventory, fleet.workdir / ("job-%d" % next(_JOB_IDS)))
    return launch


def unit_file(fleet):
    """The installed unit (what a rollback restores; systemctl's ExecStart also carries pid and times)."""
    return fleet.shell(HOST, "cat", "/etc/systemd/system/" + UNIT).stdout


def unit_state(fleet):
    return fleet.shell(HOST, "systemctl", "is-active", UNIT, check=False).stdout.strip()


def levels_ok(summary):
    """A figures summary as the verdict uses it: per concurrency, throughput and latencies."""
    assert summary["levels"], summary
    for level in summary["levels"].values():
        assert level["output_tok_s"] > 0 and level["tpot_ms"] > 0 and 0 <= level["error_rate"] <= 1
    return True


def test_baseline_job_stores_the_running_configuration(fleet, job):
    done = job("specdec baseline")  # the survey's defaults: hosts inference, suite reasoning
    assert done.status == "successful", done
    stored = json.loads(fleet.shell(HOST, "cat", "/var/lib/llmops-specdec/baselines/vllm__facebook_opt-125m__reasoning.json").stdout)
    assert stored["suite"] == "reasoning" and levels_ok(stored["summary"])


def test_nightly_job_checks_against_the_baseline_then_sweeps(fleet, job, controller_config):
    (schedule,) = [s for s in controller_config["controller_schedules"] if s["unified_job_template"].endswith(" nightly")]
    done = job(schedule["unified_job_template"], launch_vars=schedule["extra_data"], from_ui=False)
    assert done.status == "successful", done

    check = done.artifacts["specdec_nightly"][HOST]
    assert (check["engine"], check["model"], check["suite"]) == ("vllm", "facebook/opt-125m", "reasoning")
    assert levels_ok(check["baseline"]["summary"]) and levels_ok(check["current"]["summary"])
    # The figures in the artifact carry their own judgement: the drift between the stored baseline and
    # tonight's figures, recomputed, gives the reported status (regressed / unstable / ok).
    again = _verdict.drift(check["baseline"]["summary"], check["current"]["summary"], check["plan"])
    assert check["status"] == ("regressed" if again["regressed"] else ("unstable" if again["unstable"] else "ok"))
    assert check["host_unstable"] == again["unstable"]
    assert check["rebaselined"] is True

    verdict = done.artifacts["specdec_verdicts"][HOST]
    assert verdict["outcome"] in ("kept", "rolled_back"), verdict
    assert verdict["label"] != "previous configuration" or verdict["outcome"] == "rolled_back"
    assert levels_ok(verdict["baseline"])


def test_switch_from_the_survey_keeps_a_winner(fleet, job):
    fleet.set_host_vars(HOST, spec_switch_thresholds=KEEP_ANY)
    done = job("specdec switch", {"method": "ngram", "num_speculative_tokens": 4})
    assert done.status == "successful", done
    verdict = done.artifacts["specdec_verdicts"][HOST]
    assert (verdict["outcome"], verdict["decision"]) == ("kept", "keep"), verdict
    assert verdict["candidate"]["method"] == "ngram" and verdict["candidate"]["num_speculative_tokens"] == 4
    assert verdict["speedup"] > 0 and levels_ok(verdict["baseline"]) and levels_ok(verdict["result"])
    assert verdict["thresholds"]["min_speedup"] == 0.0
    assert '"method":"ngram"' in unit_file(fleet).replace(" ", "").replace("\\", "") and unit_state(fleet) == "active"


def test_switch_that_loses_is_rolled_back_and_the_job_succeeds(fleet, job):
    fleet.set_host_vars(HOST, spec_switch_thresholds=KEEP_NONE)
    before = unit_file(fleet)
    done = job("specdec switch", {"method": "ngram", "num_speculative_tokens": 2})
    assert done.status == "successful", done
    verdict = done.artifacts["specdec_verdicts"][HOST]
    assert (verdict["outcome"], verdict["decision"]) == ("rolled_back", "rollback"), verdict
    assert verdict["speedup"] < 50.0 and "cannot be shown >= x" in verdict["reason"]
    assert unit_file(fleet) == before and unit_state(fleet) == "active"


def test_switch_whose_candidate_breaks_fails_the_job_after_rolling_back(fleet, job):
    fleet.set_host_vars(HOST, spec_switch_thresholds=KEEP_ANY)
    before = unit_file(fleet)
    fleet.shell(HOST, "sh", "-c", "echo '{\"suffix\": {\"fail_start\": true}}' > /etc/mockgpu/faults.json")
    try:
        done = job("specdec switch", {"method": "suffix"})
    finally:
        fleet.shell(HOST, "rm", "-f", "/etc/mockgpu/faults.json")
    assert done.status == "failed" and done.rc != 0, done
    verdict = done.artifacts["specdec_verdicts"][HOST]
    assert (verdict["outcome"], verdict["decision"]) == ("failed", "rollback"), verdict
    assert "candidate failed" in verdict["reason"]
    assert unit_file(fleet) == before and unit_state(fleet) == "active"


def test_switch_thresholds_from_the_survey_decide(fleet, job):
    fleet.set_host_vars(HOST)
    done = job("specdec switch", {"method": "ngram", "num_speculative_tokens": 3, "min_speedup": 50.0})
    assert done.status == "successful", done
    verdict = done.artifacts["specdec_verdicts"][HOST]
    assert verdict["thresholds"]["min_speedup"] == 50.0 and verdict["outcome"] == "rolled_back", verdict


def test_a_hostile_survey_answer_is_refused_with_the_host_untouched(fleet, job):
    """Issue 12: a newline in a survey's free-text field once became an ExecStartPre=+ line (root)."""
    fleet.set_host_vars(HOST)
    before = unit_file(fleet)
    pid = fleet.shell(HOST, "systemctl", "show", "-p", "MainPID", "--value", UNIT).stdout
    done = job("specdec switch", {"method": "eagle3", "num_speculative_tokens": 3,
                                  "draft_model": 'org/head\n[Service]\nExecStartPre=+/bin/sh -c "id > /root/pwned"'})
    assert done.status == "failed", done
    said = " ".join(done.stdout.split())  # the callback may wrap long messages
    assert "draft_model contains a control or line-separator character (U+000A" in said, done.stdout[-3000:]
    assert "Take the host's switch lock" not in said
    assert unit_file(fleet) == before and unit_state(fleet) == "active"
    assert fleet.shell(HOST, "systemctl", "show", "-p", "MainPID", "--value", UNIT).stdout == pid
    assert fleet.shell(HOST, "test", "-e", "/root/pwned", check=False).returncode == 1


def test_rollback_job_restores_the_configuration_before_the_kept_switch(fleet, job):
    done = job("specdec rollback")
    assert done.status == "successful", done
    assert "--speculative-config" not in unit_file(fleet) and unit_state(fleet) == "active"


def test_reclaim_job_stops_the_service(fleet, job):
    done = job("specdec reclaim", {"scope": "gpu"})
    assert done.status == "successful", done
    assert unit_state(fleet) != "active"
