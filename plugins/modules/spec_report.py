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
  - Meant to run on the controller, in a play on C(localhost).
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

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _report, _tune


def _heatmaps(records, dest):
    """(changed, paths) of the tuning heat maps; a host name is made safe for a file name."""
    changed, paths = False, []
    for rec in records:
        if not rec.get("tune"):
            continue
        data = _tune.heatmap_png(rec)
        if data is None:
            continue
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(rec.get("host", "host"))).lstrip(".")
        path = os.path.join(dest, "tune-%s.png" % (name or "host"))
        changed |= _files.write_if_changed(path, data)
        paths.append(path)
    return changed, paths


def _write(module, records, markdown, dest, paths):
    """Write every file of the report; return (changed, png path or None, tuning heat map paths)."""
    os.makedirs(dest, exist_ok=True)
    changed = _files.write_if_changed(paths["json"], json.dumps(records, indent=2, sort_keys=True) + "\n")
    changed |= _files.write_if_changed(paths["markdown"], markdown)
    changed |= _files.append_lines(paths["history"], [json.dumps(rec, sort_keys=True) for rec in records])
    png = None
    if module.params["chart"]:
        if _report.FIGURE.get() is None:
            module.warn(missing_required_lib("matplotlib") + " The chart was skipped.")
        else:
            data = _report.chart_png(records)
            if data is not None:
                changed |= _files.write_if_changed(paths["png"], data)
                png = paths["png"]
    tune_changed, tune_png = _heatmaps(records, dest) if module.params["chart"] and _report.FIGURE.get() is not None else (False, [])
    return changed | tune_changed, png, tune_png


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
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        lines = [_report.verdict_line(r) for r in records]
        markdown = _report.markdown(records, now) + _tune.markdown(records)
    except KeyError as exc:
        module.fail_json(msg="record without %s; pass spec_switch_record of each host" % exc)
    paths = {k: os.path.join(dest, f) for k, f in (("markdown", "report.md"), ("json", "results.json"), ("png", "chart.png"), ("history", "history.jsonl"))}
    result = {"changed": False, "lines": lines, "markdown": paths["markdown"], "json": paths["json"], "png": None,
              "tune_png": []}
    if module.check_mode:
        module.exit_json(**result)
    try:
        result["changed"], result["png"], result["tune_png"] = _write(module, records, markdown, dest, paths)
    except OSError as exc:
        module.fail_json(msg="cannot write the report into %s: %s" % (dest, to_native(exc)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
