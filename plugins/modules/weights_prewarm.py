#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: weights_prewarm
short_description: Read a model's weight files into the page cache, only when they fit, at idle I/O priority
version_added: 0.6.0
description:
  - Reads the weight files (C(.safetensors), C(.bin), C(.pt), C(.pth), C(.gguf)) under O(paths) into the host's
    page cache, so that an engine started next loads them from memory instead of the disk. Only the chunks not
    cached yet are read (C(mincore(2)) says which).
  - "Only when they fit: the bytes still to read must stay within the host's C(MemAvailable) minus
    O(margin_gib) and O(reserve_bytes) (for example what a parked baseline will copy to CPU memory). When they
    do not, nothing is read and RV(skipped) says why. The check is made again before every chunk, and the
    reading stops (RV(stopped)) when memory runs short meanwhile or O(timeout) passes."
  - Runs at idle I/O priority (C(ionice -c 3)) and the lowest CPU priority, so a serving engine's own I/O
    goes first.
  - Paths that are not on this host (a hub id, say) are listed in RV(missing) and skipped.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
options:
  paths:
    description: Model directories or weight files on this host (the candidate's target model and its draft).
    type: list
    elements: str
    required: true
  margin_gib:
    description: CPU memory in GiB that the warm-up leaves available to the host.
    type: float
    default: 8
  reserve_bytes:
    description: Bytes kept available beyond the margin (a parked engine's weights in CPU memory).
    type: int
    default: 0
  reserve_paths:
    description:
      - Model directories or files whose weight files' size is kept available too, beside O(reserve_bytes) (the
        baseline's model when it will be parked, which copies its weights to CPU memory).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds the reading may take; what is read by then stays cached.
    type: float
    default: 900
  io_priority:
    description: V(idle) reads only when no other process uses the disk; V(normal) keeps the default class.
    type: str
    default: idle
    choices: [idle, normal]
attributes:
  check_mode:
    support: full
    details:
      - Plans (files, what is cached, whether it fits) and reads nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - The result's C(changed) is always V(false) - the page cache is no configuration, and a second run reads nothing
    that is still cached.
  - Measured on an H200 host (docs/load.md) - safetensors to the GPU at 1.45 GB/s from disk, 6.5 GB/s from the page cache.
"""

EXAMPLES = r"""
- name: Read the candidate's weights into the page cache while the baseline still serves
  llmops.specdec.weights_prewarm:
    paths: [/models/kimi-k2, /models/kimi-k2-eagle3]
    margin_gib: 32
  register: prewarm
"""

RETURN = r"""
files:
  description: Weight files found under O(paths).
  returned: always
  type: int
  sample: 64
total_bytes:
  description: Their size.
  returned: always
  type: int
cached_bytes:
  description: What of it was in the page cache before the warm-up.
  returned: always
  type: int
read_bytes:
  description: What the warm-up read (0 in check mode or when skipped).
  returned: always
  type: int
seconds:
  description: How long the reading took.
  returned: always
  type: float
read_gbps:
  description: RV(read_bytes) per second, in GB/s; V(null) when nothing was read.
  returned: always
  type: float
available_bytes:
  description: The host's C(MemAvailable) before the warm-up.
  returned: always
  type: int
budget_bytes:
  description: What the warm-up could read - RV(available_bytes) less the margin and the reserve.
  returned: always
  type: int
fits:
  description: Whether what was not cached fit in RV(budget_bytes).
  returned: always
  type: bool
skipped:
  description: Why nothing was read (no files, does not fit); V(null) when it read.
  returned: always
  type: str
stopped:
  description: Why the reading stopped before the end (memory ran short, timeout); V(null) when it read everything.
  returned: always
  type: str
reserve_bytes:
  description: What was kept available beyond the margin - O(reserve_bytes) plus the weights under O(reserve_paths).
  returned: always
  type: int
missing:
  description: Entries of O(paths) with no weight files on this host.
  returned: always
  type: list
  elements: str
io_priority:
  description: The I/O priority the reading ran at (V(normal) when C(ionice) is missing).
  returned: always
  type: str
msg:
  description: One human line.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _prewarm

GIB = 1024 ** 3


def _meminfo():
    with open("/proc/meminfo", encoding="ascii") as f:
        return f.read()


def _lower_priority(module, wanted):
    """Idle I/O class and the lowest CPU priority for this process; the class it got."""
    os.nice(19)
    if wanted != "idle":
        return "normal"
    ionice = module.get_bin_path("ionice")
    if ionice is None:
        module.warn("ionice is not installed: the weights are read at the normal I/O priority")
        return "normal"
    rc, _out, err = module.run_command([ionice, "-c", "3", "-p", str(os.getpid())])
    if rc != 0:
        module.warn("ionice failed (%s): the weights are read at the normal I/O priority" % err.strip())
        return "normal"
    return "idle"


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "str", "required": True},
            "margin_gib": {"type": "float", "default": 8},
            "reserve_bytes": {"type": "int", "default": 0},
            "reserve_paths": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "float", "default": 900},
            "io_priority": {"type": "str", "default": "idle", "choices": ["idle", "normal"]},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["margin_gib"] < 0 or p["reserve_bytes"] < 0 or p["timeout"] <= 0:
        module.fail_json(msg="margin_gib and reserve_bytes must not be negative, timeout must be positive")
    margin = int(p["margin_gib"] * GIB)
    reserve = p["reserve_bytes"] + sum(size for path in p["reserve_paths"] for _name, size in _prewarm.weight_files(path))
    planned = _prewarm.plan(p["paths"], _meminfo(), margin, reserve)
    result = {k: planned[k] for k in ("total_bytes", "cached_bytes", "available_bytes", "budget_bytes", "fits",
                                      "skipped", "missing")}
    result["reserve_bytes"] = reserve
    result.update(changed=False, files=len(planned["files"]), read_bytes=0, seconds=0.0, read_gbps=None,
                  stopped=None, io_priority=p["io_priority"])
    if planned["skipped"] or module.check_mode:
        result["msg"] = planned["skipped"] or "would read %.2f GiB of %d files (%.2f GiB cached)" % (
            planned["to_read_bytes"] / GIB, result["files"], planned["cached_bytes"] / GIB)
        module.exit_json(**result)
    result["io_priority"] = _lower_priority(module, p["io_priority"])

    def available_now():
        return _prewarm.meminfo(_meminfo()).get("MemAvailable")

    done = _prewarm.warm(planned, available_now, margin, reserve,
                         deadline=time.monotonic() + p["timeout"])
    result.update(done)
    result["msg"] = "read %.2f GiB in %.1f s%s (%.2f GiB were cached)%s" % (
        done["read_bytes"] / GIB, done["seconds"],
        " at %.2f GB/s" % done["read_gbps"] if done["read_gbps"] else "", planned["cached_bytes"] / GIB,
        "; stopped: " + done["stopped"] if done["stopped"] else "")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
