# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``lease`` option of the modules that renew it from the controller's tasks (engine_ready,
spec_bench_wait, gpu_reclaim, spec_unit). spec_bench documents its own: it watches the lease and never renews it.

Its argument spec is ``module_utils._lease.LEASE_ARGSPEC``; keep the two in step.
"""
from __future__ import annotations


class ModuleDocFragment:
    # Use with `extends_documentation_fragment: [llmops.specdec.lease]`.
    DOCUMENTATION = r"""
options:
  lease:
    description:
      - The switch's lease on the host's guard (P(llmops.specdec.switch_guard#module)). The module extends the
        guard's deadline to now + O(lease.ttl) when it starts, so each task (each retry of a task in an C(until)
        loop) the controller runs is one renewal, and the guard restores the previous configuration within one
        O(lease.ttl) of a lost controller. Keep one call shorter than O(lease.ttl).
      - P(llmops.specdec.gpu_reclaim#module), and P(llmops.specdec.spec_unit#module) while its rollback stops
        the candidate, also renew it every third of O(lease.ttl) while they stop and verify (a step bounded by its
        own timeouts, which the guard's restore must not race), and once more when that ends.
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
