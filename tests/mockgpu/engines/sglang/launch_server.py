# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mock `python3 -m sglang.launch_server` for the mock GPU host."""
import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
if os.path.isdir(os.path.join(_root, "mockengine")) and _root not in sys.path:
    sys.path.insert(0, _root)

from mockengine.sglang_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
