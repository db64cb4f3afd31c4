# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_group renders a serving group's nodes from one spec (issue 33); tests/engines has the engines' parsers read them."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _group
from unit_render import render  # tests/unit/plugins/module_utils is on sys.path

NODES = ["gpu-a01", "gpu-a02"]
GROUP = {"nodes": NODES, "rendezvous_address": "10.0.0.1", "rendezvous_port": 29500, "tensor_parallel_size": 16}
EAGLE3 = {"method": "eagle3", "draft_model": "org/head", "num_speculative_tokens": 3}


def test_alone_is_no_group():
    assert _group.node("vllm", [], "gpu-a01", "", 0, 8) is None
    _text, checked = render()
    assert checked["serving_group"] is None and "--nnodes" not in checked["argv"] and checked["serves_api"]


def test_vllm_nodes_share_the_spec_and_differ_in_rank_and_headless():
    argvs = {}
    for name in NODES:
        _text, checked = render(node=name, spec=EAGLE3, **GROUP)
        argvs[name] = checked["argv"]
        assert checked["serving_group"]["head"] == "gpu-a01" and checked["serving_group"]["nnodes"] == 2
        assert checked["serves_api"] is (name == "gpu-a01")  # the workers run --headless
    head, worker = argvs["gpu-a01"], argvs["gpu-a02"]
    assert head[head.index("--nnodes"):head.index("--nnodes") + 8] == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29500"]
    assert worker[worker.index("--node-rank") + 1] == "1" and "--headless" in worker and "--headless" not in head
    # The same speculative config on every node, byte for byte.
    spec = [a[a.index("--speculative-config") + 1] for a in (head, worker)]
    assert spec[0] == spec[1]
    assert [a for a in head if a not in ("0",)] == [a for a in worker if a not in ("1", "--headless")]


def test_sglang_nodes_name_the_head_as_host_and_port():
    _text, checked = render(engine="sglang", unit="sglang-server.service", executable="/usr/bin/python3",
                            user="sglang", group="sglang", port=30000, node="gpu-a02", spec={"method": "none"}, **GROUP)
    argv = checked["argv"]
    assert argv[argv.index("--nnodes"):argv.index("--nnodes") + 6] == [
        "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"]


def test_the_rendezvous_defaults_to_the_head():
    out = _group.node("vllm", NODES, "gpu-a02", "", 29500, 2)
    assert out["address"] == "gpu-a01" and out["rank"] == 1 and not out["is_head"]


@pytest.mark.parametrize("nodes, this, address, port, tp, words", [
    (["gpu-a01"], "gpu-a01", "", 29500, 8, "at least 2"),
    (NODES, "gpu-b07", "", 29500, 16, "is not in spec_server_nodes"),
    (["gpu-a01", "gpu-a01"], "gpu-a01", "", 29500, 16, "twice"),
    (NODES, "gpu-a01", "", 0, 16, "spec_server_rendezvous_port"),
    (NODES, "gpu-a01", "fd00::1", 29500, 16, "IPv6"),
    (NODES, "gpu-a01", "10.0.0.1 --api-key x", 29500, 16, "spec_server_rendezvous_address"),
    (NODES, "gpu-a01", "", 29500, 3, "does not split over 2 nodes"),
    (["-gpu"], "-gpu", "", 29500, 2, "spec_server_nodes"),
])
def test_bad_groups_are_refused_before_the_host_is_touched(nodes, this, address, port, tp, words):
    with pytest.raises(_gate.GateError, match=words):
        _group.node("vllm", nodes, this, address, port, tp)


@pytest.mark.parametrize("engine, flag", [("vllm", "--nnodes=4"), ("vllm", "-r"), ("vllm", "--master_addr=x"),
                                          ("vllm", "--headless"), ("sglang", "--dist-init-addr=x:1"),
                                          ("sglang", "--nccl-init-addr=x:1"), ("sglang", "--node-rank")])
def test_the_group_flags_are_owned(engine, flag):
    extra = {"engine": engine, "extra_args": [flag]}
    if engine == "sglang":
        extra.update(unit="sglang-server.service", executable="/usr/bin/python3", user="sglang", group="sglang",
                     port=30000)
    with pytest.raises(_gate.GateError, match="spec_server_nodes, spec_server_rendezvous_address"):
        render(**extra)


@pytest.mark.parametrize("engine, port, expected", [("vllm", None, "29501"), ("vllm", "", "29501"),
                                                    ("sglang", None, "gpu-a01:20000"), ("vllm", 23456, "23456")])
def test_the_rendezvous_port_defaults_to_the_engines(engine, port, expected):
    """The role's null port is the adapter's GROUP_DEFAULT_PORT (vLLM's own master_port; SGLang has none)."""
    out = _group.node(engine, NODES, "gpu-a02", "", port, 2)
    assert expected in out["args"]


def test_each_node_runs_its_share_of_the_ranks_on_its_own_gpus():
    """TP 16 over 2 nodes: 8 GPUs a node, by default 0-7 on each; fewer than the share is refused."""
    _text, checked = render(node="gpu-a02", **GROUP)
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in checked["environment"]
    assert checked["argv"][checked["argv"].index("--tensor-parallel-size") + 1] == "16"
    _text, checked = render(node="gpu-a02", cuda_visible_devices=list(range(8)), **GROUP)
    assert checked["gpus"] == [str(i) for i in range(8)]
    with pytest.raises(_gate.GateError, match=r"tensor_parallel_size=16 over 2 nodes needs 8 GPUs on each"):
        render(node="gpu-a02", cuda_visible_devices=[0, 1], **GROUP)


def test_a_play_without_every_node_is_refused():
    """A --limit or an AWX slice that holds part of a group is refused: the group acts whole."""
    with pytest.raises(_gate.GateError, match=r"nodes gpu-a01 are not in this play"):
        _group.node("vllm", NODES, "gpu-a02", "", None, 2, play_hosts=["gpu-a02", "gpu-b01"])
    assert _group.node("vllm", NODES, "gpu-a02", "", None, 2, play_hosts=NODES + ["gpu-b01"])["rank"] == 1


def test_a_group_is_switched_whole_but_not_swept_tuned_or_parked():
    """spec_switch's gate (_switch.settings) lets a group switch (group.yml) and refuses what is not built for one."""
    group = _group.node("vllm", NODES, "gpu-a02", "", None, 2)
    _group.refuse_switch(None, "sweep", park=True)
    _group.refuse_switch(group)
    with pytest.raises(_gate.GateError, match=r"node 1 of a serving group of 2 .*a sweep of a serving group is not "
                                              r"built yet .*nothing was touched"):
        _group.refuse_switch(group, "sweep")
    with pytest.raises(_gate.GateError, match=r"parking a serving group's baseline"):
        _group.refuse_switch(group, park=True)
