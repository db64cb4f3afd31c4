# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a candidate's weight files into the page cache while the baseline still serves (issue 34).

The candidate loads the same target weights as the baseline (plus a draft); read from the page cache they
load several times faster than from disk (docs/load.md has the figures). This reads them first, only
what is not cached yet, and only when it fits: the bytes to read must stay within ``MemAvailable`` minus a
margin and a reserve (a parked baseline's weights), checked before the first byte and again before every
chunk, so the reading stops before it would push out memory that others need. Standard library only (it
runs on the host): residency comes from ``mincore(2)`` through ctypes; where that is not available every
page counts as not cached, which only makes the fit stricter.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import time

__all__ = ["weight_files", "meminfo", "resident_pages", "plan", "warm", "CHUNK"]

# Files that hold a checkpoint's weights (shared with _park's count of what parking copies to CPU memory).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# Reads of this size: large enough for the disk's sequential rate, small enough to re-check memory often.
CHUNK = 16 * 1024 * 1024
GIB = 1024 ** 3
_PROT_READ, _MAP_SHARED = 1, 1
# mincore(2) sets bit 0 of a page's byte when the page is resident; the other bits are reserved.
_RESIDENT_BIT = bytes(i & 1 for i in range(256))


def weight_files(path):
    """The weight files under ``path`` (a directory or one file), sorted, as ``(path, bytes)``; [] if absent."""
    if not path or not os.path.exists(path):
        return []
    if os.path.isfile(path):
        return [(path, os.path.getsize(path))]
    found = []
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            if name.endswith(WEIGHT_SUFFIXES):
                full = os.path.join(dirpath, name)
                try:
                    found.append((full, os.stat(full).st_size))  # follows HF cache links to the blobs
                except OSError:
                    continue
    return sorted(found)


def meminfo(text):
    """``/proc/meminfo`` fields in bytes (``{"MemAvailable": ..., ...}``)."""
    out = {}
    for line in text.splitlines():
        key, _sep, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int64]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        return libc
    except (OSError, AttributeError):
        return None


def resident_pages(path, size, libc=None):
    """Per page of the file, whether it is in the page cache (a bytes object of 0/1); None when unknown."""
    page = os.sysconf("SC_PAGE_SIZE")
    pages = (size + page - 1) // page
    if pages == 0:
        return b""
    libc = libc or _libc()
    if libc is None:
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                return None
            return bytes(vec).translate(_RESIDENT_BIT)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def plan(paths, meminfo_text, margin_bytes, reserve_bytes=0, resident=resident_pages):
    """What a warm-up would read, and whether it fits (nothing is read here; check mode stops at this)."""
    files, missing = [], []
    for path in paths:
        found = weight_files(path)
        if not found:
            missing.append(path)
        for name, size in found:
            if name not in (f["path"] for f in files):
                pages = resident(name, size)
                files.append({"path": name, "bytes": size, "pages": pages})
    page = os.sysconf("SC_PAGE_SIZE")
    total = sum(f["bytes"] for f in files)
    cached = sum(min(f["bytes"], f["pages"].count(1) * page) for f in files if f["pages"] is not None)
    available = meminfo(meminfo_text).get("MemAvailable")
    budget = None if available is None else available - margin_bytes - reserve_bytes
    to_read = total - cached
    if not files:
        skipped = "no weight files on this host under %s" % ", ".join(paths or ["(no path)"])
    elif budget is None:
        skipped = "MemAvailable is missing from /proc/meminfo: the fit cannot be checked"
    elif to_read > budget:
        figures = (to_read / GIB, max(budget, 0) / GIB, margin_bytes / GIB, reserve_bytes / GIB)
        skipped = ("does not fit: %.2f GiB to read, but only %.2f GiB available beyond the margin (%.2f GiB) "
                   "and the reserve (%.2f GiB)" % figures)
    else:
        skipped = None
    return {"files": files, "missing": missing, "total_bytes": total, "cached_bytes": cached,
            "to_read_bytes": to_read, "available_bytes": available, "budget_bytes": budget,
            "fits": skipped is None, "skipped": skipped}


def _chunks(size, pages, page):
    """(offset, length) of the file's chunks that hold a page not yet cached."""
    for offset in range(0, size, CHUNK):
        length = min(CHUNK, size - offset)
        if pages is not None and 0 not in pages[offset // page:(offset + length + page - 1) // page]:
            continue
        yield offset, length


def warm(planned, available_now, margin_bytes, reserve_bytes=0, deadline=None, clock=time.monotonic):
    """Read the planned files' uncached chunks. ``available_now()`` gives MemAvailable in bytes at each chunk:
    the reading stops when one more chunk would leave less than the margin and the reserve."""
    page = os.sysconf("SC_PAGE_SIZE")
    start = clock()
    read = 0
    stopped = None
    buf = bytearray(CHUNK)
    for f in planned["files"]:
        if stopped:
            break
        fd = os.open(f["path"], os.O_RDONLY)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            for offset, length in _chunks(f["bytes"], f["pages"], page):
                if deadline is not None and clock() > deadline:
                    stopped = "timeout: the warm-up ran out of time"
                    break
                avail = available_now()
                if avail is not None and avail - length < margin_bytes + reserve_bytes:
                    stopped = ("memory: MemAvailable fell to %.2f GiB, within the margin and reserve "
                               "(%.2f GiB)" % (avail / GIB, (margin_bytes + reserve_bytes) / GIB))
                    break
                view = memoryview(buf)[:length]
                got = os.preadv(fd, [view], offset)
                read += got
        finally:
            os.close(fd)
    seconds = clock() - start
    return {"read_bytes": read, "seconds": round(seconds, 3),
            "read_gbps": round(read / seconds / 1e9, 3) if seconds > 0 and read else None,
            "stopped": stopped}
