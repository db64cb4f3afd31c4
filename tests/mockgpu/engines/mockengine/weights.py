# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weight files a mock engine reads while it loads, as a real engine does (issue 34).

When the model is a directory on the host (`make-weights` in molecule/switch writes one of a chosen size),
each rank reads its share of the weight files for real, so the load takes what the disk or the page cache
gives, and a prewarmed page cache shortens it. A model that is a hub id reads nothing (as before).
"""
import os
import time

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")  # vLLM's and SGLang's loaders


def files(model):
    """Weight files under the model directory, sorted (vLLM reads shards in name order); [] for a hub id."""
    if not model or not os.path.isdir(model):
        return []
    found = []
    for dirpath, _dirs, names in os.walk(model):
        found.extend(os.path.join(dirpath, n) for n in names if n.endswith(WEIGHT_SUFFIXES))
    return sorted(found)


def share(model, rank, world):
    """The files rank ``rank`` of ``world`` reads (together the ranks read every file once)."""
    return files(model)[rank::world]


def read(paths, chunk=8 << 20):
    """Read ``paths`` whole; (bytes, seconds)."""
    start = time.monotonic()
    total = 0
    buf = bytearray(chunk)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    break
                total += got
    return total, time.monotonic() - start
