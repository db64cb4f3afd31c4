# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drop the files under each argument from the page cache (the host shares the machine's kernel, so
this is the only way to make the next read come from the disk without dropping every cache)."""
import os
import sys

for top in sys.argv[1:]:
    for d, _dirs, names in os.walk(top):
        for n in names:
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
