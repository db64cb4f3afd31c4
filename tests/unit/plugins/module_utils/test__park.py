# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_park's checks: the flag read from the running argv, CPU memory for the weights, the candidate's share."""
from __future__ import annotations

import os

from ansible_collections.llmops.specdec.plugins.module_utils import _park

GIB = 1024 ** 3
DEV = {"VLLM_SERVER_DEV_MODE": "1"}


def test_vllm_needs_sleep_mode_and_dev_mode():
    argv = ["python3", "/usr/bin/vllm", "serve", "m", "--enable-sleep-mode"]
    assert _park.park_problem("vllm", argv, DEV) is None
    assert "--enable-sleep-mode" in _park.park_problem("vllm", argv[:-1], DEV)
    assert "VLLM_SERVER_DEV_MODE=1" in _park.park_problem("vllm", argv, {})
    # vLLM's BooleanOptionalAction: a later --no-enable-sleep-mode turns it off again
    assert _park.park_problem("vllm", argv + ["--no-enable-sleep-mode"], DEV) is not None


def test_sglang_needs_the_memory_saver_only():
    argv = ["python3", "-m", "sglang.launch_server", "--enable-memory-saver"]
    assert _park.park_problem("sglang", argv, {}) is None
    assert "--enable-memory-saver" in _park.park_problem("sglang", argv[:-1], {})


def test_no_process_and_unknown_engine_are_reasons():
    assert "not running" in _park.park_problem("vllm", [], DEV)
    assert "cannot be parked" in _park.park_problem("tgi", ["x"], {})


def test_argv_and_environ_of_a_real_process():
    argv = _park.argv_of(os.getpid())
    assert argv and "python" in os.path.basename(argv[0]).lower()
    assert _park.environ_of(os.getpid()).get("PATH") == os.environ.get("PATH")
    assert _park.argv_of(2 ** 22 + 7) == [] and _park.environ_of(2 ** 22 + 7) == {}


def test_weights_on_disk_count_weight_files_only(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "sub" / "draft.bin").write_bytes(b"x" * 24)
    (tmp_path / "tokenizer.json").write_bytes(b"x" * 5000)
    assert _park.weights_bytes(str(tmp_path)) == 1024
    assert _park.weights_bytes(str(tmp_path / "model-00001.safetensors")) == 1000
    assert _park.weights_bytes("org/model-7b") is None and _park.weights_bytes(None) is None


def test_cpu_memory_must_hold_the_weights_and_the_headroom():
    meminfo = "MemTotal:       264000000 kB\nMemAvailable:   100000000 kB\n"
    available = _park.mem_available_bytes(meminfo)
    assert available == 100000000 * 1024
    assert _park.cpu_memory_problem(80 * GIB, available, 8 * GIB) is None
    why = _park.cpu_memory_problem(90 * GIB, available, 8 * GIB)
    assert "not enough CPU memory" in why and "90.0 GiB" in why and "95.4 GiB is available" in why
    assert "unknown" in _park.cpu_memory_problem(None, available)
    assert "MemAvailable" in _park.cpu_memory_problem(1, _park.mem_available_bytes("MemTotal: 1 kB\n"))


def test_candidate_share_is_lowered_to_the_fullest_gpu():
    rows = [{"total_mib": 100000, "free_mib": 97000}, {"total_mib": 100000, "free_mib": 91000}]
    assert _park.candidate_share(0.8, rows, 1000) == (0.8, None)
    share, why = _park.candidate_share(0.95, rows, 1000)
    assert share == 0.9 and why is None
    share, why = _park.candidate_share(0.9, [{"total_mib": 100000, "free_mib": 4000}], 1000)
    assert share is None and "no room" in why


def test_a_record_counts_only_for_the_process_that_parked(tmp_path):
    state = str(tmp_path / "parked")
    os.makedirs(state)
    with open(_park.record_path("vllm.service", state), "w") as f:
        f.write('{"main_pid": 42, "unit": "vllm.service"}')
    assert _park.parked("vllm.service", 42, state)["unit"] == "vllm.service"
    assert _park.parked("vllm.service", 43, state) is None  # restarted since: awake
    assert _park.parked("other.service", 42, state) is None
