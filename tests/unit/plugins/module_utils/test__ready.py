# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_ready: readiness rules per engine and fail-fast on unit state, over real HTTP on 127.0.0.1.

HTTP goes through ansible's real open_url to a real local server (engine_http.EngineHTTP);
only systemctl is faked, at the run_command boundary.
"""
from __future__ import annotations

import time

import pytest
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.specdec.plugins.module_utils import _ready, _secrets
from engine_http import EngineHTTP, FakeSystemctl, Reply, closed_port_url, models


class FakeClock:
    """Monotonic clock advanced only by sleep(), so cycle bounds are tested without waiting."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def cycle(url, engine, clock=None, **kw):
    clock = clock or FakeClock()
    return _ready.probe_cycle(open_url, kw.pop("run_command", None), url, engine,
                              clock=clock, sleep=clock.sleep, **kw)


# --- vLLM -------------------------------------------------------------------------------------

def test_vllm_ready_needs_health_and_the_served_model():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("llama-8b"))]}) as srv:
        res = cycle(srv.url, "vllm", model="llama-8b", timeout=0)
    assert res["ready"] is True
    assert res["probes"] == 1
    assert srv.paths() == ["/health", "/v1/models"]
    assert res["msg"].startswith("ready: ")
    assert "llama-8b" in res["msg"]


def test_vllm_not_ready_while_model_is_not_listed():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("other"))]}) as srv:
        res = cycle(srv.url, "vllm", model="llama-8b", timeout=0)
    assert res["ready"] is False
    assert "/v1/models lists ['other'], not 'llama-8b'" in res["msg"]


def test_vllm_without_model_accepts_any_listed_model_but_not_an_empty_list():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models())]}) as srv:
        assert cycle(srv.url, "vllm", timeout=0)["ready"] is False
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        assert cycle(srv.url, "vllm", timeout=0)["ready"] is True


def test_vllm_health_503_is_not_ready_and_models_is_not_asked():
    with EngineHTTP({"/health": [Reply(503)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        res = cycle(srv.url, "vllm", model="m", timeout=0)
    assert res["ready"] is False
    assert res["msg"].endswith("/health: HTTP 503")
    assert srv.paths() == ["/health"]


def test_vllm_models_body_that_is_not_a_model_list():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, b"<html>")]}) as srv:
        res = cycle(srv.url, "vllm", timeout=0)
    assert res["ready"] is False
    assert "not an OpenAI model list" in res["msg"]


def test_vllm_api_key_is_sent_to_models_only():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        assert cycle(srv.url, "vllm", model="m", timeout=0, api_key="s3cret")["ready"] is True
    headers = dict((p, h) for p, h in srv.requests)
    assert headers["/v1/models"].get("Authorization") == "Bearer s3cret"
    assert "Authorization" not in headers["/health"]


def test_connection_refused_is_reported_as_loading():
    res = cycle(closed_port_url(), "vllm", timeout=0)
    assert res["ready"] is False
    assert res["msg"].endswith("/health: connection refused")


def test_a_request_is_bounded_by_the_cycle():
    # The server answers after 3 s; a cycle of 0 s still allows a 1 s request, then gives up.
    with EngineHTTP({"/health_generate": [Reply(200, delay=3)]}) as srv:
        t0 = time.monotonic()
        res = _ready.probe_cycle(open_url, None, srv.url, "sglang", timeout=0)
        took = time.monotonic() - t0
    assert res["ready"] is False
    assert "/health_generate: timed out after 1 s" in res["msg"]
    assert took < 3


# --- SGLang -----------------------------------------------------------------------------------

def test_sglang_polls_health_generate_until_200_within_one_cycle():
    script = {"/health_generate": [Reply(503), Reply(503), Reply(200)], "/health": [Reply(200)]}
    clock = FakeClock()
    with EngineHTTP(script) as srv:
        res = cycle(srv.url, "sglang", clock=clock, timeout=30, interval=2)
    assert res["ready"] is True
    assert res["probes"] == 3
    assert srv.paths() == ["/health_generate"] * 3
    assert clock.sleeps == [2, 2]
    assert res["elapsed"] == 4.0


def test_cycle_returns_not_ready_at_its_bound():
    clock = FakeClock()
    with EngineHTTP({"/health_generate": [Reply(503)]}) as srv:
        res = cycle(srv.url, "sglang", clock=clock, timeout=5, interval=2)
    assert res["ready"] is False
    assert clock.sleeps == [2, 2, 1]  # the last sleep is cut to the bound
    assert res["probes"] == 4
    assert res["msg"] == "loading: %s, /health_generate: HTTP 503" % srv.url


# --- unit state: progress and fail fast --------------------------------------------------------

def test_progress_message_shows_unit_state_and_running_time():
    started_us = int((time.monotonic() - 125) * 1e6)
    systemctl = FakeSystemctl(ExecMainStartTimestampMonotonic=started_us)
    res = cycle(closed_port_url(), "vllm", run_command=systemctl, unit="vllm-server.service", timeout=0)
    assert res["ready"] is False
    assert res["msg"].startswith("loading: vllm-server.service active/running for 12")
    assert res["msg"].endswith(" s, /health: connection refused")
    assert 124 <= res["state"]["running_seconds"] <= 127
    assert res["state"]["main_pid"] == 4242
    assert systemctl.calls[0][:3] == ["systemctl", "show", "vllm-server.service"]


@pytest.mark.parametrize("props, expect", [
    ({"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainStatus": 3},
     "vllm-server.service failed (last exit status 3, result exit-code)"),
    ({"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code", "ExecMainStatus": 1,
      "NRestarts": 0},
     "exited and waits to be restarted by systemd (last exit status 1, result exit-code, NRestarts=0)"),
    ({"ActiveState": "inactive", "SubState": "dead", "MainPID": 0},
     "vllm-server.service is inactive/dead, not starting"),
    ({"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead"},
     "vllm-server.service does not exist"),
    ({"NRestarts": 2}, "restarted 2 time(s) while waiting (NRestarts 0 -> 2"),
])
def test_dead_or_restarted_unit_fails_fast_without_waiting(props, expect):
    systemctl = FakeSystemctl(**props)
    clock = FakeClock()
    with EngineHTTP({"/health": [Reply(503)]}) as srv:
        with pytest.raises(_ready.Crashed) as exc:
            cycle(srv.url, "vllm", clock=clock, run_command=systemctl, unit="vllm-server.service",
                  timeout=600, since_restarts=0)
    assert expect in exc.value.msg
    assert "journalctl -u vllm-server.service" in exc.value.msg or "not-found" in exc.value.msg
    assert clock.sleeps == []  # failed on the first look, no polling
    assert exc.value.state["unit"] == "vllm-server.service"


def test_restart_count_at_the_baseline_is_not_a_crash():
    systemctl = FakeSystemctl(NRestarts=3)
    with EngineHTTP({"/health_generate": [Reply(200)]}) as srv:
        res = cycle(srv.url, "sglang", run_command=systemctl, unit="sglang-server.service",
                    timeout=0, since_restarts=3)
    assert res["ready"] is True
    assert res["state"]["n_restarts"] == 3


def test_unit_dying_during_a_probe_is_reported_as_crash_not_as_http_error():
    systemctl = FakeSystemctl()

    def die():
        systemctl.set(ActiveState="activating", SubState="auto-restart", ExecMainStatus=0, NRestarts=1)

    with EngineHTTP({"/health": [Reply(503, on_request=die)]}) as srv:
        with pytest.raises(_ready.Crashed) as exc:
            cycle(srv.url, "vllm", run_command=systemctl, unit="vllm-server.service", timeout=600,
                  since_restarts=0)
    assert "waits to be restarted by systemd (last exit status 0" in exc.value.msg


def test_systemctl_failure_surfaces_as_unit_query_error():
    def broken(argv, **kwargs):
        return 1, "", "Failed to connect to bus: No such file or directory"

    with pytest.raises(_ready.UnitQueryError) as exc:
        cycle(closed_port_url(), "vllm", run_command=broken, unit="x.service", timeout=0)
    assert "Failed to connect to bus" in str(exc.value)


# --- the engine's last words after a crash ----------------------------------------------------

def test_engine_log_tail_leaves_out_systemd_and_decodes_byte_messages():
    journal = [
        {"MESSAGE": "INFO loading weights", "_PID": "311", "SYSLOG_IDENTIFIER": "vllm"},
        {"MESSAGE": [69, 114, 114, 58, 32, 0xff], "_PID": "311", "SYSLOG_IDENTIFIER": "vllm"},
        {"MESSAGE": "RuntimeError: Engine core initialization failed.", "_PID": "311"},
        {"MESSAGE": "vllm-server.service: Main process exited, code=exited, status=1/FAILURE",
         "_PID": "1", "SYSLOG_IDENTIFIER": "systemd"},
        {"MESSAGE": "   ", "_PID": "311"},
    ]
    systemctl = FakeSystemctl(journal=journal)
    tail = _ready.engine_log_tail(systemctl, "vllm-server.service", lines=2)
    assert tail == ["Err: \ufffd", "RuntimeError: Engine core initialization failed."]
    argv = systemctl.calls[0]
    assert argv[:3] == ["journalctl", "--unit", "vllm-server.service"]
    assert "json" in argv


def test_engine_log_tail_leads_with_the_root_cause_of_the_last_run():
    """vLLM's engine prints its own wrappers after the worker's error: the cause comes first."""
    def line(msg, run="b"):
        return {"MESSAGE": msg, "_PID": "640", "_SYSTEMD_INVOCATION_ID": run}

    journal = [line("ValueError: an earlier start's error", run="a"),
               line("Traceback (most recent call last):"),
               line("(EngineCore_DP0 pid=700) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
               line("Traceback (most recent call last):"),
               line("RuntimeError: Worker failed with error 'VLLM::Worker_TP0 (rank 0) exited with code 1', please "
                    "check the stack trace above for the root cause"),
               line("(APIServer pid=640) ERROR 12-01 21:11:15 [core_client.py:1] Engine core initialization failed."),
               line("Traceback (most recent call last):"),
               line("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")]
    tail = _ready.engine_log_tail(FakeSystemctl(journal=journal), "vllm-server.service", lines=3)
    assert tail[0].endswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert tail[1:] == [m["MESSAGE"] for m in journal[-3:]]
    # A cause already in the tail is not repeated; an earlier start's error is never the cause.
    assert _ready.engine_log_tail(FakeSystemctl(journal=journal[:3]), "u.service", lines=3) == [
        m["MESSAGE"] for m in journal[1:3]]
    assert _ready.engine_log_tail(FakeSystemctl(journal=journal[:1] + journal[3:5]), "u.service", lines=1) == [
        journal[4]["MESSAGE"]]


def test_engine_log_tail_finds_the_cause_behind_vllms_logger_prefix():
    """A real vLLM 0.32 (tests/real) logs a failed worker's traceback line by line through its logger."""
    def line(msg):
        return {"MESSAGE": msg, "_PID": "1914", "_SYSTEMD_INVOCATION_ID": "r"}

    cause = ("(Worker pid=2034) ERROR 12-04 01:50:28 [multiproc_executor.py:953] ValueError: There is no module "
             "or parameter named 'draft_id_to_target_id' in Eagle3LlamaForCausalLM.")
    journal = [line("(Worker pid=2034) ERROR 12-04 01:50:28 [multiproc_executor.py:953] Traceback (most recent "
                    "call last):"),
               line("(Worker pid=2034) ERROR 12-04 01:50:28 [multiproc_executor.py:953]     raise ValueError(msg)"),
               line(cause),
               line("(EngineCore pid=1990) ERROR 12-04 01:50:30 [core.py:1510] EngineCore failed to start."),
               line("    raise RuntimeError("),
               line("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")]
    tail = _ready.engine_log_tail(FakeSystemctl(journal=journal), "vllm-server.service", lines=2)
    assert tail == [cause] + [m["MESSAGE"] for m in journal[-2:]]


def test_engine_log_tail_is_empty_when_journalctl_fails():
    assert _ready.engine_log_tail(FakeSystemctl(journal=[{"MESSAGE": "x"}], journal_rc=1), "u.service") == []

    def missing(argv, **kwargs):
        raise OSError("journalctl: not found")

    assert _ready.engine_log_tail(missing, "u.service") == []


# --- API key and URL ------------------------------------------------------------------------------

def test_a_key_with_a_newline_is_refused_before_any_request():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        with pytest.raises(_secrets.BadHeaderValue, match="api_key contains a line feed") as exc:
            cycle(srv.url, "vllm", timeout=0, api_key="s3cret\n")
    assert srv.requests == []
    assert "s3cret" not in str(exc.value)


def test_a_base_url_with_v1_probes_the_server_root():
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        assert cycle(srv.url + "/v1/", "vllm", timeout=0)["ready"] is True
    assert srv.paths() == ["/health", "/v1/models"]


# --- the answer must come from the unit's own process (issue 31 item 2) ------------------------------

def _fake_proc(tmp_path, port, listeners):
    """A /proc with one listening socket on PORT per (pid, cgroup path) in LISTENERS, plus a non-listener."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = ["   %d: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 %d 1"
            % (i, port, 9000 + i) for i in range(len(listeners))]
    rows.append("   9: 0100007F:%04X 0100007F:D431 01 00000000:00000000 00:00000000 00000000   999        0 8999 1"
                % port)  # an established connection to the port: not a listener
    (proc / "net" / "tcp").write_text(head + "\n".join(rows) + "\n")
    (proc / "net" / "tcp6").write_text(head)
    for i, (pid, cgroup) in enumerate(listeners + [(77, "/user.slice")]):
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "fd" / "3").symlink_to("socket:[%d]" % (9000 + i if pid != 77 else 8999))
        (proc / str(pid) / "cgroup").write_text("1:name=systemd:%s\n0::%s\n" % (cgroup, cgroup))
        (proc / str(pid) / "comm").write_text("python3\n")
    return str(proc)


UNIT_CG = "/system.slice/vllm-server-candidate.service"


def test_port_listeners_reads_listening_sockets_only(tmp_path):
    proc = _fake_proc(tmp_path, 8001, [(42, UNIT_CG), (43, UNIT_CG)])
    assert _ready.port_listeners(8001, proc) == [42, 43]
    assert _ready.port_listeners(8000, proc) == []


def test_the_units_own_listener_is_no_problem(tmp_path):
    proc = _fake_proc(tmp_path, 8001, [(42, UNIT_CG)])
    systemctl = FakeSystemctl(ControlGroup=UNIT_CG)
    assert _ready.listener_problem(systemctl, "vllm-server-candidate.service", "http://127.0.0.1:8001", proc) is None
    # Not on this host, or no unit: nothing to check.
    assert _ready.listener_problem(systemctl, "u.service", "http://10.0.0.5:8001", proc) is None
    assert _ready.listener_problem(systemctl, None, "http://127.0.0.1:8001", proc) is None


def test_another_process_on_the_candidates_port_is_named(tmp_path):
    proc = _fake_proc(tmp_path, 8001, [(4711, "/system.slice/stray.service")])
    why = _ready.listener_problem(FakeSystemctl(ControlGroup=UNIT_CG), "vllm-server-candidate.service",
                                  "http://127.0.0.1:8001", proc)
    assert why.startswith("port 8001 is held by pid 4711 (python3), not by a process of vllm-server-candidate.service")


def test_a_candidate_is_not_ready_when_another_server_answers_on_its_port(tmp_path):
    """A stray server on the candidate's port answers /health and /v1/models: readiness must not take it."""
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        proc = _fake_proc(tmp_path, port, [(4711, "/system.slice/stray.service")])
        with pytest.raises(_ready.Crashed) as err:
            cycle(srv.url, "vllm", model="m", timeout=0, unit="vllm-server-candidate.service",
                  run_command=FakeSystemctl(ControlGroup=UNIT_CG), proc=proc)
    assert "another server answers in its place" in err.value.msg
    # The same server as the unit's own process is ready.
    with EngineHTTP({"/health": [Reply(200)], "/v1/models": [Reply(200, models("m"))]}) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        proc = _fake_proc(tmp_path / "own", port, [(42, UNIT_CG)])
        res = cycle(srv.url, "vllm", model="m", timeout=0, unit="vllm-server-candidate.service",
                    run_command=FakeSystemctl(ControlGroup=UNIT_CG), proc=proc)
    assert res["ready"] is True
