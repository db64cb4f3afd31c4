# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""engine_park main() against real mock engines (real processes, real HTTP) on the NVML shim: parking
gives the memory back and leaves the measured residual, the lowered share really fits a candidate
beside the parked engine, and a check that fails touches nothing. Only systemctl is faked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from ansible.module_utils import basic

from ansible_collections.llmops.specdec.plugins.module_utils import _systemd
from ansible_collections.llmops.specdec.plugins.modules import engine_park
from ansible_collections.llmops.specdec.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, run_module
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.reclaim_host import REPO, FakeUnits, alive, wait_for

ENGINES = os.path.join(REPO, "tests", "mockgpu", "engines")
RESIDUAL = 2000
TOTAL = 143771
UNIT = "engine.service"
WEIGHTS = 4 * 1024 ** 3  # what the tests say the weights take (the mock's model is not on disk)


def _tree(pid):
    """pid and its descendants, from /proc (the unit's cgroup, as systemd would list it)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except OSError:
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


class Engines:
    def __init__(self, root):
        self.root = str(root)
        self.procs = []
        self.profile = os.path.join(self.root, "profile.json")
        with open(self.profile, "w") as f:
            json.dump({"load_seconds": 0.2, "park": {"residual_mib": RESIDUAL, "weights_share": 0.5,
                                                     "gib_per_s": 400.0}}, f)

    def start(self, engine, gpus, share, *flags, **env):
        port = _free_port()
        if engine == "vllm":
            argv = [os.path.join(ENGINES, "bin", "vllm"), "serve", "org/model-7b", "--port", str(port),
                    "--gpu-memory-utilization", str(share)]
        else:
            argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/model-7b", "--port",
                    str(port), "--mem-fraction-static", str(share)]
        argv += ["--host", "127.0.0.1", "--tensor-parallel-size" if engine == "vllm" else "--tp-size",
                 str(len(gpus))] + list(flags)
        full_env = dict(os.environ, MOCK_ENGINE_PROFILE=self.profile, MOCK_ENGINE_FAULTS=os.path.join(self.root, "none"),
                        MOCK_ENGINE_MAX_LIFETIME="90", PYTHONPATH=ENGINES,
                        CUDA_VISIBLE_DEVICES=",".join(str(g) for g in gpus), **env)
        log = open(os.path.join(self.root, "engine-%d.log" % port), "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
        self.procs.append(proc)
        return proc, "http://127.0.0.1:%d" % port

    def ready(self, proc, url, timeout=30):
        def up():
            assert proc.poll() is None, "engine exited %s" % proc.returncode
            try:
                return urllib.request.urlopen(url + "/health", timeout=2).status == 200
            except OSError:
                return False
        wait_for(up, "engine ready", timeout)

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(10)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def engines(tmp_path):
    e = Engines(tmp_path)
    yield e
    e.stop()


@pytest.fixture
def systemctl(monkeypatch):
    fake = FakeUnits(monkeypatch, _systemd)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv))
    return fake


def _baseline(engines, systemctl, engine="vllm", flags=("--enable-sleep-mode",), env=None, share=0.6, gpus=(1,)):
    env = {"VLLM_SERVER_DEV_MODE": "1"} if env is None else env
    proc, url = engines.start(engine, list(gpus), share, *flags, **env)
    engines.ready(proc, url)
    systemctl.add(UNIT, _tree(proc.pid))
    return proc, url


def _park(url, tmp_path, engine="vllm", outcome=ExitJson, **more):
    args = {"url": url, "engine": engine, "unit": UNIT, "gpus": ["1"], "weights_bytes": WEIGHTS,
            "cpu_headroom_gib": 0.5, "state_dir": str(tmp_path / "parked"), "timeout": 30}
    args.update(more)
    return run_module(engine_park.main, args, outcome)


def _sleeping(url):
    return json.loads(urllib.request.urlopen(url + "/is_sleeping", timeout=5).read())["is_sleeping"]


def _held(host):
    return sorted(h["mib"] for h in _holders(host))


def _holders(host):
    out = []
    for name in os.listdir(host.registry):
        if not name.startswith("."):
            with open(os.path.join(host.registry, name)) as f:
                entry = json.loads(f.readline())
            if alive(entry["pid"]):  # a killed holder's entry stays until the registry is swept
                out.append(entry)
    return out


def test_park_keeps_the_residual_and_the_lowered_share_fits_a_candidate_beside_it(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    proc, url = _baseline(engines, systemctl, share=0.6)
    loaded = int(0.6 * TOTAL)
    checked = _park(url, tmp_path, candidate_share=0.99, _ansible_check_mode=True)
    assert checked["changed"] and checked["parked"] and checked["seconds"] is None
    assert _held(host) == [loaded]  # check mode sent nothing

    res = _park(url, tmp_path, candidate_share=0.99)
    assert res["changed"] and res["parked"] and res["refused"] is None
    assert res["kept_mib"] == RESIDUAL and [g["kept_mib"] for g in res["gpus"]] == [RESIDUAL]
    assert _held(host) == [RESIDUAL]
    share = res["candidate_share"]
    assert 0.95 < share < 0.99  # the residual, the driver's reserve and the headroom come off the 0.99 asked for
    assert os.stat(str(tmp_path / "parked" / (UNIT + ".json"))).st_mode & 0o777 == 0o600

    again = _park(url, tmp_path, candidate_share=0.99)
    assert not again["changed"] and again["parked"] and again["candidate_share"] == share

    # The share asked for does not fit beside the parked engine; the lowered one does.
    too_big, _big_url = engines.start("vllm", [1], 0.99)
    assert too_big.wait(30) != 0
    candidate, cand_url = engines.start("vllm", [1], share)
    engines.ready(candidate, cand_url)
    os.killpg(candidate.pid, 9)
    candidate.wait(10)
    wait_for(lambda: _held(host) == [RESIDUAL], "candidate gone")

    woke = _park(url, tmp_path, state="awake")
    assert woke["changed"] and not woke["parked"] and woke["seconds"] is not None
    assert _held(host) == [loaded]
    assert not _park(url, tmp_path, state="awake")["changed"]
    assert _sleeping(url) is False


def test_a_baseline_without_sleep_mode_is_refused_untouched(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    _proc, url = _baseline(engines, systemctl, flags=())
    res = _park(url, tmp_path)
    assert not res["changed"] and not res["parked"] and "--enable-sleep-mode" in res["refused"]
    assert _held(host) == [int(0.6 * TOTAL)]
    assert not os.path.exists(str(tmp_path / "parked"))


def test_too_little_cpu_memory_refuses_before_parking(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    _proc, url = _baseline(engines, systemctl)
    res = _park(url, tmp_path, weights_bytes=1024 ** 5)  # 1 PiB of weights
    assert not res["changed"] and "not enough CPU memory" in res["refused"]
    assert _held(host) == [int(0.6 * TOTAL)]
    assert _sleeping(url) is False


def test_no_room_for_the_candidate_wakes_the_baseline_again(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    _proc, url = _baseline(engines, systemctl, share=0.05)
    small = int(0.05 * TOTAL)
    host.hold((1, TOTAL - 615 - small - 1500))  # another job leaves 1500 MiB of the GPU free
    res = _park(url, tmp_path, candidate_share=0.9)
    assert res["changed"] and not res["parked"] and "no room" in res["refused"]
    assert small in _held(host) and not _sleeping(url)  # awake again, its memory back


def test_sglang_parks_by_its_memory_saver_and_the_record_makes_it_idempotent(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(3)
    _proc, url = _baseline(engines, systemctl, engine="sglang", flags=("--enable-memory-saver",), env={},
                           share=0.5, gpus=(1, 2))
    res = _park(url, tmp_path, engine="sglang", gpus=["1", "2"])
    assert res["changed"] and res["parked"] and [g["kept_mib"] for g in res["gpus"]] == [RESIDUAL, RESIDUAL]
    assert not _park(url, tmp_path, engine="sglang", gpus=["1", "2"])["changed"]
    woke = _park(url, tmp_path, engine="sglang", state="awake")
    assert woke["changed"] and _held(host) == [int(0.5 * TOTAL)] * 2


def test_a_wake_up_without_room_fails_with_wake_failed(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    proc, url = _baseline(engines, systemctl)
    assert _park(url, tmp_path)["parked"]
    host.hold((1, TOTAL - RESIDUAL - 5000))  # the freed memory taken by another job
    assert os.listdir(str(tmp_path / "parked"))
    res = _park(url, tmp_path, state="awake", outcome=FailJson)
    assert res["wake_failed"] and res["parked"]
    wait_for(lambda: proc.poll() is not None, "the engine exits", 15)
    assert os.listdir(str(tmp_path / "parked")) == []  # the caller restarts it: no record stands


def test_a_bad_share_fails_before_anything():
    res = run_module(engine_park.main, {"url": "http://127.0.0.1:1", "engine": "vllm", "unit": UNIT,
                                        "candidate_share": 1.5}, FailJson)
    assert "candidate_share" in res["msg"]


def test_weights_from_model_path_and_a_headroom_that_leaves_no_room(gpu_host, engines, systemctl, tmp_path):
    host = gpu_host(2)
    _proc, url = _baseline(engines, systemctl)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model-00001.safetensors").write_bytes(b"w" * 1000)
    res = _park(url, tmp_path, weights_bytes=None, model_path=str(model), candidate_share=0.5, gpu_headroom_mib=TOTAL)
    assert res["weights_bytes"] == 1000
    assert res["changed"] and not res["parked"] and "no room" in res["refused"] and "%d MiB" % TOTAL in res["refused"]
    assert _held(host) == [int(0.6 * TOTAL)] and not _sleeping(url)


def test_an_api_key_with_a_newline_is_refused_before_any_request(systemctl):
    res = run_module(engine_park.main, {"url": "http://127.0.0.1:1", "engine": "vllm", "unit": UNIT,
                                        "api_key": "sk-secret\n"}, FailJson)
    assert "control character" in res["msg"] and "sk-secret" not in res["msg"]
    assert systemctl.calls == []  # not even the unit was read
