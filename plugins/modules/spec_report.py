#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: spec_report
short_description: Write the verdicts of speculative-decoding switches as JSON, Markdown and a PNG chart
version_added: 0.1.0
description:
  - Takes the per-host records that the C(llmops.specdec.spec_switch) role leaves in C(spec_switch_record)
    and writes, into O(dest), C(results.json) (this run), C(history.jsonl) (every run appended),
    C(report.md) (a table and the reason for each verdict) and C(chart.png) (baseline against candidate
    output tok/s and TPOT per host and prompt suite).
  - A record of a tuning run (C(playbooks/tune.yml)) adds its K grid to C(report.md) and a heat map
    C(tune-HOST.png) (K by concurrency, speed-up against the baseline, the chosen K marked).
  - Runs on the controller, in the task's worker, as an action plugin. The report is the controller's, whatever
    host the task is for, and no module process is started for it.
  - Every file is written atomically (a reader never sees half of one), with mode C(0644).
options:
  records:
    description: The C(spec_switch_record) of each host.
    type: list
    elements: dict
    required: true
  dest:
    description: Directory for the report files; created when missing.
    type: path
    required: true
  chart:
    description: Draw C(chart.png). Needs matplotlib; without it the module warns and skips the chart.
    type: bool
    default: true
extends_documentation_fragment:
  - llmops.specdec._attributes
attributes:
  action:
    description: Indicates this has a corresponding action plugin, so some parts of the work run on the controller.
    support: full
    details: The whole report is written by the action plugin, on the controller.
  check_mode:
    support: full
    details: In check mode nothing is written; the verdict lines are still returned.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details:
      - C(history.jsonl) grows by one line per record on every run; the other files are rewritten only when their
        content changes (C(report.md) carries the time it was generated).
      - C(changed) is true exactly when a file changed.
requirements:
  - matplotlib (for the chart only)
author:
  - llmops.specdec developers (@llmops)
"""

EXAMPLES = r"""
- name: Write the report of this run
  llmops.specdec.spec_report:
    records: "{{ groups['inference'] | map('extract', hostvars, 'spec_switch_record') | select('defined') | list }}"
    dest: /srv/specdec-report
"""

RETURN = r"""
lines:
  description: One verdict line per record.
  returned: always
  type: list
  elements: str
  sample: ["gpu1: ROLLED BACK ngram k=5 on reasoning (x0.50) - c=1 output 41.0 vs 82.0 tok/s = x0.50, needs >= x1.05"]
markdown:
  description: Path of the Markdown report.
  returned: always
  type: str
json:
  description: Path of the JSON results of this run.
  returned: always
  type: str
png:
  description: Path of the chart, or null when it was not drawn.
  returned: always
  type: str
tune_png:
  description: Paths of the tuning heat maps drawn (one per tuning record).
  returned: always
  type: list
  elements: str
  sample: ["/srv/specdec-report/tune-gpu1.png"]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.specdec.plugins.module_utils import _report_files


def main():
    module = AnsibleModule(argument_spec=_report_files.ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = _report_files.write(module.params, module.check_mode,
                                     lambda lib: module.warn(missing_required_lib(lib) + " The chart was skipped."))
    except _report_files.ReportError as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
