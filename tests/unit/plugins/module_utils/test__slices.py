# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_slices: slices of a fleet that keep serving groups whole, against AWX's own job slicing (docs/fleet.md)."""

from __future__ import annotations

import itertools
import random

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _slices


def fleet(groups, singles):
    """hostvars of serving groups (lists of nodes, the head first) and hosts alone."""
    hv = {h: {} for h in singles}
    for nodes in groups:
        for node in nodes:
            hv[node] = {"spec_server_nodes": list(nodes)}
    return hv


def awx_slices(hosts, count):
    """AWX's job slicing (awx/main/models/inventory.py get_sliced_hosts): hosts by name, every count-th."""
    ordered = sorted(hosts)
    return [ordered[k::count] for k in range(count)]


GROUPS = [["kimi-a1", "kimi-a2"], ["ds-b1", "ds-b2", "ds-b3", "ds-b4"]]
SINGLES = ["gpu-c%02d" % i for i in range(1, 6)]


def test_awx_job_slicing_splits_a_serving_group():
    """Why the collection slices itself: AWX's deal by name puts a group's nodes in different slices."""
    hv = fleet(GROUPS, SINGLES)
    split = [g for g in GROUPS if len({k for k, s in enumerate(awx_slices(hv, 4)) for h in g if h in s}) > 1]
    assert split == GROUPS


@pytest.mark.parametrize("count", [1, 2, 3, 4, 16])
def test_slices_cover_the_fleet_once_and_keep_groups_whole(count):
    hv = fleet(GROUPS, SINGLES)
    picks = [_slices.pick(hv, list(hv), "%d/%d" % (k, count)) for k in range(1, count + 1)]
    hosts = [h for p in picks for h in p["hosts"]]
    assert sorted(hosts) == sorted(hv), "every host in exactly one slice"
    for nodes in GROUPS:
        holders = [p["number"] for p in picks if set(nodes) & set(p["hosts"])]
        assert len(holders) == 1, (nodes, holders)
        pick = picks[holders[0] - 1]
        assert [h for h in pick["hosts"] if h in nodes] == nodes, "the head first, then the ranks in order"
    sizes = [len(p["hosts"]) for p in picks]
    assert sizes == picks[0]["sizes"]
    assert max(sizes) - min(sizes) <= max(len(g) for g in GROUPS)


def test_the_deal_is_the_same_whatever_order_ansible_lists_the_hosts_in():
    hv = fleet(GROUPS, SINGLES)
    expected = [_slices.pick(hv, sorted(hv), "%d/3" % k) for k in (1, 2, 3)]
    rng = random.Random(7)
    for _round in range(20):
        hosts = list(hv)
        rng.shuffle(hosts)
        assert [_slices.pick(hv, hosts, "%d/3" % k) for k in (1, 2, 3)] == expected


def test_four_slices_of_the_example_fleet():
    """The deal itself: the 4-node group first, then the 2-node group, then hosts alone to the lightest slice."""
    hv = fleet(GROUPS, SINGLES)
    picks = [_slices.pick(hv, list(hv), "%d/4" % k) for k in (1, 2, 3, 4)]
    assert [p["services"] for p in picks] == [["ds-b1"], ["gpu-c05", "kimi-a1"], ["gpu-c01", "gpu-c03"], ["gpu-c02", "gpu-c04"]]
    assert picks[0]["hosts"] == ["ds-b1", "ds-b2", "ds-b3", "ds-b4"]
    assert picks[0]["sizes"] == [4, 3, 2, 2]


def test_more_slices_than_services_leaves_some_empty():
    hv = fleet([], ["gpu-1", "gpu-2"])
    picks = [_slices.pick(hv, list(hv), "%d/4" % k) for k in (1, 2, 3, 4)]
    assert [p["hosts"] for p in picks] == [["gpu-1"], ["gpu-2"], [], []]


def test_a_group_partly_in_the_play_stays_together_under_its_head():
    """A --limit that left the head out: the nodes still go to one slice, where the render gate refuses them."""
    hv = fleet(GROUPS, SINGLES)
    hosts = [h for h in hv if h != "ds-b1"]
    for count in (2, 3):
        holders = {p["number"] for p in (_slices.pick(hv, hosts, "%d/%d" % (k, count)) for k in range(1, count + 1))
                   for h in p["hosts"] if h.startswith("ds-b")}
        assert len(holders) == 1


@pytest.mark.parametrize("value", ["0/4", "5/4", "4", "a/b", "", "2/0", None, "1/2/3"])
def test_a_slice_that_cannot_be_read_is_refused(value):
    with pytest.raises(_slices.SliceError, match="specdec_slice"):
        _slices.parse(value)


def test_nodes_that_do_not_list_the_host_are_refused():
    hv = {"gpu-1": {"spec_server_nodes": ["gpu-2", "gpu-3"]}, "gpu-2": {}, "gpu-3": {}}
    with pytest.raises(_slices.SliceError, match="does not list the host itself"):
        _slices.pick(hv, list(hv), "1/2")


@pytest.mark.parametrize("count", [2, 4])
def test_every_permutation_of_a_small_fleet_deals_alike(count):
    hv = fleet([["g-1", "g-2"]], ["s-1", "s-2", "s-3"])
    first = None
    for hosts in itertools.permutations(hv):
        deal = [_slices.pick(hv, list(hosts), "%d/%d" % (k, count))["hosts"] for k in range(1, count + 1)]
        first = first or deal
        assert deal == first
