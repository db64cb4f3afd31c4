# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A mock engine whose model is a directory reads its weight files while it loads, as a real one does (issue 34):
every byte once across the ranks, from the disk or the page cache, so a prewarm has a real effect."""
from __future__ import annotations

import os
import re
import time

import pytest

from conftest import MockGpuHost
from mockengine import weights

LOADED = re.compile(r"Loading weights took ([0-9.]+) seconds")


def _model(tmp_path, shards=3, size=1 << 20):
    model = tmp_path / "model"
    model.mkdir()
    for i in range(shards):
        (model / ("model-%05d-of-%05d.safetensors" % (i + 1, shards))).write_bytes(os.urandom(size))
    (model / "config.json").write_text("{}")
    return str(model)


def test_the_ranks_share_the_weight_files_and_read_each_once(tmp_path):
    model = _model(tmp_path, shards=5)
    shares = [weights.share(model, r, 2) for r in range(2)]
    assert sorted(shares[0] + shares[1]) == weights.files(model) and len(weights.files(model)) == 5
    assert not set(shares[0]) & set(shares[1])
    assert weights.files("org/model-7b") == []  # a hub id: nothing on disk, nothing read
    size, _seconds = weights.read(weights.files(model))
    assert size == 5 << 20


def _read_since(path, before):
    return os.stat(path).st_atime_ns > before


def test_a_mock_engine_reads_its_weights_before_it_is_ready(tmp_path, engines):
    # Each file's access time, set two days back, moves on the engine's read whatever the page cache holds.
    # (Not the page cache itself: on a busy machine it may drop 8 MiB between the read and the check, as CI saw.)
    host = MockGpuHost(tmp_path, load_seconds=0.2)
    model = _model(tmp_path, shards=2, size=4 << 20)
    old = time.time_ns() - 2 * 86400 * 10**9
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    os.utime(probe, ns=(old, time.time_ns()))
    probe.read_bytes()
    if not _read_since(probe, old):
        pytest.skip("this filesystem is mounted noatime: a read cannot be told from none")
    for name in weights.files(model):
        os.utime(name, ns=(old, time.time_ns()))
    e = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="0,1"), model=model)
    e.wait_ready()
    took = [float(m) for m in LOADED.findall(e.log())]
    assert took and all(t >= 0.2 for t in took), e.log()
    assert all(_read_since(n, old) for n in weights.files(model)), "a weight file was not read before ready"
    assert e.terminate() == 0


def test_the_mocks_log_the_load_as_the_engines_do(tmp_path, engines):
    # The lines _load reads (the adapters' LOAD_FIGURES / LOAD_STAGES / READY_LINE) come out of the mocks too.
    from ansible_collections.llmops.specdec.plugins.module_utils import _load  # pylint: disable=import-outside-toplevel
    host = MockGpuHost(tmp_path, load_seconds=0.3)
    v = engines.vllm(host, env=host.env(CUDA_VISIBLE_DEVICES="0"))
    s = engines.sglang(host, env=host.env(CUDA_VISIBLE_DEVICES="1"))
    v.wait_ready()
    s.wait_ready()
    for name, e in (("vllm", v), ("sglang", s)):
        lines = e.log().splitlines()
        figures = _load.figures(name, lines)
        assert figures["weights"] >= 0.3, (name, figures)
        assert _load.ready_after(name, [(0.0, line) for line in lines]) == 0.0, name
        assert _load.stage(name, lines) != "starting", name
    assert "engine_init" in _load.figures("vllm", v.log().splitlines())
    assert v.terminate() == 0 and s.terminate() == 0
