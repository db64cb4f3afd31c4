# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wake probe: did a parked engine that speculates come back with its acceptance? (docs/park.md)

A wake-up can bring the weights back and leave the draft behind: vLLM has been seen not to reload an MTP
draft after sleep level 2 and wake (issue 52479): every draft rejected, the engine serving at the cost of
drafting with nothing accepted, a silent 2x slowdown. So the switch measures a short probe (a few greedy
requests of the suite through ``spec_bench``) on the baseline just before it is parked, the same probe right
after it is woken, and compares the two acceptances with the nightly watch's test (``_watch.judge``: per draft
position, a one-sided two-proportion test at ``alpha`` over the positions) with a larger ``min_drop`` (a
collapse, not a drift) and fewer ``min_drafts`` (a short probe). A collapse makes the switch restore the
baseline by a restart (a fresh load brings the draft back) instead of serving from the woken engine.

Never a collapse from missing data: a baseline that does not speculate (no drafts before), an engine whose
acceptance is a running average since its start (SGLang's ``avg_spec_accept_length``, which a probe after the
wake cannot separate from the traffic before it), or too few drafts: ``judged: false`` with the reason.

Standard library only.
"""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _watch

DEFAULTS = {
    # False-collapse rate per wake-up (split over the draft positions compared).
    "alpha": 0.01,
    # Smallest absolute drop of a position's acceptance that counts as a collapse.
    "min_drop": 0.2,
    # Fewest drafts on either side: a probe of 8 requests of 32 tokens drafts some 100-250 times.
    "min_drafts": 20,
}


def compare(before, after, overrides=None):
    """``before`` / ``after``: the probe's spec_bench results (or ``_watch.summarize`` summaries).

    Returns ``{"judged", "collapsed", "reason", "line", "before", "after", "positions", "settings"}``: ``before``
    and ``after`` are the mean acceptance lengths; ``collapsed`` only when ``judged``.
    """
    config = dict(DEFAULTS)
    config.update(overrides or {})
    kept = _watch.summarize(before) if before else None
    now = _watch.summarize(after) if after else None
    if kept is None or now is None:
        out = {"judged": False, "dropped": False, "positions": [], "settings": config,
               "reason": "no probe %s" % ("before the engine was parked" if kept is None else "after the wake-up")}
    elif kept.get("source") in _watch.COUNTED and not kept.get("drafts"):
        out = {"judged": False, "dropped": False, "positions": [], "settings": config,
               "reason": "the baseline drafted nothing before it was parked (speculative decoding off, or no counts)"}
    else:
        out = _watch.judge(kept, now, config)
    lengths = out.get("mean_acceptance_length") or {}
    for key in ("reason", "line"):
        if out.get(key):
            out[key] = out[key].replace("when kept", "before parking").replace("tonight", "after the wake-up")
    result = {"judged": out["judged"], "collapsed": bool(out["judged"] and out["dropped"]), "reason": out["reason"],
              "before": lengths.get("kept"), "after": lengths.get("now"), "positions": out.get("positions") or [],
              "settings": out.get("settings")}
    if result["collapsed"]:
        result["line"] = "acceptance collapsed after the wake-up: %s" % out["line"].replace("acceptance dropped ", "")
    elif out["judged"]:
        result["line"] = "acceptance after the wake-up as before: %s" % out["line"].replace("acceptance ", "")
    else:
        result["line"] = "wake probe not judged: %s" % out["reason"]
    return result
