# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nightly schedule: an rrule AWX accepts, firing daily at 02:00 UTC, on the nightly job."""
from __future__ import annotations

import datetime
import subprocess

import pytest

import controller_rules as awx

UTC = datetime.timezone.utc


@pytest.fixture(scope="module")
def nightly(controller_config):
    (schedule,) = [s for s in controller_config["controller_schedules"] if s["unified_job_template"].endswith(" nightly")]
    return schedule


def test_rrule_is_accepted_by_awx_rules(nightly):
    assert awx.rrule_errors(nightly["rrule"]) == []


def test_rrule_fires_every_night_at_two_utc(nightly):
    rules = awx.parse_rrule(nightly["rrule"])
    after = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    runs = []
    while len(runs) < 3:
        after = rules.after(after)
        runs.append(after)
    assert [r.astimezone(UTC) for r in runs] == [
        datetime.datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        datetime.datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
        datetime.datetime(2026, 12, 2, 2, 0, tzinfo=UTC),
    ]


def test_rrule_is_what_the_awx_collection_builds(awx_venv, nightly):
    """awx.awx's schedule_rrule lookup writes the same rule (called directly: under ansible-core 2.19
    the lookup fails in templates, 'returned <class str> instead of <class list>')."""
    code = ("from ansible_collections.awx.awx.plugins.lookup.schedule_rrule import LookupModule; "
            "print(LookupModule().run(['day'], None, start_date='2026-01-01 02:00:00', timezone='UTC', every=1))")
    out = subprocess.run([str(awx_venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == nightly["rrule"]


def test_schedule_launches_the_nightly_job_with_its_extra_data(templates, nightly):
    template = templates[nightly["unified_job_template"]]
    assert template["playbook"] == "playbooks/nightly.yml"
    # extra_data is dropped by AWX unless the template prompts for variables.
    extra = awx.launch_extra_vars(template, launch_vars=nightly["extra_data"], from_ui=False)
    assert extra["specdec_hosts"] == nightly["extra_data"]["specdec_hosts"]


@pytest.mark.parametrize("rrule,error", [
    ("RRULE:FREQ=DAILY;INTERVAL=1", "DTSTART required"),
    ("DTSTART:20260101T020000 RRULE:FREQ=DAILY;INTERVAL=1", "naive datetime"),
    ("DTSTART;TZID=Not/AZone:20260101T020000 RRULE:FREQ=DAILY;INTERVAL=1", "valid TZID"),
    ("DTSTART;TZID=UTC:20260101T020000 RRULE:FREQ=DAILY", "INTERVAL required"),
    ("DTSTART;TZID=UTC:20260101T020000 RRULE:FREQ=SECONDLY;INTERVAL=1", "SECONDLY"),
    ("DTSTART;TZID=UTC:20260101T020000 RRULE:FREQ=DAILY;INTERVAL=1;COUNT=1000", "COUNT > 999"),
    ("DTSTART;TZID=UTC:20260101T020000", "RRULE required"),
])
def test_rule_checker_rejects_what_awx_rejects(rrule, error):
    assert any(error in e for e in awx.rrule_errors(rrule)), awx.rrule_errors(rrule)
