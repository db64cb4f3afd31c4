# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How fast weights reach the GPU: from the disk, from the page cache, and after weights_prewarm (issue 34).

GPU only (run through the device tool, never in CI). Writes SHARDS safetensors shards of SHARD_GIB each
(tensors of 128 MiB, bf16, as a real checkpoint's), then for each loader times the load of every shard
onto cuda:0, once from the disk (the files evicted from the page cache first, residency checked with
mincore) and once from the page cache; and, for the default loader, the prewarm itself (the collection's
own plugins/module_utils/_prewarm.py) followed by the load. Loaders: safetensors' load_file (what vLLM's
default loader and SGLang read through), fastsafetensors and Run:ai's model streamer when importable
(bench/README.md says how their wheels are carried). Prints one JSON object.

    python3 bench/load_gpu.py [--shards 6] [--shard-gib 4] [--dir /var/tmp/specdec-load]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
GB = 1e9


def _prewarm_module():
    path = os.path.join(HERE, "..", "plugins", "module_utils", "_prewarm.py")
    spec = importlib.util.spec_from_file_location("_prewarm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PREWARM = _prewarm_module()


def write_shards(directory, shards, shard_gib):
    from safetensors.torch import save_file
    os.makedirs(directory, exist_ok=True)
    per = int(shard_gib * (1 << 30)) // (128 << 20)
    paths = []
    for s in range(shards):
        path = os.path.join(directory, "model-%05d-of-%05d.safetensors" % (s + 1, shards))
        tensors = {"layers.%d.w%d" % (s, i): torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda").cpu()
                   for i in range(per)}
        save_file(tensors, path)
        del tensors
        paths.append(path)
    os.sync()
    return paths


def evict(paths):
    """Out of the page cache; the share of pages still resident afterwards (0.0 when eviction worked)."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError:
        pass
    total = resident = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        pages = PREWARM.resident_pages(path, os.path.getsize(path))
        if pages is not None:
            total += len(pages)
            resident += pages.count(1)
    return round(resident / total, 4) if total else None


def _cuda_sync_free():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def load_safetensors(paths):
    from safetensors.torch import load_file
    n = 0
    for path in paths:
        tensors = load_file(path, device="cuda:0")
        n += sum(t.numel() * t.element_size() for t in tensors.values())
        del tensors
    return n


def load_fastsafetensors(paths):
    from fastsafetensors import fastsafe_open
    n = 0
    with fastsafe_open(filenames=paths, nogds=True, device="cuda:0") as f:
        for key in f.keys():
            t = f.get_tensor(key)
            n += t.numel() * t.element_size()
            del t
    return n


def load_runai(paths):
    from runai_model_streamer import SafetensorsStreamer
    n = 0
    with SafetensorsStreamer() as streamer:
        streamer.stream_files(paths)
        for _name, tensor in streamer.get_tensors():
            t = tensor.to("cuda:0", non_blocking=False)
            n += t.numel() * t.element_size()
            del t
    return n


def read_plain(paths):
    buf = bytearray(16 << 20)
    n = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    break
                n += got
    return n


def timed(fn, paths):
    t0 = time.monotonic()
    n = fn(paths)
    _cuda_sync_free()
    seconds = time.monotonic() - t0
    return {"bytes": n, "seconds": round(seconds, 3), "gbps": round(n / seconds / GB, 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--shard-gib", type=float, default=4)
    ap.add_argument("--dir", default="/var/tmp/specdec-load")
    args = ap.parse_args()
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "shards": args.shards,
           "shard_gib": args.shard_gib}
    t0 = time.monotonic()
    paths = write_shards(args.dir, args.shards, args.shard_gib)
    out["write_seconds"] = round(time.monotonic() - t0, 1)
    loaders = {"safetensors": load_safetensors, "fastsafetensors": load_fastsafetensors, "runai_streamer": load_runai,
               "plain_read": read_plain}
    for name, fn in loaders.items():
        row = {}
        try:
            row["resident_after_evict"] = evict(paths)
            row["cold"] = timed(fn, paths)
            row["warm"] = timed(fn, paths)
        except Exception as exc:  # a loader that cannot run here is reported, the others still run
            row["error"] = "%s: %s" % (type(exc).__name__, exc)
        out[name] = row
        print(name, json.dumps(row), file=sys.stderr, flush=True)
    # The prewarm as the switch runs it (_prewarm.plan + warm), then the default loader.
    row = {"resident_after_evict": evict(paths)}
    with open("/proc/meminfo") as f:
        planned = PREWARM.plan([args.dir], f.read(), 8 << 30)
    t0 = time.monotonic()
    done = PREWARM.warm(planned, lambda: PREWARM.meminfo(open("/proc/meminfo").read()).get("MemAvailable"), 8 << 30)
    row["prewarm"] = dict(done, planned_to_read=planned["to_read_bytes"], fits=planned["fits"],
                          wall=round(time.monotonic() - t0, 3))
    row["load_after_prewarm"] = timed(load_safetensors, paths)
    out["prewarm_then_safetensors"] = row
    shutil.rmtree(args.dir, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
