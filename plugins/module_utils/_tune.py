# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tuner's policy (playbooks/tune.yml): which K to load next, and the schedule the grid implies.

The grid is one method's K values by the benchmark's concurrency levels. Every K > 0 is one engine
load of a candidate unit (the operator's main cost: 30 minutes each on a large model), judged by the
switch's own sequential verdict against the baseline (docs/verdict.md), so a K that clearly loses costs
one short round. K = 0 (no drafting) is the baseline itself: ratio 1 by definition, no load.

- ``settings(overrides)``: the tuner's settings, validated (``k``, ``max_loads``, ``coarse``).
- ``cells(tried)``: the grid so far, from the tries of sweep_try.yml (each K's last verdict).
- ``choose(cells, levels)``: per level the K to run: the smallest K whose interval reaches the best
  K's lower bound (prefer the smaller K within noise, as vLLM's tune_speculative_k does; a smaller K
  drafts less, and K = 0 wins every tie with the baseline).
- ``next_k(settings, cells, levels)``: the next K to load, or None: a coarse first pass (the smallest,
  the middle and the largest K), then the untried neighbours of each level's choice, within the budget.
- ``schedule(choice, engine)``: the bands the choices imply, in ``_spec``'s canonical schedule form.
- ``requests(request, tune, engine)`` / ``pick(tried, levels, engine, request)``: the grid's candidate
  requests (refusing a method that cannot run a schedule, before any load) and what the grid implies.
- ``markdown(records)`` / ``heatmap_png(record)``: what spec_report writes of a tuning run.
"""
from __future__ import annotations

import io
import math

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _report, _spec

DEFAULTS = {
    # The K values of the grid (0, no drafting, is always there: the baseline).
    "k": [1, 2, 3, 4, 5],
    # Engine loads at most, the final schedule's included: the first pass needs 3, the final 1.
    "max_loads": 5,
    # A coarse first pass (smallest, middle, largest K), then the neighbours of the best; without it,
    # every K of the grid in order (as many as the budget allows).
    "coarse": True,
}
K_MAX = 16
# Where the schedule does not draft the candidate runs as the baseline does, with the drafter loaded:
# the bars there are 'not slower' (output tok/s within 3 %, TPOT within 8 %; the verdict's tolerance
# and host shift come on top, so an equal TPOT can be shown within its bar), not a win.
NO_DRAFT_BARS = {"min_speedup": 0.97, "max_tpot_regression": 0.08}


class TuneError(ValueError):
    """Settings or inputs the tuner cannot work with."""


def _int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise TuneError("tune %s must be a whole number, got %r" % (name, value))
    value = int(value)
    if not low <= value <= high:
        raise TuneError("tune %s must be between %d and %d, got %d" % (name, low, high, value))
    return value


def settings(overrides=None):
    """DEFAULTS merged with ``overrides`` and validated; ``k`` sorted, unique, without 0."""
    if overrides is not None and not isinstance(overrides, dict):
        raise TuneError("tune settings must be a mapping, got %r" % (overrides,))
    out = dict(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise TuneError("unknown tune setting %r; allowed: %s" % (key, ", ".join(sorted(DEFAULTS))))
        if value is not None:
            out[key] = value
    if not isinstance(out["k"], (list, tuple)):
        raise TuneError("tune k must be a list of K values, got %r" % (out["k"],))
    ks = sorted({_int("k", k, 0, K_MAX) for k in out["k"]} - {0})
    if not ks:
        raise TuneError("tune k needs at least one K above 0 (0, no drafting, is the baseline)")
    if not isinstance(out["coarse"], bool):
        raise TuneError("tune coarse must be true or false, got %r" % (out["coarse"],))
    max_loads = _int("max_loads", out["max_loads"], 2, 64)
    return {"k": ks, "max_loads": max_loads, "coarse": out["coarse"]}


def _first_pass(ks):
    if len(ks) <= 3:
        return list(ks)
    return [ks[0], ks[(len(ks) - 1) // 2], ks[-1]]


# --------------------------------------------------------------------------- the grid

def _cell(check):
    ratio = check.get("ratio")
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        return None
    ci = check.get("ci") or [ratio, ratio]
    return {"ratio": float(ratio), "ci": [float(ci[0]), float(ci[1])]}


def cells(tried):
    """``{k: {level: {"ratio", "ci"}}}`` from the tries (sweep_try.yml entries: ``spec``, ``checks``).

    A try that failed (the candidate did not start or serve) is there with no levels: tried, not chosen.
    """
    out = {}
    for entry in tried or []:
        k = _int("k", _tried_k(entry), 1, K_MAX)
        levels = {}
        for check in entry.get("checks") or []:
            if check.get("figure") == "output_tok_s":
                cell = _cell(check)
                if cell is not None:
                    levels[int(check["level"])] = cell
        out[k] = levels
    return out


def _levels(levels):
    try:
        out = sorted({int(level) for level in levels})
    except (TypeError, ValueError):
        raise TuneError("concurrency levels must be whole numbers, got %r" % (levels,))
    if not out or out[0] < 1:
        raise TuneError("the tuner needs concurrency levels >= 1, got %r" % (levels,))
    return out


def choose(grid, levels):
    """Per level ``{"k", "ratio", "ci", "best_k"}``: the smallest K within noise of the best one."""
    out = {}
    for level in _levels(levels):
        options = {0: {"ratio": 1.0, "ci": [1.0, 1.0]}}
        options.update((k, by_level[level]) for k, by_level in grid.items() if level in by_level)
        best = max(options, key=lambda k: (options[k]["ratio"], -k))
        floor = options[best]["ci"][0]
        k = min(k for k, cell in options.items() if cell["ci"][1] >= floor)
        out[level] = {"k": k, "ratio": options[k]["ratio"], "ci": options[k]["ci"], "best_k": best}
    return out


def next_k(tune, grid, levels):
    """The next K to load, or None when the grid is done or the budget (one load kept for the final) is spent."""
    if len(grid) >= tune["max_loads"] - 1:
        return None
    order = _first_pass(tune["k"]) if tune["coarse"] else list(tune["k"])
    for k in order:
        if k not in grid:
            return k
    if not tune["coarse"]:
        return None
    ks = tune["k"]
    for level, pick in sorted(choose(grid, levels).items()):
        # The neighbours of the chosen K (of the best one when the choice is 0), the smaller first.
        around = pick["k"] or pick["best_k"]
        if around == 0:
            continue
        i = ks.index(around)
        for j in (i - 1, i + 1):
            if 0 <= j < len(ks) and ks[j] not in grid:
                return ks[j]
    return None


# --------------------------------------------------------------------------- the schedule


def _end(lo_level, hi_level, engine):
    """The last batch size that runs the lower level's K: the geometric middle of the two levels."""
    end = max(lo_level, int(math.floor(math.sqrt(lo_level * hi_level))))
    ends = _engine.get(engine).TUNE_BATCH_ENDS  # an engine that pads batches: band ends snapped down to its sizes
    if ends is not None:
        end = max([e for e in ends if lo_level <= e <= end] or [lo_level])
    return min(end, hi_level - 1)


def schedule(choice, engine):
    """The schedule the per-level choices imply.

    Returns ``{"schedule": [{"batch": [lo, hi|None], "k"}] | None, "fixed_k": K | None, "speculate",
    "text", "no_draft_levels"}``: ``schedule`` is None when one K serves every level (``fixed_k``);
    ``speculate`` is False when every level chose K = 0 (nothing beat the baseline).
    """
    levels = sorted(choice)
    bands = []
    lo = 1
    for i, level in enumerate(levels):
        hi = _end(level, levels[i + 1], engine) if i + 1 < len(levels) else None
        k = choice[level]["k"]
        if bands and bands[-1]["k"] == k:
            bands[-1]["batch"][1] = hi
        else:
            bands.append({"batch": [lo, hi], "k": k})
        lo = (hi or 0) + 1
    ks = {b["k"] for b in bands}
    out = {"speculate": any(ks), "no_draft_levels": [level for level in levels if choice[level]["k"] == 0]}
    if len(bands) == 1:
        out.update(schedule=None, fixed_k=bands[0]["k"], text="k=%d at every batch" % bands[0]["k"])
    else:
        out.update(schedule=bands, fixed_k=None, text=",".join(
            "%d%s:%d" % (b["batch"][0], "+" if b["batch"][1] is None else "-%d" % b["batch"][1], b["k"]) for b in bands))
    return out


def thresholds_by_level(result, levels):
    """The final verdict's per-level bars: where the schedule does not draft, 'not slower' is the bar."""
    return {int(level): dict(NO_DRAFT_BARS) for level in result["no_draft_levels"] if int(level) in set(levels)}


# --------------------------------------------------------------------------- requests

def requests(request, tune, engine, tensor_parallel_size=1):
    """The grid's candidate requests, one per K; refuses a method that cannot run a schedule here.

    The refusal comes first, before any engine load: a grid whose result could not be installed would
    cost the operator its loads for nothing.
    """
    if not isinstance(request, dict) or "method" not in request:
        raise TuneError("tune needs a request with a method, got %r" % (request,))
    if "num_speculative_tokens" in request or "schedule" in request:
        raise TuneError("tune sets num_speculative_tokens and the schedule itself; leave both out of the request")
    top = max(tune["k"])
    probe = dict(request, schedule=[{"batch": [1, 1], "k": top}, {"batch": [2, None], "k": 0}])
    try:
        _spec.normalize(probe, engine, tensor_parallel_size)
    except _spec.SpecError as exc:
        raise TuneError("cannot tune %s on %s: %s" % (request["method"], engine, exc))
    return [dict(request, num_speculative_tokens=k) for k in tune["k"]]


def fixed_k(tried):
    """The tries of one fixed K (a schedule's try is not a cell of the grid)."""
    return [e for e in tried or [] if "num_speculative_tokens" in (e.get("spec") or {}) and "schedule" not in e["spec"]]


def _tried_k(entry):
    return int(((entry.get("spec") or {}).get("num_speculative_tokens")) or 0)


def pick(tried, levels, engine, request):
    """What the grid implies, and what to do: ``{"grid", "choice", "levels", "schedule_text",
    "speculate", "final": request | None, "tried": entry | None, "thresholds_by_level"}``.

    ``final`` is the request to install and judge (a schedule); ``tried`` instead names the try that
    already measured the chosen fixed K (no further load: its verdict stands).
    """
    entries = fixed_k(tried)
    grid = cells(entries)
    choice = choose(grid, levels)
    result = schedule(choice, engine)
    out = {"grid": {str(k): {str(lv): c for lv, c in by.items()} for k, by in grid.items()},
           "choice": {str(lv): c for lv, c in choice.items()}, "levels": sorted(choice),
           "schedule_text": result["text"], "speculate": result["speculate"], "final": None, "tried": None,
           "thresholds_by_level": {str(lv): v for lv, v in thresholds_by_level(result, choice).items()}}
    if not result["speculate"]:
        out["schedule_text"] = "no drafting (no K was shown faster at any level)"
    elif result["fixed_k"] is not None:
        out["tried"] = next(e for e in entries if _tried_k(e) == result["fixed_k"])
    else:
        out["final"] = dict(request, schedule=result["schedule"])
    return out


# --------------------------------------------------------------------------- what the report shows

def _md(value):
    return _report.md_text(value)  # the report's one escaping (issue 31: values never become markup)


def _fmt_cell(cell):
    if not cell:
        return "-"
    return "x%.2f [%.2f, %.2f]" % (cell["ratio"], cell["ci"][0], cell["ci"][1])


def markdown(records):
    """A section per tuning record: the grid (speed-up against the baseline, 95 % interval), the choice."""
    parts = []
    for rec in records:
        tune = rec.get("tune")
        if not tune:
            continue
        levels = [int(level) for level in tune["levels"]]
        grid = {int(k): {int(lv): c for lv, c in by.items()} for k, by in tune["grid"].items()}
        parts.append("\n## Tuning %s on %s\n" % (_md(tune["method"]), _md(rec.get("host", "?"))))
        parts.append("| K | " + " | ".join("c=%d" % lv for lv in levels) + " |")
        parts.append("|---|" + "---|" * len(levels))
        parts.append("| 0 (baseline) | " + " | ".join("x1.00" for _lv in levels) + " |")
        for k in sorted(grid):
            parts.append("| %d | %s |" % (k, " | ".join(_fmt_cell(grid[k].get(lv)) for lv in levels)))
        parts.append("\nChosen: %s; engine loads %d (budget %d), restarts %d; outcome %s.\n" % (
            _md(tune["schedule_text"]), tune["loads"], tune["max_loads"], tune["restarts"], _md(rec.get("outcome", "?"))))
    return "\n".join(parts) + ("\n" if parts else "")


def heatmap_png(rec):
    """A PNG heat map of one tuning record's grid (K by concurrency, speed-up), the choices marked."""
    figure = _report.FIGURE.get()
    if figure is None:
        return None
    tune = rec["tune"]
    levels = [int(level) for level in tune["levels"]]
    grid = {int(k): {int(lv): c for lv, c in by.items()} for k, by in tune["grid"].items()}
    ks = [0] + sorted(grid)
    values = [[1.0 if k == 0 else (grid[k].get(lv) or {}).get("ratio", float("nan")) for lv in levels] for k in ks]
    fig = figure(figsize=(1.6 + 1.2 * len(levels), 1.2 + 0.55 * len(ks)))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(values, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto", origin="lower")
    chosen = {int(lv): c["k"] for lv, c in tune["choice"].items()}
    for row, k in enumerate(ks):
        for col, level in enumerate(levels):
            value = values[row][col]
            text = "-" if math.isnan(value) else "x%.2f" % value
            ax.text(col, row, text, ha="center", va="center", fontsize=8,
                    fontweight="bold" if chosen.get(level) == k else "normal")
            if chosen.get(level) == k:
                ax.add_patch(_box(col, row))
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels(["c=%d" % lv for lv in levels])
    ax.set_yticks(range(len(ks)))
    ax.set_yticklabels(["%d" % k for k in ks])
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("K (draft tokens)")
    ax.set_title("%s on %s: %s" % (tune["method"], rec.get("host", "?"), tune["schedule_text"]), fontsize=9)
    fig.colorbar(image, ax=ax, label="output tok/s vs baseline")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _box(col, row):
    from matplotlib.patches import Rectangle
    return Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, linewidth=2, edgecolor="black")
