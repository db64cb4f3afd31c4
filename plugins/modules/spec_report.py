#!/usr/bin/python
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
  - Meant to run on the controller, in a play on C(localhost).
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
  check_mode:
    support: full
    details: In check mode nothing is written; the verdict lines are still returned.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details: C(history.jsonl) grows by one line per record on every run; the other files change only when their content does.
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
"""

import datetime
import importlib.util
import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.specdec.plugins.module_utils import _report

# Probed, not imported: only the chart needs matplotlib, and _report imports it when drawing.
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def main():
    module = AnsibleModule(
        argument_spec={
            "records": {"type": "list", "elements": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "chart": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    records, dest = module.params["records"], module.params["dest"]
    try:
        lines = [_report.verdict_line(r) for r in records]
    except KeyError as exc:
        module.fail_json(msg="record without %s; pass spec_switch_record of each host" % exc)
    paths = {k: os.path.join(dest, f) for k, f in
             (("markdown", "report.md"), ("json", "results.json"), ("png", "chart.png"), ("history", "history.jsonl"))}
    result = {"changed": False, "lines": lines, "markdown": paths["markdown"], "json": paths["json"], "png": None}
    if module.check_mode:
        module.exit_json(**result)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    os.makedirs(dest, exist_ok=True)
    changed = _report.write_if_changed(paths["json"], json.dumps(records, indent=2, sort_keys=True) + "\n")
    changed |= _report.write_if_changed(paths["markdown"], _report.markdown(records, now))
    _report.history_append(paths["history"], records)
    if module.params["chart"]:
        if not HAS_MATPLOTLIB:
            module.warn(missing_required_lib("matplotlib") + " The chart was skipped.")
        elif _report.chart(records, paths["png"]):
            result["png"] = paths["png"]
            changed = True
    result["changed"] = True if records else changed
    module.exit_json(**result)


if __name__ == "__main__":
    main()
