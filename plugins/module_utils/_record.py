# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a switch leaves on the host when it ends, written in one call (``switch_record``).

``write(state_dir, record, textfile_dir=None, kept=None, now=time.time)``:

- the record appended to ``history.jsonl`` (0600): every switch, whatever its outcome;
- node_exporter's ``llmops_specdec.prom`` (0644, ``_prom.switch_textfile``) when ``textfile_dir`` is a
  directory (node_exporter not installed: nothing to export to, and no directory is made for it);
- for a kept candidate (``kept``), the bookkeeping that makes it the baseline, in this order so that a
  failure part-way leaves the old baseline in place: the unit and the baseline it replaced copied to
  ``previous/`` (for ``playbooks/rollback.yml``), the replaced unit archived in ``kept/`` with its
  checksum (``_unitfile.archive``), the acceptance measured now kept in ``acceptance/KEY.json``, and
  the candidate's figures stored last as ``baselines/KEY.json``. The unit's SHA-256 joins the
  baseline's settings: a stored baseline stands for a fresh one only with that very unit.

Standard library only (a module ships it to the target).
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import time

from ansible_collections.llmops.specdec.plugins.module_utils import _files, _prom, _unitfile

__all__ = ["write", "RecordError", "TEXTFILE"]

TEXTFILE = "llmops_specdec.prom"


class RecordError(Exception):
    """A file of the record could not be written."""


def _copy(src, dest):
    """Copy ``src`` to ``dest`` (0600); False when there is no ``src``."""
    return os.path.isfile(src) and _files.copy_if_changed(src, dest, 0o600)


def _json(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _keep(state_dir, kept, written):
    unit, key = kept["unit"], kept["baseline_key"]
    snapshot = os.path.join(state_dir, "snapshot", unit)
    stored = os.path.join(state_dir, "baselines", key + ".json")
    replaced_unit = kept["replaced_unit"] and os.path.isfile(snapshot)
    for sub in ("previous", "baselines", "acceptance"):
        os.makedirs(os.path.join(state_dir, sub), mode=0o700, exist_ok=True)
    if replaced_unit and _copy(snapshot, os.path.join(state_dir, "previous", unit)):
        written.append(os.path.join(state_dir, "previous", unit))
    if _copy(stored, os.path.join(state_dir, "previous", key + ".json")):
        written.append(os.path.join(state_dir, "previous", key + ".json"))
    out = {"archived": None, "unit_sha256": None}
    if replaced_unit:
        out["archived"] = _unitfile.archive(snapshot, os.path.join(state_dir, "kept"), unit, kept["archive_keep"])
        if out["archived"]["changed"]:
            written.append(out["archived"]["path"])
    if os.path.isfile(kept["unit_path"]):
        out["unit_sha256"] = _files.sha256_file(kept["unit_path"])
    settings = dict(kept.get("settings") or {}, unit_sha256=out["unit_sha256"])
    acceptance = dict(kept.get("acceptance") or {}, unit_sha256=out["unit_sha256"], settings=settings)
    path = os.path.join(state_dir, "acceptance", key + ".json")
    if _files.write_if_changed(path, _json(acceptance), 0o600):
        written.append(path)
    baseline = dict(copy.deepcopy(kept["baseline"]), settings=settings)
    if _files.write_if_changed(stored, _json(baseline), 0o600):
        written.append(stored)
    return out


def write(state_dir, record, textfile_dir=None, kept=None, now=time.time):
    """Write what the switch leaves on the host; ``{"changed", "written", "textfile", "kept"}``. Raises RecordError."""
    written = []
    out = {"textfile": None, "kept": None}
    try:
        if kept:
            out["kept"] = _keep(state_dir, kept, written)
        history = os.path.join(state_dir, "history.jsonl")
        _files.append_lines(history, [json.dumps(record, sort_keys=True)], 0o600)
        written.append(history)
        if textfile_dir and os.path.isdir(textfile_dir):
            out["textfile"] = os.path.join(textfile_dir, TEXTFILE)
            if _files.write_if_changed(out["textfile"], _prom.switch_textfile(record, now()), 0o644):
                written.append(out["textfile"])
    except (OSError, shutil.Error) as exc:
        raise RecordError("writing the record under %s failed after %s: %s"
                          % (state_dir, ", ".join(written) or "nothing", exc))
    out.update(changed=bool(written), written=written)
    return out
