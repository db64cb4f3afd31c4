# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The spec_switch role's own settings, checked by the gate before the host is touched.

``settings(values) -> dict`` takes the role's variables without their ``spec_switch_`` prefix and
returns them checked and typed; a refusal is a ``GateError`` naming the variable. The suite names a
baseline file and labels Prometheus series, the state and lock paths are where root writes: all of
them reach the host, so all of them pass here.
"""
from __future__ import annotations

import os
import re

from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _group, _suites

__all__ = ["settings", "baseline_identity", "prompts_source"]


def _choice(field, value, choices):
    if value not in choices:
        raise _gate.GateError("%s must be one of %s, got %r" % (field, ", ".join(choices), value))
    return value


def _bench(v):
    """The benchmark settings a baseline is measured with, checked alike for the switch's settings and the
    baseline's identity."""
    g = _gate

    def concurrency(field, item):
        return g.integer(field, item, 1, 4096)

    # No levels named: the baseline's benchmark takes them from the engine's running-request gauge (_levels).
    levels = g.word_list("spec_switch_bench_concurrency", v.get("bench_concurrency") or [], concurrency, max_items=32)
    return {
        "bench_api": _choice("spec_switch_bench_api", v.get("bench_api"), ("completions", "chat")),
        "bench_concurrency": sorted(set(levels)),
        "bench_warmup": g.integer("spec_switch_bench_warmup", v.get("bench_warmup"), 0, 10000),
        "bench_max_tokens": g.integer("spec_switch_bench_max_tokens", v.get("bench_max_tokens"), 1, 1 << 20),
        # The lossless check (_bench_outputs, _verdict_lossless): prompts digested.
        "lossless_prompts": g.integer("spec_switch_lossless_prompts", v.get("lossless_prompts", 8), 0, 1000),
    }


def settings(values):
    g = _gate
    v = values
    textfile = v.get("textfile_dir") or ""
    out = _bench(v)
    out.update({
        "suite": _choice("spec_switch_suite", v.get("suite"), _suites.CATEGORIES),
        "levels_observe": g.number("spec_switch_levels_observe", v.get("levels_observe", 10), 0.0, 3600.0),
        "levels_max": g.integer("spec_switch_levels_max", v.get("levels_max", 64), 1, 4096),
        "bench_requests": g.integer("spec_switch_bench_requests", v.get("bench_requests"), 1, 100000),
        "bench_timeout": g.number("spec_switch_bench_timeout", v.get("bench_timeout"), 0.0, 86400.0, lo_open=True),
        "bench_request_timeout": g.number("spec_switch_bench_request_timeout", v.get("bench_request_timeout", 600),
                                          0.0, 86400.0, lo_open=True),
        "bench_run_timeout": g.integer("spec_switch_bench_run_timeout", v.get("bench_run_timeout", 1800), 1, 86400),
        "missing_baseline": _choice("spec_switch_missing_baseline", v.get("missing_baseline"), ("measure", "fail")),
        "reclaim_scope": _choice("spec_switch_reclaim_scope", v.get("reclaim_scope"), ("unit", "gpu")),
        "reclaim_verify_timeout": g.integer("spec_switch_reclaim_verify_timeout", v.get("reclaim_verify_timeout"),
                                            1, 3600),
        "state_dir": g.path("spec_switch_state_dir", v.get("state_dir")),
        "lock_path": g.path("spec_switch_lock_path", v.get("lock_path")),
        "lock_wait": g.integer("spec_switch_lock_wait", v.get("lock_wait"), 0, 86400),
        "textfile_dir": g.path("spec_switch_textfile_dir", textfile) if textfile else "",
        "park": g.boolean("spec_switch_park", v.get("park", False)),
        # Read the candidate's weights into the page cache while the baseline serves (docs/load.md).
        "prewarm": g.boolean("spec_switch_prewarm", v.get("prewarm", False)),
        "prewarm_margin_gib": g.number("spec_switch_prewarm_margin_gib", v.get("prewarm_margin_gib", 8), 0.0, 65536.0),
        "prewarm_timeout": g.integer("spec_switch_prewarm_timeout", v.get("prewarm_timeout", 900), 1, 86400),
        # The lossless check's opt-in for a lossy sampler.
        "lossy_sampler": g.boolean("spec_switch_lossy_sampler", v.get("lossy_sampler", False)),
    })
    _group.refuse_switch(v.get("serving_group"), _choice("operation", v.get("operation", "switch"),
                                                         ("switch", "sweep", "tune")), out["park"])
    out["serving_group"] = v.get("serving_group")
    if out["park"]:
        out.update(_park_settings(v))
    # What the prewarm keeps available beside its margin: with parking, the host's headroom and the baseline's
    # weights, which parking copies to CPU memory (their size given, or read from the model's files).
    weights = v.get("park_weights_bytes")
    weights = 0 if weights in (None, "") else g.integer("spec_switch_park_weights_bytes", weights, 0, 1 << 50)
    out["prewarm_reserve_bytes"] = int(out["park_cpu_headroom_gib"] * 1024 ** 3) + weights if out["park"] else 0
    out["prewarm_reserve_model"] = bool(out["park"] and not weights)
    return out


# The only names the park flow's candidate unit may have (its default is UNIT-candidate.service).
PARK_UNIT = re.compile(r"[A-Za-z0-9:_.\\-]+-candidate\.service\Z")
# The candidate's share before parking lowers it, when neither it nor production names one (vLLM's default).
DEFAULT_PARK_SHARE = 0.9


def _park_settings(v):
    """The candidate's unit, port and share beside a parked baseline: its own unit and port, never
    production's. Unset: production's port plus one, UNIT-candidate.service, production's share or 0.9."""
    g = _gate
    server_unit = v.get("server_unit") or ""
    default_unit = (server_unit[:-len(".service")] if server_unit.endswith(".service") else server_unit) + "-candidate.service"
    unit = g.name("spec_switch_park_unit", v.get("park_unit") or default_unit, "unit")
    park_port = v.get("park_port")
    if park_port in (None, ""):
        park_port = int(v.get("server_port") or 0) + 1
    port = g.integer("spec_switch_park_port", park_port, 1, 65535)
    share = v.get("park_share")
    if share in (None, ""):
        share = v.get("server_share") if v.get("server_share") not in (None, "") else DEFAULT_PARK_SHARE
    if unit == v.get("server_unit"):
        raise g.GateError("spec_switch_park_unit must differ from spec_server_unit (%s): the candidate runs "
                          "beside the parked baseline" % unit)
    if not PARK_UNIT.match(unit):
        # The park flow writes this unit and removes it afterwards: only a name of the collection's own
        # pattern, never an existing service of the host (sshd.service).
        raise g.GateError("spec_switch_park_unit must be a candidate unit of the collection's pattern NAME-candidate.service "
                          "(the default is %s), got %r" % (default_unit, unit))
    if port == int(v.get("server_port") or 0):
        raise g.GateError("spec_switch_park_port must differ from spec_server_port (%d): the parked baseline "
                          "keeps its port" % port)
    return {
        "park_unit": unit, "park_port": port,
        "park_share": g.number("spec_switch_park_share", share, 0.0, 1.0, lo_open=True),
        "park_cpu_headroom_gib": g.number("spec_switch_park_cpu_headroom_gib", v.get("park_cpu_headroom_gib", 8),
                                          0.0, 4096.0),
        "park_gpu_headroom_mib": g.integer("spec_switch_park_gpu_headroom_mib", v.get("park_gpu_headroom_mib", 1024),
                                           0, 1 << 20),
    }


def prompts_source(path, fmt='auto', suite='reasoning'):
    """(prompts, source): the operator's prompts file or request log at ``path`` on the controller (issue 32, item 5),
    read and checked before the host is touched; an empty ``path`` is the shipped ``suite`` (synthetic prompts, no
    prompts to send: the host's benchmark has the suite). A refusal is a GateError naming spec_switch_prompts_file
    and the line, never a prompt's text (a request log may hold user data)."""
    if path in (None, ""):
        return [], _suites.shipped_source(_choice("spec_switch_suite", suite, _suites.CATEGORIES))
    field = "spec_switch_prompts_file %s" % _gate.path("spec_switch_prompts_file", path)
    _choice("spec_switch_prompts_format", fmt, _suites.OPERATOR_FORMATS)
    try:
        with open(path, "rb") as f:
            data = f.read(_suites.MAX_OPERATOR_BYTES + 1)
    except OSError as exc:
        raise _gate.GateError("%s cannot be read on the controller: %s" % (field, exc.strerror or exc))
    try:
        prompts, source = _suites.operator_prompts(data, os.path.basename(path), fmt)
    except ValueError as exc:
        raise _gate.GateError("%s: %s" % (field, exc))
    return prompts, source


def baseline_identity(values):
    """The baseline of this host, engine, model and suite (roles/spec_switch/tasks/key.yml, docs/verdict.md): the
    prompts it runs on (their source: counts and a digest, never a text), where the operator's prompts wait on the
    host (empty for a shipped suite), the baseline's file name, and the settings a stored one must have been
    measured with to stand for a fresh one. ``values``: the role's variables without their ``spec_switch_`` prefix,
    and ``host``, ``engine``, ``model`` (the served name, else the model)."""
    g = _gate
    v = values
    _prompts, source = prompts_source(v.get("prompts_file"), v.get("prompts_format", "auto"), v.get("suite", "reasoning"))
    engine = g.text("spec_server_engine", v.get("engine"))
    model = g.text("spec_server_model", v.get("model"))
    bench = _bench(v)
    return {
        "prompts": source,
        "prompts_path": "" if source["synthetic"] else "%s/prompts-%s.jsonl" % (
            g.path("spec_switch_state_dir", v.get("state_dir")).rstrip("/"), source["suite"]),
        # A file name: what is not [A-Za-z0-9._-] becomes '_'.
        "key": "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", part) for part in (engine, model, source["suite"])),
        "settings": {
            "host": g.text("inventory_hostname", v.get("host")), "engine": engine, "model": model,
            "suite": source["suite"],
            "api": bench["bench_api"],
            # Empty: the levels come from the running-request gauge when the baseline is measured (its level_choice).
            "concurrency": bench["bench_concurrency"],
            "max_tokens": bench["bench_max_tokens"],
            "warmup": bench["bench_warmup"],
            # Not compared: a stored baseline stands when it has at least this many waves at every level.
            "min_waves": g.integer("spec_switch_bench_min_waves", v.get("bench_min_waves"), 0, 100000),
            # Not compared either: a stored baseline stands only with output digests when the lossless check is on.
            "lossless_prompts": bench["lossless_prompts"],
            "ignore_eos": True,
        },
    }
