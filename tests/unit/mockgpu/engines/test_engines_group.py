# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A serving group across nodes (issue 33): the mock engines' rendezvous (mockengine/group.py).

Each node is a mock engine process with its own temp mock host (its own GPUs and holder registry), all on
127.0.0.1 with distinct ports: the head (node rank 0) listens on the rendezvous port, the worker node
connects to it. Each test says how many of its nodes reached the rendezvous.
"""
from __future__ import annotations

import json
import signal
import time

import pytest

from conftest import MockGpuHost, argv0, free_port, wait_until

VLLM_NGRAM3 = ("--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}))
# The same config in other spellings (dotted keys, underscores): the nodes must agree on it.
VLLM_NGRAM3_DOTTED = ("--speculative_config.method", "ngram", "--speculative-config.num_speculative_tokens", "3",
                      "--speculative-config.prompt_lookup_max", "4")
VLLM_NGRAM4 = ("--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}))
SGLANG_NGRAM8 = ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8")


@pytest.fixture
def hosts(tmp_path):
    """Two mock GPU hosts (the head's, the worker node's)."""
    return MockGpuHost(tmp_path / "head", load_seconds=0.3), MockGpuHost(tmp_path / "worker", load_seconds=0.3)


def vllm_node(engines, host, rank, port, *args, nnodes=2, tp=2):
    flags = ["--tensor-parallel-size", str(tp), "--nnodes", str(nnodes), "--node-rank", str(rank),
             "--master-addr", "127.0.0.1", "--master-port", str(port)]
    return engines.vllm(host, *(flags + (["--headless"] if rank else []) + list(args)))


def sglang_node(engines, host, rank, port, *args, nnodes=2, tp=2):
    flags = ["--tp-size", str(tp), "--nnodes", str(nnodes), "--node-rank", str(rank),
             "--dist-init-addr", "127.0.0.1:%d" % port]
    return engines.sglang(host, *(flags + list(args)))


def loaded(engine, line):
    """The node's own ranks finished loading (a line of their log), so from now on only the group holds it."""
    return wait_until(lambda: line in engine.log() or engine.proc.poll() is not None, 60)


def titles(host):
    return sorted(argv0(h["pid"]) for h in host.holders())


# -- vLLM -----------------------------------------------------------------------------------------------


def test_vllm_head_is_ready_only_once_the_worker_node_joined_and_dies_with_it(hosts, engines):
    """Reaches the rendezvous: both nodes (the head, then the worker node, which spells the same speculative
    config with dotted keys and underscores)."""
    head_host, worker_host = hosts
    port = free_port()
    head = vllm_node(engines, head_host, 0, port, *VLLM_NGRAM3)
    assert loaded(head, "Model loading took")  # the head's own rank is loaded...
    assert head.proc.poll() is None and head.status() == "refused"  # ...and it still waits for the group
    assert titles(head_host) == ["VLLM::Worker_TP0"]
    assert "world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:%d backend=nccl" % port in head.log()

    worker = vllm_node(engines, worker_host, 1, port, *VLLM_NGRAM3_DOTTED)
    assert head.wait_ready(60)[-1] == 200
    # The worker node: its rank holds its GPU like any rank, under the real title; no API server, no HTTP port.
    assert wait_until(lambda: titles(worker_host) == ["VLLM::Worker_TP1"], 60)
    assert worker.proc.poll() is None and worker.status() == "refused"
    log = worker.log()
    assert "Launching vLLM (v" in log and "headless multiproc executor, with head node address 127.0.0.1:%d" % port in log
    assert "world_size=2 rank=1 local_rank=0" in log

    worker.kill_group()  # the worker node dies: the group's next collective fails on the head
    assert head.proc.wait(60) == 0  # the EngineCore dies, and the API server exits 0 after it (vLLM #48966)
    log = head.log()
    assert "ncclRemoteError" in log and "node_rank 1 (127.0.0.1) closed its connection" in log
    assert "Engine core proc EngineCore_DP0 died unexpectedly" in log
    assert wait_until(lambda: head_host.holders() == [], 60)


def test_vllm_worker_with_another_speculative_config_fails_the_head_and_itself(hosts, engines):
    """Reaches the rendezvous: both nodes; the head refuses the worker node's hello."""
    head_host, worker_host = hosts
    port = free_port()
    head = vllm_node(engines, head_host, 0, port, *VLLM_NGRAM3)
    worker = vllm_node(engines, worker_host, 1, port, *VLLM_NGRAM4)
    assert head.proc.wait(60) == 1
    assert worker.proc.wait(60) == 1
    log = head.log()
    assert "RuntimeError: Configuration mismatch detected in the serving group: node_rank 1 has a different " \
           "speculative config: method=ngram, model=ngram, num_speculative_tokens=4 (head: method=ngram, model=ngram, " \
           "num_speculative_tokens=3)" in log
    assert "RuntimeError: Engine core initialization failed." in log
    assert "Application startup complete." not in log
    assert "different speculative config" in worker.log()
    assert wait_until(lambda: head_host.holders() == [] and worker_host.holders() == [], 60)


def test_vllm_worker_with_another_world_size_fails_the_head(hosts, engines):
    """Reaches the rendezvous: both nodes (the worker node runs TP 4 over the 2 nodes, the head TP 2)."""
    head_host, worker_host = hosts
    port = free_port()
    head = vllm_node(engines, head_host, 0, port)
    worker = vllm_node(engines, worker_host, 1, port, tp=4)
    assert head.proc.wait(60) == 1 and worker.proc.wait(60) == 1
    assert "node_rank 1 has world size 4, the head has world size 2" in head.log()
    # Not asserted: the worker node's rank lines (world_size=4 rank=2 ...). The head refuses the hello as soon as it
    # comes, and on a loaded machine that can be before the ranks logged (seen once beside a full test run).


def test_vllm_head_times_out_without_its_worker_node(hosts, engines):
    """Reaches the rendezvous: the head only (no worker node ever connects)."""
    head_host, _worker_host = hosts
    e = engines.vllm(head_host, "-tp", "2", "-n", "2", "-r", "0", "--master-port", str(free_port()),
                     env=head_host.env(VLLM_ENGINE_READY_TIMEOUT_S="2"))
    assert e.proc.wait(60) == 1
    log = e.log()
    assert "TimeoutError: Timed out waiting for engine core processes to start." in log
    assert "Waited 2s (configured by VLLM_ENGINE_READY_TIMEOUT_S)" in log
    assert wait_until(lambda: head_host.holders() == [], 60)


def test_vllm_worker_node_that_dies_loading_fails_the_head(hosts, engines):
    """Reaches the rendezvous: both nodes; the worker node's rank then fails while loading (fault group_rank_dies)."""
    head_host, worker_host = hosts
    worker_host.set_faults({"ngram": {"group_rank_dies": 1}})
    port = free_port()
    head = vllm_node(engines, head_host, 0, port, *VLLM_NGRAM3)
    worker = vllm_node(engines, worker_host, 1, port, *VLLM_NGRAM3)
    assert worker.proc.wait(60) == 1
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in worker.log()
    assert head.proc.wait(60) == 1
    log = head.log()
    assert "ncclRemoteError" in log and "node_rank 1 (127.0.0.1) closed its connection" in log
    assert "RuntimeError: Engine core initialization failed." in log


def test_vllm_head_stopping_stops_the_worker_node(hosts, engines):
    """Reaches the rendezvous: both nodes; the head's SIGTERM ends the group gracefully."""
    head_host, worker_host = hosts
    port = free_port()
    head = vllm_node(engines, head_host, 0, port)
    worker = vllm_node(engines, worker_host, 1, port)
    head.wait_ready(60)
    assert head.terminate() == 0
    assert worker.proc.wait(60) == 0
    assert wait_until(lambda: head_host.holders() == [] and worker_host.holders() == [], 60)


@pytest.mark.parametrize("args, message", [
    (("-tp", "2", "--nnodes", "3"), "`--nnodes 3` must evenly divide the total world size (2)"),
    (("-tp", "2", "--nnodes", "2", "--node-rank", "2"), "`--node-rank` must be between 0 and 1; got `--node-rank 2`"),
    (("--nnodes", "0"), "1 validation error for ParallelConfig\nnnodes\n  Input should be greater than or equal to 1"),
])
def test_vllm_refuses_a_group_it_cannot_split(gpu_host, engines, args, message):
    """Reaches the rendezvous: none (refused before anything starts)."""
    e = engines.vllm(gpu_host, *args)
    assert e.proc.wait(60) == 1
    assert message in e.log()
    assert gpu_host.holders() == []


def test_vllm_headless_on_rank_0_waits_for_a_front_end_and_holds_nothing(gpu_host, engines):
    """Reaches the rendezvous: none (--headless on node rank 0 starts data-parallel engines that wait for a front
    end, serve.py run_headless)."""
    e = engines.vllm(gpu_host, "--headless")
    assert wait_until(lambda: "Launching 1 data parallel engine(s) in headless mode" in e.log(), 60)
    assert e.proc.poll() is None and e.status() == "refused" and gpu_host.holders() == []
    assert e.terminate() == 0


# -- SGLang ---------------------------------------------------------------------------------------------


def test_sglang_head_is_ready_only_once_the_worker_node_joined(hosts, engines):
    """Reaches the rendezvous: both nodes (the worker node spells the algorithm in lower case and uses the
    --nccl-init-addr alias)."""
    head_host, worker_host = hosts
    port = free_port()
    head = sglang_node(engines, head_host, 0, port, *SGLANG_NGRAM8)
    assert loaded(head, "Load weight end.")
    assert head.proc.poll() is None and head.status() == 503
    assert titles(head_host) == ["sglang::scheduler_TP0"]

    worker = engines.sglang(worker_host, "--tp", "2", "--nnodes", "2", "--node-rank", "1",
                            "--nccl-init-addr", "127.0.0.1:%d" % port, "--speculative-algorithm", "ngram",
                            "--speculative-num-draft-tokens", "8")
    assert head.wait_ready(60)[-1] == 200
    assert " TP0] Init parallel begin." in head.log() and " TP0] Init parallel ends." in head.log()
    # node rank 1: its scheduler holds its GPU; no detokenizer; the dummy health server answers once joined
    assert wait_until(lambda: worker.status() == 200, 60)
    assert titles(worker_host) == ["sglang::scheduler_TP1"]
    assert worker.status("/health_generate") == 200 and worker.status("/v1/models") == 404
    assert "Init parallel ends." in worker.log()

    worker.proc.send_signal(signal.SIGTERM)  # a node of rank > 0 only logs it, and waits for rank 0
    assert wait_until(lambda: "SIGTERM received on node_rank 1" in worker.log(), 60)
    assert worker.proc.poll() is None
    assert head.terminate() == 0  # rank 0's ShutdownReq broadcast stops every node
    assert worker.proc.wait(60) == 0
    assert wait_until(lambda: head_host.holders() == [] and worker_host.holders() == [], 60)


def test_sglang_worker_with_another_speculative_config_fails_the_head_and_itself(hosts, engines):
    """Reaches the rendezvous: both nodes; the head refuses the worker node's hello."""
    head_host, worker_host = hosts
    port = free_port()
    head = sglang_node(engines, head_host, 0, port, *SGLANG_NGRAM8)
    worker = sglang_node(engines, worker_host, 1, port, "--speculative-algorithm", "NGRAM",
                         "--speculative-num-draft-tokens", "6")
    assert head.proc.wait(60) == 1 and worker.proc.wait(60) == 1
    log = head.log()
    assert "Configuration mismatch detected in the serving group: node_rank 1 has a different speculative config" in log
    assert "draft_tokens=6 (head: " in log and "Initialization failed" in log
    assert "The server is fired up" not in log
    assert wait_until(lambda: head_host.holders() == [] and worker_host.holders() == [], 60)


def test_sglang_worker_node_dying_after_ready_takes_the_head_down(hosts, engines):
    """Reaches the rendezvous: both nodes; then the worker node is killed."""
    head_host, worker_host = hosts
    port = free_port()
    head = sglang_node(engines, head_host, 0, port)
    worker = sglang_node(engines, worker_host, 1, port)
    head.wait_ready(60)
    worker.kill_group()
    assert head.proc.wait(60) == 1
    log = head.log()
    assert "ncclRemoteError" in log and "node_rank 1 (127.0.0.1) closed its connection" in log
    assert wait_until(lambda: head_host.holders() == [], 60)


def test_sglang_head_times_out_after_dist_timeout(hosts, engines):
    """Reaches the rendezvous: the head only."""
    head_host, _worker_host = hosts
    e = sglang_node(engines, head_host, 0, free_port(), "--dist-timeout", "2")
    assert e.proc.wait(60) == 1
    assert "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined." in e.log()


def test_sglang_refuses_a_tp_size_the_nodes_cannot_split(gpu_host, engines):
    """Reaches the rendezvous: none."""
    e = engines.sglang(gpu_host, "--tp", "2", "--nnodes", "3", "--node-rank", "1")
    assert e.proc.wait(60) == 1
    assert "AssertionError: tp_size must be divisible by number of nodes" in e.log()


def test_a_worker_node_waits_for_a_head_that_is_not_there_yet(hosts, engines):
    """Reaches the rendezvous: both nodes, the worker node first (it retries until the head listens, as a TCPStore
    client does)."""
    head_host, worker_host = hosts
    port = free_port()
    worker = sglang_node(engines, worker_host, 1, port)
    assert loaded(worker, "Load weight end.")
    time.sleep(0.5)  # retrying: not a timing check, the head is simply not started yet
    assert worker.proc.poll() is None and worker.status() == "refused"
    head = sglang_node(engines, head_host, 0, port)
    assert head.wait_ready(60)[-1] == 200
    assert wait_until(lambda: worker.status() == 200, 60)
