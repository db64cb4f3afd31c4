#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spec_bench_wait
short_description: Wait one bounded cycle for a benchmark started with async, renewing the guard's lease
version_added: 0.1.0
description:
  - Waits for at most O(timeout) seconds for a P(llmops.specdec.spec_bench#module) job that was started with
    C(async) and C(poll=0), by reading its results file on the host, and returns whether it finished.
  - Meant to be called in an C(until) loop, one cycle per retry, so each cycle prints a line and each cycle
    renews the host guard's lease (O(lease)) from the controller. A controller lost during the benchmark
    renews nothing more, so the guard restores the previous configuration within one O(lease.ttl); the
    benchmark, which only watches the lease, stops by itself then. See the P(llmops.specdec.spec_switch#role)
    role's C(bench_wait.yml).
  - Once the job finished, the module returns the benchmark's result (RV(bench), RV(msg)) and removes the
    results file; when the benchmark failed, this module fails with its message, and with RV(lease_lost) when
    the benchmark stopped because the lease ran out.
author:
  - llmops.specdec developers (@llmops)
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.lease
options:
  job:
    description:
      - The results file of the job, as the task started with C(async) and C(poll=0) returned it (its
        C(results_file)).
    type: path
    required: true
  timeout:
    description:
      - Longest time in seconds this one cycle waits before it returns RV(finished=false).
      - C(0) reads the results file once.
    type: float
    default: 30
  poll:
    description:
      - Seconds between two reads of the results file.
    type: float
    default: 1
attributes:
  check_mode:
    support: full
    details:
      - Waits and reads as without check mode, but renews no lease (a check arms no guard) and leaves the
        results file in place.
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - Each call renews the lease (a change on the host) and a finished job's results file is removed.
notes:
  - Runs on the host that runs the benchmark, as the same user (the results file is under that user's
    C(~/.ansible_async)).
"""

EXAMPLES = r"""
- name: Start the benchmark on the host; the lease is the controller's to renew
  llmops.specdec.spec_bench:
    url: http://127.0.0.1:8000
    lease: "{{ lease }}"
  async: 1920
  poll: 0
  register: bench_job

- name: Wait for the benchmark, one line and one renewal per 30 s cycle
  llmops.specdec.spec_bench_wait:
    job: "{{ bench_job.results_file }}"
    lease: "{{ lease }}"
    timeout: 30
  register: bench
  until: bench is failed or bench.finished
  retries: 64
  delay: 0
"""

RETURN = r"""
finished:
  description: Whether the benchmark job has finished.
  returned: always
  type: bool
  sample: false
waited:
  description: Seconds this cycle waited.
  returned: always
  type: float
  sample: 30.0
renewed_until:
  description: The guard's new deadline (ISO 8601, UTC) after this cycle's renewal; null without O(lease) or in check mode.
  returned: always
  type: str
  sample: "2026-12-04T03:01:12.123Z"
bench:
  description: The benchmark's result, as P(llmops.specdec.spec_bench#module) returns it in its RV(bench).
  returned: when the job finished and the benchmark returned figures
  type: dict
lease_lost:
  description:
    - Why the lease on the host's guard ran out or could not be renewed (the guard restored the host, or another
      run owns it). The module then fails; the benchmark stops by itself.
  returned: when the lease was lost
  type: str
msg:
  description: While the job runs, how long it has been waited for; once finished, the benchmark's own message.
  returned: always
  type: str
  sample: "1 level(s) (concurrency 1): 16 request(s) ok, 0 failed, in 52.1 s"
changed:
  description: Whether the lease was renewed (a new deadline on the host).
  returned: always
  type: bool
  sample: true
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.specdec.plugins.module_utils import _job, _lease

# What the benchmark's result passes on to this module's (the rest is Ansible's bookkeeping of the job).
RELAYED = ("bench", "lease_lost")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            job=dict(type="path", required=True),
            timeout=dict(type="float", default=30),
            poll=dict(type="float", default=1),
            lease=_lease.lease_argspec(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] < 0 or p["poll"] <= 0:
        module.fail_json(msg="timeout must be >= 0 and poll > 0, got %s and %s" % (p["timeout"], p["poll"]))
    lease = None if module.check_mode else p["lease"]
    renewed_until = None
    try:
        state = _lease.renew(lease)
        renewed_until = state["deadline_at"] if state else None
    except _lease.LeaseLost as exc:
        # Not fatal before the job says so: the benchmark watches the lease and ends with lease_lost itself,
        # so the next cycle returns its figures and its failure.
        module.warn("the lease on the host's guard could not be renewed: %s" % exc)
    try:
        result, waited = _job.wait_job(p["job"], p["timeout"], p["poll"])
    except _job.JobError as exc:
        module.fail_json(msg=str(exc), finished=False, waited=0.0, renewed_until=renewed_until, changed=bool(renewed_until))
    out = dict(finished=result is not None, waited=waited, renewed_until=renewed_until, changed=bool(renewed_until))
    if result is None:
        module.exit_json(msg="the benchmark still runs after this cycle of %.1f s" % waited, **out)
    for warning in result.get("warnings") or []:
        module.warn(warning if isinstance(warning, str) else str(warning.get("msg", warning)))
    out.update((key, result[key]) for key in RELAYED if key in result)
    if not module.check_mode:
        try:
            os.unlink(p["job"])
        except OSError as exc:
            module.warn("cannot remove the async job results file %s: %s" % (p["job"], exc))
    msg = result.get("msg") or ("the benchmark failed" if result.get("failed") else "the benchmark finished")
    if result.get("failed"):
        module.fail_json(msg=msg, **out)
    module.exit_json(msg=msg, **out)


if __name__ == "__main__":
    main()
