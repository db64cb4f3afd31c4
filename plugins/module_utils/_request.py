# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A switch request from flat variables (``-e method=ngram -e num_speculative_tokens=4``, AWX surveys).

``build(method, flat, spec_params, present)`` returns ``{"spec": {...}, "thresholds": {...}}``:
``flat`` maps every known parameter and threshold name to its value (``""`` or ``None`` when not
given: a survey sends ``""`` for an optional question left blank); ``spec_params`` is the mapping
form (``-e '{"spec_params": {...}}'``), overridden by flat values; ``present`` lists every variable
name in scope, so that a typo such as ``prompt_lookup_mx`` is an error with the closest valid name
instead of being dropped without a word. Validation of the values themselves stays with
``_spec.normalize`` and ``_verdict.thresholds``, which name the allowed values.
"""
from __future__ import annotations

import difflib

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _spec

__all__ = ["RequestError", "build", "typos", "REQUEST_NAMES"]

# Names of the request besides the spec's parameters and the thresholds.
REQUEST_NAMES = ("method", "spec_params", "engine")
# Variables of the collection, Ansible, AWX and Molecule: never a request parameter.
_OWN_PREFIXES = ("ansible_", "spec_server_", "spec_switch_", "specdec_", "awx_", "tower_", "molecule_",
                 "inventory_", "group_names", "groups", "hostvars", "playbook_", "role_", "omit", "__")


class RequestError(ValueError):
    """A request that would silently lose part of what the operator asked."""


def _near_miss(name, known):
    """The known name ``name`` is a slip of (a letter or two off), or None.

    Stricter than a 'did you mean' hint: every variable in scope is checked (inventory, Molecule,
    AWX), and a longer name that merely contains a parameter (``switch_draft_model``) is not a typo.
    """
    best, score = None, 0.0
    for cand in known:
        if abs(len(cand) - len(name)) > 2:
            continue
        ratio = difflib.SequenceMatcher(None, name, cand).ratio()
        if ratio > score:
            best, score = cand, ratio
    return best if score >= 0.85 else None


def typos(present, known):
    """``[(name, closest)]`` for each name in ``present`` that is not ``known`` but nearly is."""
    known = set(known)
    out = []
    for name in present:
        if name in known or not isinstance(name, str) or name.startswith(_OWN_PREFIXES):
            continue
        close = _near_miss(name, known)
        if close:
            out.append((name, close))
    return sorted(out)


def build(method, flat, spec_params=None, present=(), threshold_names=()):
    known = set(_spec.PARAMS) | set(threshold_names) | set(REQUEST_NAMES)
    wrong = typos(present, known)
    if wrong:
        raise RequestError("unknown request variable%s %s; nothing was changed" % (
            "s" if len(wrong) > 1 else "", ", ".join("%s (did you mean %s?)" % w for w in wrong)))
    if spec_params is None or spec_params == "":
        spec_params = {}
    if not isinstance(spec_params, dict):
        raise RequestError("spec_params must be a mapping of parameter names to values, got %s"
                           % type(spec_params).__name__)
    for key in spec_params:
        if key not in _spec.PARAMS:
            close = _gate.suggest(str(key), _spec.PARAMS)
            raise RequestError("unknown parameter %r in spec_params%s; parameters: %s" % (
                key, " (did you mean %s?)" % close if close else "", ", ".join(sorted(_spec.PARAMS))))
    given = {k: v for k, v in (flat or {}).items() if v is not None and v != ""}
    spec = {"method": method if method not in (None, "") else "none"}
    spec.update(spec_params)
    spec.update({k: v for k, v in given.items() if k in _spec.PARAMS})
    thresholds = {k: v for k, v in given.items() if k in threshold_names}
    return {"spec": spec, "thresholds": thresholds}
