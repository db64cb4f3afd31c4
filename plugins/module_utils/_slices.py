# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slices of a fleet that keep every serving group whole (docs/fleet.md, "Slices").

Controller-only (the ``fleet_slice`` filter, playbooks/slice.yml). AWX's own job slicing deals hosts out by name,
``hosts[K-1::N]`` (awx/main/models/inventory.py, ``get_sliced_hosts``), and hands each slice an inventory that holds
only its hosts: a serving group lands in several slices, and no slice sees the whole group. The collection slices
itself instead: every job of a slice workflow gets the whole inventory and ``specdec_slice: K/N``, and keeps the
services of slice K. A service is a host alone, or a serving group (``spec_server_nodes``, the head first) whole.

The deal is deterministic (every job of the workflow must compute the same one): services largest first (by
hosts), ties by name, each to the slice with the fewest hosts so far, ties to the lowest slice. So no slice holds
more hosts than another plus the largest group's size.
"""

from __future__ import annotations

import re

__all__ = ["SliceError", "parse", "services", "deal", "pick"]

_SLICE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class SliceError(ValueError):
    """``specdec_slice`` cannot be read, or a serving group cannot be kept whole; the message says which."""


def parse(value):
    """``K/N`` (1 <= K <= N) as (K, N)."""
    match = _SLICE.match(str(value))
    if not match:
        raise SliceError("specdec_slice must read K/N (slice K of N, 1 <= K <= N), not %r" % (value,))
    number, count = int(match.group(1)), int(match.group(2))
    if not 1 <= number <= count:
        raise SliceError("specdec_slice %s: K must be between 1 and N" % value)
    return number, count


def services(hostvars, hosts):
    """{service name: [its hosts]}: a serving group under its head's name (head first), a host alone under its own.

    A group is keyed by its head even when the head is not among ``hosts``: its nodes then stay together, and the
    render gate refuses the group as incomplete (roles/spec_server), which a slice must not hide.
    """
    out = {}
    for host in hosts:
        nodes = hostvars[host].get("spec_server_nodes") or []
        nodes = list(nodes) if isinstance(nodes, (list, tuple)) else []
        if nodes and host not in nodes:
            raise SliceError("%s: spec_server_nodes %s does not list the host itself" % (host, nodes))
        head = nodes[0] if nodes else host
        out.setdefault(head, []).append((nodes.index(host) if nodes else 0, host))
    return {name: [host for _rank, host in sorted(members)] for name, members in out.items()}


def deal(hostvars, hosts, count):
    """The N slices: a list of N lists of service names (see the module docstring)."""
    groups = services(hostvars, hosts)
    slices = [[] for _k in range(count)]
    sizes = [0] * count
    for name in sorted(groups, key=lambda n: (-len(groups[n]), n)):
        k = min(range(count), key=lambda i: (sizes[i], i))
        slices[k].append(name)
        sizes[k] += len(groups[name])
    return [sorted(s) for s in slices], groups


def pick(hostvars, hosts, slice_):
    """Slice ``K/N`` of ``hosts``: {"slice", "number", "count", "services", "hosts", "sizes"}. An empty slice
    (more slices than services) is no error: that job switches nothing."""
    number, count = parse(slice_)
    slices, groups = deal(hostvars, hosts, count)
    mine = slices[number - 1]
    return {"slice": "%d/%d" % (number, count), "number": number, "count": count, "services": mine,
            "hosts": [h for name in mine for h in groups[name]],
            "sizes": [sum(len(groups[n]) for n in s) for s in slices]}
