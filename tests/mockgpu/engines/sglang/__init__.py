# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mock `sglang` package: only `python3 -m sglang.launch_server` (see tests/mockgpu/engines)."""
__version__ = "0.5.4"
