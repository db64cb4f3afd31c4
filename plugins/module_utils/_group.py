# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A serving group: the hosts that serve one engine together across nodes, the head first (issue 33).

``spec_server_nodes`` lists the group's inventory hosts, the head first; every node renders its unit from the
same spec (so the same speculative config everywhere) and adds its rank and the head's rendezvous, in the
engine's own flags (the adapter's ``group_args``). Empty: this host alone serves the engine. Standard library only.
"""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate

__all__ = ["MAX_NODES", "node", "refuse_switch"]

MAX_NODES = 64


def _nodes(values):
    nodes = _gate.word_list("spec_server_nodes", values, lambda f, v: _gate.text(f, v, max_len=255, no_dash=True),
                            max_items=MAX_NODES)
    seen = set()
    for name in nodes:
        if name in seen:
            raise _gate.GateError("spec_server_nodes names %r twice: each host is one node of the group" % name)
        seen.add(name)
    return nodes


def node(engine, nodes, this, address, port, tp, play_hosts=None):
    """This host's place in its serving group, or None when it serves alone (``nodes`` empty).

    Returns ``{"nodes", "nnodes", "rank", "head", "is_head", "address", "port", "args"}``: ``args`` are the
    engine's flags for this node. ``port`` None (or '') is the engine's ``GROUP_DEFAULT_PORT``. Only the head serves
    the API (vLLM's workers run ``--headless``, SGLang's rank > 0 start no HTTP server). Refused before anything is
    touched: a group of one, a host not in it, a rendezvous that is not a host name or IPv4 address, a port out of
    range, a TP size the nodes cannot split, and (``play_hosts`` given: the play's hosts) a play without every node
    (a ``--limit``, an AWX slice or a ``serial`` batch that would act on part of the group).
    """
    if not nodes:
        return None
    nodes = _nodes(nodes)
    if len(nodes) < 2:
        raise _gate.GateError("spec_server_nodes lists the hosts of one engine's group, the head first: at least 2, "
                              "got 1 (leave it empty for an engine on one host)")
    if this not in nodes:
        raise _gate.GateError("this host (%r) is not in spec_server_nodes (%s): a node renders its own rank"
                              % (this, ", ".join(nodes)))
    address = _gate.name("spec_server_rendezvous_address", address or nodes[0], "host")
    if ":" in address:
        raise _gate.GateError("spec_server_rendezvous_address must be a host name or an IPv4 address, got %r "
                              "(an IPv6 rendezvous is not supported yet)" % address)
    if port is None or port == "":
        port = _engine.get(engine).GROUP_DEFAULT_PORT
    port = _gate.integer("spec_server_rendezvous_port", port, 1, 65535)
    # vLLM 0.33 (arg_utils.py: `--nnodes` must evenly divide the world size) and SGLang 0.5.23 (tp_size per node)
    # split the tensor-parallel ranks evenly over the nodes.
    if tp % len(nodes):
        raise _gate.GateError("spec_server_tensor_parallel_size %d does not split over %d nodes: each node runs "
                              "TP/%d ranks" % (tp, len(nodes), len(nodes)))
    if play_hosts is not None:
        missing = [n for n in nodes if n not in play_hosts]
        if missing:
            raise _gate.GateError("the serving group's nodes %s are not in this play's batch (a --limit, a job slice or a "
                                  "serial batch that splits the group): a group is deployed and switched whole" % ", ".join(missing))
    rank = nodes.index(this)
    return {"nodes": nodes, "nnodes": len(nodes), "rank": rank, "head": nodes[0], "is_head": rank == 0,
            "address": address, "port": port,
            "args": _engine.get(engine).group_args(rank, len(nodes), address, port)}


def refuse_switch(serving_group, operation="switch", park=False):
    """Refuse what a serving group cannot do yet (``node``'s output; None passes), before the host is touched.

    A group switches whole (roles/spec_switch/tasks/group.yml): every node locked, stopped and started on the one
    candidate, one verdict through the head, one rollback. A sweep or a tune of a group, and parking a group's
    baseline, are not built: a node switched alone would leave the group's nodes disagreeing on the speculative
    config, which cannot start or, worse, serves from nodes that disagree.
    """
    if not serving_group:
        return
    what = None
    if operation != "switch":
        what = "a %s of a serving group is not built yet (a plain switch is)" % operation
    elif park:
        what = "parking a serving group's baseline (spec_switch_park) is not built yet"
    if what:
        raise _gate.GateError(
            "this host is node %d of a serving group of %d (spec_server_nodes: %s): %s (docs/group.md); nothing "
            "was touched" % (serving_group["rank"], serving_group["nnodes"], ", ".join(serving_group["nodes"]), what))
