# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The words the speculative model (``_spec``) and the engines' method tables (``_engine_<name>``) share.

``SpecError`` (a request an engine cannot run as asked), the parameter defaults ``REQUIRED`` (the operator
must give it) and ``ENGINE`` (optional; the engine chooses), ``params()`` to compose parameter tables,
and the collection's own limits on drafts and batches. Standard library only.
"""
from __future__ import annotations

__all__ = ["SpecError", "REQUIRED", "ENGINE", "K_MAX", "BATCH_MAX", "params"]

K_MAX = 128  # our typo guard on a draft length (documented in docs/spec-methods.md)
BATCH_MAX = 65536  # largest band start/end we accept (no deployment runs more concurrent requests)


class SpecError(ValueError):
    """A speculative-decoding request that an engine cannot run as asked."""


class _Required(object):
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()  # the operator must give it
ENGINE = None  # optional; when absent the engine chooses (model-dependent, so not filled in)


def params(*parts):
    """One parameter table from several, in order (the order of allowed-parameter listings)."""
    out = {}
    for part in parts:
        out.update(part)
    return out
