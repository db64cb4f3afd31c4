# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files of a report (results.json, report.md, history.jsonl, chart.png, tune-HOST.png) and the one
function that writes them, shared by the ``spec_report`` action plugin (on the controller, in the
worker's process) and the module (the same options, for a direct call).
"""

from __future__ import annotations

import datetime
import json
import os

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _report, _tune

ARGUMENT_SPEC = {
    "records": {"type": "list", "elements": "dict", "required": True},
    "dest": {"type": "path", "required": True},
    "chart": {"type": "bool", "default": True},
}

NAMES = (("markdown", "report.md"), ("json", "results.json"), ("png", "chart.png"), ("history", "history.jsonl"))


class ReportError(Exception):
    """The report cannot be written; ``result`` is what is known so far (the verdict lines)."""

    def __init__(self, msg, result=None):
        super().__init__(msg)
        self.msg = msg
        self.result = result or {}


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


def _write(records, markdown, dest, paths, chart, missing):
    """Write every file of the report; return (changed, png path or None, tuning heat map paths)."""
    os.makedirs(dest, exist_ok=True)
    changed = _files.write_if_changed(paths["json"], json.dumps(records, indent=2, sort_keys=True) + "\n")
    changed |= _files.write_if_changed(paths["markdown"], markdown)
    changed |= _files.append_lines(paths["history"], [json.dumps(rec, sort_keys=True) for rec in records])
    if not chart:
        return changed, None, []
    if _report.FIGURE.get() is None:
        missing("matplotlib")
        return changed, None, []
    png = None
    data = _report.chart_png(records)
    if data is not None:
        changed |= _files.write_if_changed(paths["png"], data)
        png = paths["png"]
    tune_changed, tune_png = _heatmaps(records, dest)
    return changed | tune_changed, png, tune_png


def write(params, check_mode, missing):
    """Write the report of ``params`` (ARGUMENT_SPEC, validated); return the result the task returns.

    ``missing(library)`` is told of a library the chart needs and cannot import (the chart is then
    skipped and the rest written); the caller warns. Nothing is written in
    ``check_mode``; the verdict lines come back all the same. Raises ReportError.
    """
    records, dest = params["records"], params["dest"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        lines = [_report.verdict_line(r) for r in records]
        markdown = _report.markdown(records, now) + _tune.markdown(records)
    except KeyError as exc:
        raise ReportError("record without %s; pass spec_switch_record of each host" % exc)
    paths = {k: os.path.join(dest, f) for k, f in NAMES}
    result = {"changed": False, "lines": lines, "markdown": paths["markdown"], "json": paths["json"], "png": None,
              "tune_png": []}
    if check_mode:
        return result
    try:
        result["changed"], result["png"], result["tune_png"] = _write(records, markdown, dest, paths, params["chart"], missing)
    except OSError as exc:
        raise ReportError("cannot write the report into %s: %s" % (dest, exc), result)
    return result
