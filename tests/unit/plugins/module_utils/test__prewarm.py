# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_prewarm against real files and the real page cache (mincore, posix_fadvise), with /proc/meminfo texts
standing in for the host's memory where the case needs a given amount."""
from __future__ import annotations

import os

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _prewarm

MIB = 1 << 20
GIB = 1 << 30


def _meminfo(available):
    return "MemTotal:       %d kB\nMemFree:        1024 kB\nMemAvailable:   %d kB\n" % (
        64 * GIB // 1024, available // 1024)


def _evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture
def model(tmp_path):
    """Two shards of 8 MiB + 24 MiB, a config and a tokenizer, out of the page cache."""
    d = tmp_path / "model"
    (d / "sub").mkdir(parents=True)
    (d / "model-00001-of-00002.safetensors").write_bytes(os.urandom(8 * MIB))
    (d / "sub" / "model-00002-of-00002.safetensors").write_bytes(os.urandom(24 * MIB))
    (d / "config.json").write_text("{}")
    (d / "tokenizer.json").write_bytes(os.urandom(MIB))
    for name, _size in _prewarm.weight_files(str(d)):
        _evict(name)
    if any(_prewarm.resident_pages(n, s).count(1) for n, s in _prewarm.weight_files(str(d))):
        pytest.skip("this filesystem keeps files in memory (tmpfs): residency cannot be tested on it")
    return str(d)


def test_weight_files_are_the_checkpoint_shards_only(model, tmp_path):
    found = _prewarm.weight_files(model)
    assert [(os.path.basename(n), s) for n, s in found] == [
        ("model-00001-of-00002.safetensors", 8 * MIB), ("model-00002-of-00002.safetensors", 24 * MIB)]
    one = found[0][0]
    assert _prewarm.weight_files(one) == [(one, 8 * MIB)]
    assert _prewarm.weight_files(str(tmp_path / "absent")) == [] and _prewarm.weight_files("org/model") == []


def test_meminfo_in_bytes():
    info = _prewarm.meminfo(_meminfo(10 * GIB) + "HugePages_Total:       0\n")
    assert info["MemAvailable"] == 10 * GIB and info["HugePages_Total"] == 0


def test_residency_follows_the_page_cache(model):
    name, size = _prewarm.weight_files(model)[0]
    assert _prewarm.resident_pages(name, size).count(1) == 0
    with open(name, "rb") as f:
        f.read(MIB)
    pages = _prewarm.resident_pages(name, size)
    page = os.sysconf("SC_PAGE_SIZE")
    assert len(pages) == size // page and pages[:MIB // page].count(1) == MIB // page


def test_a_plan_that_fits_reads_only_what_is_not_cached(model):
    with open(_prewarm.weight_files(model)[0][0], "rb") as f:
        f.read()  # the first shard is cached already
    planned = _prewarm.plan([model, "org/draft"], _meminfo(64 * GIB), 8 * GIB)
    assert planned["fits"] and planned["skipped"] is None
    assert planned["total_bytes"] == 32 * MIB and planned["cached_bytes"] == 8 * MIB
    assert planned["to_read_bytes"] == 24 * MIB and planned["missing"] == ["org/draft"]
    done = _prewarm.warm(planned, lambda: 64 * GIB, 8 * GIB)
    assert done["read_bytes"] == 24 * MIB and done["stopped"] is None
    assert all(0 not in _prewarm.resident_pages(n, s) for n, s in _prewarm.weight_files(model))
    again = _prewarm.plan([model], _meminfo(64 * GIB), 8 * GIB)
    assert again["to_read_bytes"] == 0 and _prewarm.warm(again, lambda: 64 * GIB, 8 * GIB)["read_bytes"] == 0


@pytest.mark.parametrize("available, margin, reserve", [
    (40 * MIB, 16 * MIB, 0),  # 24 MiB left for 32 to read
    (64 * GIB, 8 * GIB, 64 * GIB),  # the parked baseline's weights take the rest
    (8 * GIB, 8 * GIB, 0),
])
def test_a_plan_that_does_not_fit_reads_nothing(model, available, margin, reserve):
    planned = _prewarm.plan([model], _meminfo(available), margin, reserve)
    assert not planned["fits"] and planned["skipped"].startswith("does not fit: 0.03 GiB to read")
    assert planned["budget_bytes"] == available - margin - reserve


def test_no_files_and_no_memavailable_are_said(model):
    assert _prewarm.plan(["org/model"], _meminfo(GIB), 0)["skipped"] == "no weight files on this host under org/model"
    assert "MemAvailable is missing" in _prewarm.plan([model], "MemTotal: 1 kB\n", 0)["skipped"]


def test_the_reading_stops_when_memory_runs_short_meanwhile(model):
    planned = _prewarm.plan([model], _meminfo(64 * GIB), GIB)
    seen = iter([64 * GIB, 64 * GIB] + [GIB + _prewarm.CHUNK // 4] * 10)  # another process grew after 2 chunks
    done = _prewarm.warm(planned, lambda: next(seen), GIB)
    assert done["read_bytes"] == 8 * MIB + _prewarm.CHUNK and done["stopped"].startswith("memory: MemAvailable fell")


def test_the_reading_stops_at_its_deadline(model):
    planned = _prewarm.plan([model], _meminfo(64 * GIB), GIB)
    ticks = iter(range(100))
    done = _prewarm.warm(planned, lambda: 64 * GIB, GIB, deadline=2.5, clock=lambda: next(ticks))
    assert done["stopped"] == "timeout: the warm-up ran out of time" and done["read_bytes"] == 8 * MIB + _prewarm.CHUNK


def test_unknown_residency_counts_as_not_cached(model):
    planned = _prewarm.plan([model], _meminfo(64 * GIB), GIB, resident=lambda name, size: None)
    assert planned["cached_bytes"] == 0 and planned["to_read_bytes"] == 32 * MIB
    assert _prewarm.warm(planned, lambda: 64 * GIB, GIB)["read_bytes"] == 32 * MIB
