# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every Python file of the tree starts with the one header (docs/architecture.md, "File header"),
after its shebang line if it has one."""
from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]
HEADER = [
    "# -*- coding: utf-8 -*-",
    "# Copyright (c) 2026, llmops.specdec developers",
    "# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)",
]


def _python_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in out.split()]


def test_every_python_file_starts_with_the_header():
    files = _python_files()
    assert len(files) > 100
    wrong = []
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        if lines and lines[0].startswith("#!"):
            lines = lines[1:]
        if lines[:3] != HEADER:
            wrong.append(str(path.relative_to(ROOT)))
    assert wrong == []
