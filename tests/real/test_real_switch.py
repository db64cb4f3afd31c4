# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real engine switched, measured, judged and rolled back by the collection's own playbooks.

The tests run in file order and share one host: deploy and baseline, a kept n-gram switch (the
engine's own counters show it speculated), a draft-model switch rolled back to it, the rollback
playbook back to the baseline, then the failure paths. No test asserts a speed-up (CPU timings are
too noisy): each asserts what the engine did (its /metrics, its argv in /proc, its cgroup) and the
verdict's mechanics, and each failure path ends with the baseline healthy and serving.
"""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.real

# Thresholds that decide the verdict by themselves whatever the CPU's timings: any candidate that
# serves is kept (KEEP) or none is (ROLLBACK). The benchmark is short; the levels single-stream.
# Prompts whose greedy completions must not change with speculation (lossless decoding; float32 on both
# sides, so rounding does not flip a near tie). Some repeat themselves, so n-gram drafts get accepted.
PROMPTS = ["the model server token speculative decoding draft target engine request the model server token",
           "explain the first step because the answer",
           "copy text line word sentence copy text line word sentence copy text line",
           "0123456789 + - * / = ( ) def return if else"]
GREEDY = {}
# KEEP's latency bars are out of reach on purpose: 4 requests on a loaded 2-core machine once gave a TPOT
# interval up to x3900, which a bar of x100 left open (an inconclusive rollback, not the keep under test).
KEEP = {"spec_switch_thresholds": {"min_speedup": 0, "max_tpot_regression": 1e9, "max_ttft_regression": 1e9}}
ROLLBACK = {"spec_switch_thresholds": {"min_speedup": 100}}
SHORT = {"spec_switch_bench_concurrency": [1], "spec_switch_bench_requests": 4, "spec_switch_bench_max_tokens": 32,
         "spec_switch_plan": {"first_round": 4, "round_requests": 4, "max_requests": 4},
         "spec_switch_remeasure_requests": 0, "spec_switch_bench_timeout": 60,
         "spec_switch_bench_request_timeout": 120, "specdec_report_chart": False}


def _verdict_line(host, out):
    lines = [line for line in out.splitlines() if (host.name + ": ") in line and any(
        word in line for word in ("KEPT", "ROLLED BACK", "FAILED", "INCONCLUSIVE", "UNCHANGED"))]
    return lines[-1] if lines else ""


def _serving(host):
    """The unit is active, its main process answers a completion, and only the unit's processes run it."""
    show = host.show()
    assert show["ActiveState"] == "active", show
    status, body = host.http("/health")
    assert status == 200, body
    return show


def _spec_of(host, pid):
    argv = host.argv(pid)
    if "--speculative-config" in argv:
        return json.loads(argv[argv.index("--speculative-config") + 1])
    return None


def test_deploy_and_baseline(real_host, tmp_path):
    host = real_host
    rc, out = host.playbook("deploy.yml")
    assert rc == 0, out[-4000:]
    show = _serving(host)
    unit = host.sh("cat /etc/systemd/system/%s" % host.unit)
    # The unit as shipped: the sandbox is on, the service runs as its own user.
    for line in ("ProtectSystem=strict", "PrivateTmp=yes", "RemoveIPC=yes", "SystemCallFilter=", "User=vllm"):
        assert line in unit, unit
    pid = int(show["MainPID"])
    # The kernel runs the console script through its shebang: /proc shows the interpreter first.
    argv = host.argv(pid)
    assert argv[:4] == [host.venv + "/bin/python", host.vars["spec_server_executable"], "serve",
                        host.vars["spec_server_model"]], argv
    assert _spec_of(host, pid) is None
    # Every process of the engine (API server, engine core) is in the unit's cgroup, as the service user.
    procs = host.cgroup_pids(show["ControlGroup"])
    assert pid in procs and len(procs) >= 2, procs
    users = set(host.sh("ps -o user= -p %s" % ",".join(map(str, procs))).split())
    assert users == {"vllm"}, users
    status, body = host.http(host.cfg["version_path"])
    assert status == 200 and json.loads(body)["version"].startswith("0.32"), body

    GREEDY["baseline"] = host.greedy(PROMPTS)
    assert all(GREEDY["baseline"]), GREEDY
    rc, out = host.playbook("baseline.yml", SHORT, report=str(tmp_path))
    assert rc == 0, out[-4000:]
    assert host.sh("ls /var/lib/llmops-specdec/baselines/").strip(), "no baseline stored"


def test_switch_ngram_kept(real_host, tmp_path):
    host = real_host
    before = _serving(host)
    rc, out = host.playbook("switch_spec.yml", host.cfg["methods"]["ngram"], SHORT, KEEP, report=str(tmp_path))
    line = _verdict_line(host, out)
    # The collection's own lossless check (issue 32), whatever the speed figures of a loaded CPU say: spec_bench
    # digested the greedy outputs of both sides at c=1 and the verdict compared them prompt by prompt; n-gram
    # speculation changed none of them.
    lossless = (host.history() or [{}])[-1].get("lossless") or {}
    assert lossless.get("status") == "pass" and lossless["compared"] >= 4, (lossless, line)
    assert lossless["differ"] == 0 and lossless["rate"] == 0 and lossless["prompts"] == [], lossless
    print("lossless check of the n-gram switch: %s" % lossless["why"])
    assert rc == 0 and " KEPT ngram" in line, (line, out[-5000:])
    show = _serving(host)
    assert show["MainPID"] != before["MainPID"]
    # What the engine really runs: its argv from /proc names the n-gram config the request asked for.
    spec = _spec_of(host, int(show["MainPID"]))
    assert spec and spec["method"] == "ngram" and spec["num_speculative_tokens"] == 3, spec
    # What it really did: the engine's own counters moved while the benchmark ran (per position too).
    metrics = host.metrics()
    names = host.cfg["metrics"]
    assert sum(metrics[names["drafts"]].values()) > 0, metrics.get(names["drafts"])
    assert sum(metrics[names["accepted"]].values()) > 0, metrics.get(names["accepted"])
    per_pos = metrics[names["accepted_per_position"]]
    assert len(per_pos) == 3 and sum(per_pos.values()) > 0, per_pos
    # The record holds acceptance read from those counters, and the report names the verdict.
    rec = host.history()[-1]
    assert rec["outcome"] == "kept" and rec["candidate"]["method"] == "ngram", rec
    acceptance = rec["acceptance"]
    assert acceptance["source"] == "vllm_counters", acceptance
    assert 0 < acceptance["accepted_tokens"] <= sum(metrics[names["accepted"]].values()), (acceptance, metrics)
    assert len(acceptance["accepted_per_position"]) == 3 and acceptance["accepted_per_position"][0] > 0, acceptance
    report = (tmp_path / "report.md").read_text()
    assert "ngram" in report and "KEPT" in report, report
    assert "outputs identical to the baseline on %d/%d prompts" % (lossless["compared"], lossless["compared"]) in report
    assert "divergence 0.0%" in report, report
    # Speculation is lossless: the same greedy text as the baseline's, prompt for prompt (the test's own check).
    if "baseline" in GREEDY:
        assert host.greedy(PROMPTS) == GREEDY["baseline"]


def test_switch_draft_model_rolled_back(real_host, tmp_path):
    host = real_host
    before = _serving(host)
    kept_spec = _spec_of(host, int(before["MainPID"]))
    rc, out = host.playbook("switch_spec.yml", host.cfg["methods"]["draft_model"], SHORT, ROLLBACK,
                            report=str(tmp_path))
    line = _verdict_line(host, out)
    assert rc == 0 and " ROLLED BACK draft_model" in line, (line, out[-5000:])
    show = _serving(host)
    # The previous configuration (the kept n-gram unit) runs again, in a new process.
    assert show["MainPID"] != before["MainPID"]
    assert _spec_of(host, int(show["MainPID"])) == kept_spec
    rec = host.history()[-1]
    assert rec["outcome"] == "rolled_back" and rec["candidate"]["method"] == "draft_model", rec
    # The draft model really drafted: acceptance counted while the candidate ran.
    assert rec["acceptance"]["accepted_tokens"] > 0, rec["acceptance"]


def test_rollback_playbook_restores_the_baseline(real_host, tmp_path):
    host = real_host
    rc, out = host.playbook("rollback.yml", report=str(tmp_path))
    assert rc == 0, out[-4000:]
    show = _serving(host)
    assert _spec_of(host, int(show["MainPID"])) is None


@pytest.mark.parametrize("case", ["broken_head", "never_ready"])
def test_failing_candidate_rolls_back(real_host, tmp_path, case):
    """A head that is ready and then dies on its first request; a method this build refuses at start."""
    host = real_host
    before = _serving(host)
    rc, out = host.playbook("switch_spec.yml", host.cfg["methods"][case], SHORT, KEEP, report=str(tmp_path))
    line = _verdict_line(host, out)
    # The candidate failed: the run says so (rc 2, spec_switch_fail_on_candidate_error), the host serves
    # the baseline again.
    assert rc != 0 and line, (line, out[-5000:])
    show = _serving(host)
    assert show["MainPID"] != before["MainPID"]
    assert _spec_of(host, int(show["MainPID"])) is None
    rec = host.history()[-1]
    print("%s: %s | %s" % (case, line, rec.get("reason")))
    # Rolled back, reported failed, and the reason quotes the engine's own words.
    assert rec["outcome"] == "failed" and rec["decision"] == "rollback", rec
    assert host.cfg["failure_causes"][case] in rec["reason"], rec["reason"]
    report = (tmp_path / "report.md").read_text()
    assert "FAILED" in report and rec["candidate"]["method"] in report, report
