# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ansible community's nox sessions for this collection, as antsibull-nox.toml configures them.

scripts/antsibull runs them with pinned tools (tests/antsibull/requirements.txt); by hand:
``.build/venv-antsibull/bin/nox --list``.
"""
# /// script
# dependencies = ["nox>=2025.02.09", "antsibull-nox>=1.10.0,<2.0.0"]
# ///
from __future__ import annotations

import sys

import nox

try:
    import antsibull_nox
except ImportError:
    print("You need to install antsibull-nox in the same Python environment as nox.")
    sys.exit(1)

antsibull_nox.load_antsibull_nox_toml()

if __name__ == "__main__":
    nox.main()
