# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nightly acceptance watch: has speculative acceptance dropped since the configuration was kept?

Acceptance can drift down over hours on a running server (vLLM issue 41838) or drop across an engine
upgrade (vLLM issue 26191) while throughput still looks fine next to a noisy baseline. So the switch stores
the acceptance it measured when it kept a candidate (:func:`summarize` of the candidate's benchmark), and
the nightly job compares tonight's measurement of the same configuration with it (:func:`judge`).

What is compared: per draft position i (the counters' ``position`` label, 0 = the first drafted token), the
share of verification steps whose draft was accepted at position i, ``accepted_i / drafts``, from the counter
deltas ``spec_bench`` reads from an engine whose acceptance is counted (its adapter's ``ACCEPTANCE_METRICS``
of kind ``counters``: accepted per position and drafts), pooled over the levels and rounds of a benchmark. Each step is one Bernoulli trial per position, so the
counts give the noise.

The test, per position: one-sided two-proportion z-test (the pooled score test) of "no drop" against
"tonight's share is lower", at ``alpha / positions`` (Bonferroni, so the chance of any false flag on a
host is at most ``alpha``, 1 % by default, whatever k is). A position is flagged only when the test
rejects **and** the drop is at least ``min_drop`` (0.05 absolute by default): with the hundreds of
thousands of drafts a long run gives, the test alone would flag a drop of 0.01 that nobody should act on;
with a few hundred drafts, ``min_drop`` alone would flag noise. Fewer than ``min_drafts`` (50) drafts on
either side is "not judged".

Without per-position counters (an older engine release) the overall rate ``accepted / draft_tokens`` is compared the
same way with ``drafts`` as the trials (position ``all``): the per-step share of the k drafted tokens that
were accepted lies in [0, 1], so by the Bhatia-Davis inequality its variance is at most r (1 - r), the
binomial variance with ``drafts`` trials: the test stays conservative.

Never a false flag from missing data: no acceptance stored at keep time, an engine without counts (one
that reports only a running average since the server started), no drafts, a different unit running now, a
different number of positions: the answer is ``judged: false`` with the reason.
"""
from __future__ import annotations

import math

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _stats

# The acceptance sources that carry counts (drafts, accepted per position): the engines read by counters.
COUNTED = tuple(mod.ACCEPTANCE_SOURCE for mod in _engine.ENGINES.values() if mod.ACCEPTANCE_METRICS["kind"] == "counters")

DEFAULTS = {
    # Family-wise false-flag rate per host and night (split over the positions compared).
    "alpha": 0.01,
    # Smallest absolute drop in a position's acceptance that is worth flagging.
    "min_drop": 0.05,
    # Fewest drafts (verification steps) on either side for a comparison.
    "min_drafts": 50,
}


class WatchError(ValueError):
    """Settings that cannot be used."""


def settings(overrides=None):
    """DEFAULTS merged with overrides, validated (alpha in (0, 0.5), min_drop in [0, 1), min_drafts >= 1)."""
    out = dict(DEFAULTS)
    if overrides is not None and not isinstance(overrides, dict):
        raise WatchError("acceptance watch settings must be a mapping, got %r" % (overrides,))
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise WatchError("unknown acceptance watch setting %r; allowed: %s" % (key, ", ".join(sorted(DEFAULTS))))
        if value is None:
            continue
        if isinstance(value, bool):
            raise WatchError("acceptance watch setting %s must be a number, not a boolean" % key)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise WatchError("acceptance watch setting %s must be a number, got %r" % (key, value))
        ok = {"alpha": 0 < value < 0.5, "min_drop": 0 <= value < 1, "min_drafts": value >= 1 and value == int(value)}[key]
        if not (math.isfinite(value) and ok):
            raise WatchError("acceptance watch setting %s out of range: %r" % (key, value))
        out[key] = int(value) if key == "min_drafts" else value
    return out


# --------------------------------------------------------------------------- what is stored

def _count(value):
    """A non-negative whole count, or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(round(value))


def _rate(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and 0 <= value <= 1 else None


def _levels(bench):
    """The levels of a spec_bench result, a list of rounds, or a list of levels (the order kept)."""
    if isinstance(bench, dict):
        if "levels" in bench and isinstance(bench["levels"], list):
            return list(bench["levels"])
        if "acceptance" in bench:
            return [bench]
        if "bench" in bench:  # a stored measurement (the switch's result / baseline file)
            return _levels(bench["bench"])
        return []
    if isinstance(bench, (list, tuple)):
        out = []
        for item in bench:
            out.extend(_levels(item))
        return out
    return []


def summarize(bench):
    """Acceptance of a benchmark, pooled over its levels (and rounds), with the counts behind it.

    Input: a ``spec_bench`` result, a list of them (a candidate's rounds), or something holding one under
    ``bench``. Levels whose acceptance could not be read, or whose counters were reset during the level, are
    left out (and named in ``skipped``). Returns ``{"source", "drafts", "draft_tokens", "accepted_tokens",
    "accepted_per_position", "acceptance_rate", "mean_acceptance_length", "per_position", "levels",
    "skipped"}``; counts are None where the engine gave none (a ``server_info`` engine: only ``mean_acceptance_length``).
    """
    out = {"source": None, "drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_position": [],
           "acceptance_rate": None, "mean_acceptance_length": None, "per_position": [], "levels": 0, "skipped": []}
    lengths = []
    positions = None  # per index: [accepted, drafts] over the levels that expose that index
    for level in _levels(bench):
        acc = level.get("acceptance") if isinstance(level, dict) else None
        where = "c=%s" % (level.get("concurrency", "?") if isinstance(level, dict) else "?")
        if not isinstance(acc, dict):
            continue
        out["source"] = out["source"] or acc.get("source")
        if acc.get("error"):
            out["skipped"].append("%s: %s" % (where, acc["error"]))
            continue
        if acc.get("source") not in COUNTED:
            length = _stats.finite_or_none(acc.get("mean_acceptance_length"))
            if length is not None:
                lengths.append(length)
            continue
        if acc.get("counter_reset"):
            out["skipped"].append("%s: counters reset during the level" % where)
            continue
        drafts = _count(acc.get("drafts"))
        if not drafts:
            if acc.get("caveat"):
                out["skipped"].append("%s: %s" % (where, acc["caveat"]))
            continue
        out["levels"] += 1
        out["drafts"] += drafts
        out["draft_tokens"] += _count(acc.get("draft_tokens")) or 0
        out["accepted_tokens"] += _count(acc.get("accepted_tokens")) or 0
        rates = acc.get("per_position") or []
        if rates:
            positions = positions if positions is not None else []
            for i, rate in enumerate(rates):
                rate = _rate(rate)
                if rate is None:
                    continue
                while len(positions) <= i:
                    positions.append([0, 0])
                positions[i][0] += int(round(rate * drafts))
                positions[i][1] += drafts
    if out["levels"]:
        out["acceptance_rate"] = out["accepted_tokens"] / float(out["draft_tokens"]) if out["draft_tokens"] else None
        out["mean_acceptance_length"] = 1.0 + out["accepted_tokens"] / float(out["drafts"])
        if positions:
            out["accepted_per_position"] = [p[0] for p in positions]
            out["per_position"] = [p[0] / float(p[1]) if p[1] else None for p in positions]
            out["drafts_per_position"] = [p[1] for p in positions]
    else:
        out["drafts"] = out["draft_tokens"] = out["accepted_tokens"] = None if out["source"] not in COUNTED else 0
        if lengths:
            out["mean_acceptance_length"] = sum(lengths) / len(lengths)
    return out


def _is_summary(data):
    return isinstance(data, dict) and "accepted_per_position" in data and "drafts" in data


# --------------------------------------------------------------------------- the comparison

def _p_drop(x0, n0, x1, n1):
    """One-sided p-value of the pooled two-proportion z-test of H0 p1 >= p0 against p1 < p0."""
    pooled = (x0 + x1) / float(n0 + n1)
    var = pooled * (1.0 - pooled) * (1.0 / n0 + 1.0 / n1)
    diff = x0 / float(n0) - x1 / float(n1)
    if var <= 0:
        return 1.0 if diff <= 0 else 0.0
    z = diff / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _compare(position, x0, n0, x1, n1, config, tests):
    kept, now = x0 / float(n0), x1 / float(n1)
    drop = kept - now
    p_value = _p_drop(x0, n0, x1, n1)
    level = config["alpha"] / tests
    significant = p_value < level
    dropped = significant and drop >= config["min_drop"] - 1e-12
    if dropped:
        why = "dropped beyond noise"
    elif drop <= 0:
        why = "not lower"
    elif significant:
        why = "lower by %.3f, below the %.2f worth flagging" % (drop, config["min_drop"])
    else:
        why = "within noise"
    return {"position": position, "kept": kept, "now": now, "drop": drop, "drafted_kept": n0, "drafted_now": n1,
            "accepted_kept": x0, "accepted_now": x1, "p_value": p_value, "level": level, "dropped": dropped, "why": why}


def _not_judged(reason, kept=None, now=None, config=None):
    return {"judged": False, "dropped": False, "reason": reason, "line": "acceptance not judged: %s" % reason,
            "method": None, "positions": [], "settings": config,
            "mean_acceptance_length": {"kept": (kept or {}).get("mean_acceptance_length"),
                                       "now": (now or {}).get("mean_acceptance_length")}}


def _no_counts(side, data):
    if data.get("source") and data["source"] not in COUNTED:
        return ("the engine exposes no acceptance counts %s (%s reports only a running mean acceptance length)"
                % (side, data["source"]))
    if data.get("source") is None:
        return "no acceptance was measured %s (speculative decoding off, or no metrics read)" % side
    if not data.get("drafts"):
        why = "; ".join(data.get("skipped") or [])
        return "no drafts were counted %s%s" % (side, " (%s)" % why if why else "")
    return None


def judge(kept, now, overrides=None):
    """Compare tonight's acceptance (``now``) with the one stored when the configuration was kept.

    Both are :func:`summarize` results, or benchmarks that are summarised first. Returns ``{"judged",
    "dropped", "reason", "line", "method" (per_position | overall), "positions": [{"position", "kept", "now",
    "drop", "drafted_kept", "drafted_now", "p_value", "level", "dropped", "why"}], "mean_acceptance_length":
    {"kept", "now"}, "settings"}``; ``dropped`` is true only when ``judged``.
    """
    config = settings(overrides)
    if kept is None or (isinstance(kept, dict) and not kept):
        return _not_judged("no acceptance was stored when the configuration was kept", None, None, config)
    kept = kept if _is_summary(kept) else summarize(kept)
    now = now if _is_summary(now) else summarize(now)
    for side, data in (("when kept", kept), ("tonight", now)):
        reason = _no_counts(side, data)
        if reason:
            return _not_judged(reason, kept, now, config)
    too_few = [("when kept", kept["drafts"]), ("tonight", now["drafts"])]
    too_few = ["%d draft(s) %s" % (n, side) for side, n in too_few if n < config["min_drafts"]]
    if too_few:
        return _not_judged("too few drafts to judge (%s; at least %d needed)" % (", ".join(too_few), config["min_drafts"]),
                           kept, now, config)
    rows = []
    per_kept, per_now = kept.get("accepted_per_position") or [], now.get("accepted_per_position") or []
    if per_kept and per_now:
        if len(per_kept) != len(per_now):
            return _not_judged("the number of draft positions changed (%d when kept, %d tonight): another configuration"
                               % (len(per_kept), len(per_now)), kept, now, config)
        n_kept = kept.get("drafts_per_position") or [kept["drafts"]] * len(per_kept)
        n_now = now.get("drafts_per_position") or [now["drafts"]] * len(per_now)
        pairs = [(i, per_kept[i], n_kept[i], per_now[i], n_now[i]) for i in range(len(per_kept))
                 if n_kept[i] >= config["min_drafts"] and n_now[i] >= config["min_drafts"]]
        method = "per_position"
    elif kept.get("draft_tokens") and now.get("draft_tokens"):
        k_kept = kept["draft_tokens"] / float(kept["drafts"])
        k_now = now["draft_tokens"] / float(now["drafts"])
        if abs(k_kept - k_now) > 0.5:
            return _not_judged("the tokens drafted per step changed (%.1f when kept, %.1f tonight): another configuration"
                               % (k_kept, k_now), kept, now, config)
        # accepted share of a step's drafted tokens, one trial per step (Bhatia-Davis: at most binomial variance)
        pairs = [("all", kept["accepted_tokens"] / k_kept, kept["drafts"], now["accepted_tokens"] / k_now, now["drafts"])]
        method = "overall"
    else:
        return _not_judged("no per-position or draft-token counts to compare", kept, now, config)
    if not pairs:
        return _not_judged("no draft position has enough drafts on both sides", kept, now, config)
    rows = [_compare(pos, x0, n0, x1, n1, config, len(pairs)) for pos, x0, n0, x1, n1 in pairs]
    dropped = [r for r in rows if r["dropped"]]
    length = "; mean acceptance length %s -> %s" % (
        _fmt(kept.get("mean_acceptance_length")), _fmt(now.get("mean_acceptance_length")))
    if dropped:
        line = "acceptance dropped " + "; ".join(
            "at position %s: %.2f -> %.2f (drafted %d kept, %d now)" % (r["position"], r["kept"], r["now"], r["drafted_kept"],
                                                                        r["drafted_now"]) for r in dropped) + length
        reason = "; ".join("position %s %.3f -> %.3f, p=%.2g < %.2g" % (r["position"], r["kept"], r["now"], r["p_value"], r["level"])
                           for r in dropped)
    else:
        line = "acceptance within noise at %d position(s): %s%s" % (
            len(rows), ", ".join("%.2f -> %.2f" % (r["kept"], r["now"]) for r in rows), length)
        reason = "no position dropped by %.2f or more beyond noise (alpha %g)" % (config["min_drop"], config["alpha"])
    return {"judged": True, "dropped": bool(dropped), "reason": reason, "line": line, "method": method, "positions": rows,
            "settings": config, "mean_acceptance_length": {"kept": kept.get("mean_acceptance_length"),
                                                           "now": now.get("mean_acceptance_length")}}


def _fmt(value):
    return "-" if value is None else "%.2f" % value


def watch(stored, now, running_unit=None, overrides=None):
    """The nightly entry: ``stored`` is what the switch wrote when it kept the configuration
    (``{"acceptance": summary, "unit_sha256", "label", "kept_at", ...}``, or None), ``now`` tonight's benchmark
    (or its summary), ``running_unit`` the sha256 of the unit file that runs now. A stored acceptance of another
    unit (a rollback or a change outside the switch since) is not compared. Adds ``kept_at``, ``label`` and
    ``now`` (tonight's summary) to :func:`judge`'s answer.
    """
    now_summary = now if _is_summary(now) else summarize(now)
    extra = {"now_acceptance": now_summary}
    if not isinstance(stored, dict) or not stored.get("acceptance"):
        out = _not_judged("no acceptance was stored when the configuration was kept", None, now_summary, settings(overrides))
        out.update(extra, kept_at=None, label=None)
        return out
    extra.update(kept_at=stored.get("kept_at"), label=stored.get("label"))
    kept_unit = stored.get("unit_sha256")
    if running_unit and kept_unit and running_unit != kept_unit:
        out = _not_judged("the unit running now is not the one kept (%s kept, %s now)" % (kept_unit[:12], running_unit[:12]),
                          stored["acceptance"], now_summary, settings(overrides))
    else:
        out = judge(stored["acceptance"], now_summary, overrides)
    out.update(extra)
    return out
