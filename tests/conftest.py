# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make the checkout importable as ansible_collections.llmops.specdec for every test tier."""
from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, ".build", "collections")
_link = os.path.join(COLLECTIONS, "ansible_collections", "llmops", "specdec")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(REPO, _link)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
