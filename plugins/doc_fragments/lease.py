# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``lease`` option of the modules that wait on the host (engine_ready, spec_bench, gpu_reclaim).

Its argument spec is ``module_utils._lease.LEASE_ARGSPEC``; keep the two in step.
"""
from __future__ import annotations


class ModuleDocFragment:
    # Use with `extends_documentation_fragment: [llmops.specdec.lease]`.
    DOCUMENTATION = r"""
options:
  lease:
    description:
      - The switch's lease on the host's guard (P(llmops.specdec.switch_guard#module)). While the module waits, it
        extends the guard's deadline to now + O(lease.ttl) at its start and every third of O(lease.ttl), so the
        guard restores the previous configuration within about one O(lease.ttl) of a lost controller.
      - When the guard is gone or belongs to another run (it restored the host), the module says so in
        RV(lease_lost) and fails.
    type: dict
    suboptions:
      statefile:
        description: The guard's state file (C(<state_dir>/guard/<unit>.json)).
        type: path
        required: true
      run_id:
        description: The run that armed the guard.
        type: str
        required: true
      ttl:
        description: Seconds each renewal grants.
        type: float
        required: true
"""
