# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict's lossless check: does the candidate write what the baseline writes? (docs/verdict.md)

Inputs are the ``outputs`` of spec_bench (``_bench_outputs``): per prompt a digest of the greedy output of
the lowest concurrency level. The candidate is compared with the baseline prompt by prompt (same index,
same prompt text, same level); the divergence rate is the share of the prompts compared whose outputs
differ. Above ``max_output_divergence`` the check fails ("outputs differ from the baseline", naming the
prompts and the characters where each first differs) and the verdict rolls back after the round it was
seen in; no statistics are needed, a greedy output is the same or it is not. A candidate whose sampler is
lossy by design (``lossy``: the operator's explicit opt-in) passes whatever the rate, and the verdict
reports the rate.

Standard library only.
"""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _bench_outputs

# Prompts named in a reason; the rest are counted.
SHOWN = 5


def merge(outputs_list):
    """The outputs of several rounds (in order) as one: per prompt the first digest taken; None without any."""
    merged = None
    for outputs in outputs_list:
        if not _bench_outputs.usable(outputs):
            continue
        if merged is None:
            merged = dict(outputs, prompts=list(outputs["prompts"]))
            continue
        if outputs.get("level") != merged.get("level"):
            continue
        have = {row.get("index") for row in merged["prompts"]}
        merged["prompts"].extend(row for row in outputs["prompts"] if row.get("index") not in have)
    if merged is None:
        skipped = next((o.get("skipped") for o in outputs_list if isinstance(o, dict) and o.get("skipped")), None)
        return {"skipped": skipped} if skipped else None
    merged["prompts"].sort(key=lambda row: row.get("index", 0))
    return merged


def _why_missing(side, outputs):
    if isinstance(outputs, dict) and outputs.get("skipped"):
        return "the %s's outputs were not digested (%s)" % (side, outputs["skipped"])
    return "the %s has no output digests%s" % (side, " (measured by an older version)" if side == "baseline" else "")


def compare(base, cand, limit, lossy=False):
    """``{"compared", "differ", "rate", "limit", "lossy_sampler", "level", "prompts": [...], "status", "why"}``
    or ``{"skipped": why}`` when the two sides cannot be compared.

    ``prompts``: the prompts that differ, ``{"index", "category", "chars": [first, last], "stable"}``.
    ``status``: ``fail`` when the rate is above ``limit`` and the sampler is not lossy by design, else ``pass``.
    """
    for side, outputs in (("baseline", base), ("candidate", cand)):
        if not _bench_outputs.usable(outputs):
            return {"skipped": _why_missing(side, outputs)}
    if base.get("level") != cand.get("level"):
        return {"skipped": "the baseline's digests are of c=%s, the candidate's of c=%s" % (base.get("level"), cand.get("level"))}
    block = int(base.get("block_chars") or _bench_outputs.BLOCK_CHARS)
    if int(cand.get("block_chars") or _bench_outputs.BLOCK_CHARS) != block:
        return {"skipped": "the two sides' digests have different block sizes"}
    base_rows = {(row.get("index"), row.get("prompt_sha256")): row for row in base["prompts"]}
    compared, differ = 0, []
    for row in cand["prompts"]:
        other = base_rows.get((row.get("index"), row.get("prompt_sha256")))
        if other is None:
            continue
        compared += 1
        where = _bench_outputs.first_difference(other, row, block)
        if where is not None:
            differ.append({"index": row.get("index"), "category": row.get("category"), "chars": where,
                           "stable": bool(other.get("stable", True)) and bool(row.get("stable", True))})
    if not compared:
        return {"skipped": "no prompt digested on both sides"}
    rate = len(differ) / float(compared)
    status = "fail" if rate > limit and not lossy else "pass"
    out = {"compared": compared, "differ": len(differ), "rate": rate, "limit": limit, "lossy_sampler": bool(lossy),
           "level": cand.get("level"), "prompts": differ, "status": status}
    out["why"] = _why(out)
    return out


def _where(row):
    first, last = row["chars"]
    at = "character %d" % first if first == last else "characters %d-%d" % (first, last)
    return "prompt %s (%s) from %s%s" % (row["index"], row.get("category") or "-", at,
                                         "" if row["stable"] else ", not repeatable on its own side")


def _why(out):
    share = "%d/%d prompts (%.1f%%, allowed %.1f%%)" % (out["differ"], out["compared"], 100 * out["rate"], 100 * out["limit"])
    if not out["differ"]:
        return "outputs identical to the baseline on %d/%d prompts (greedy, c=%s)" % (out["compared"], out["compared"], out["level"])
    shown = "; ".join(_where(row) for row in out["prompts"][:SHOWN])
    more = " and %d more" % (out["differ"] - SHOWN) if out["differ"] > SHOWN else ""
    lossy = ", a lossy sampler by the operator's opt-in (spec_switch_lossy_sampler)" if out["lossy_sampler"] else ""
    return "outputs differ from the baseline on %s%s: %s%s" % (share, lossy, shown, more)


def as_check(result):
    """The verdict's check row for a comparison (None when it was skipped)."""
    if "skipped" in result:
        return None
    return {"level": result["level"], "figure": "outputs", "baseline": 0.0, "candidate": result["rate"], "ratio": None,
            "ci": None, "limit": result["limit"], "method": "digest", "status": result["status"],
            "ok": result["status"] == "pass", "why": result["why"]}
