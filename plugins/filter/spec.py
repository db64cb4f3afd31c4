# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/_engine.py, _spec.py, _server.py, _switch.py (with _verdict.py's thresholds) and _unit.py: engine facts,
specs, the checked unit and switch settings, systemd quoting.

Documentation of each filter lives beside this file in <filter name>.yml. A refused spec or an
argv systemd cannot run raises AnsibleFilterError with the module_utils message, so a playbook
fails while templating on the controller, before any host is touched.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.module_utils._lazy import module_util

# Imported when a filter of this file runs, not when Ansible loads the file to look for one (_lazy.py).
_engine = module_util("_engine")
_gate = module_util("_gate")
_server = module_util("_server")
_spec = module_util("_spec")
_suites = module_util("_suites")
_switch = module_util("_switch")
_unit = module_util("_unit")
_verdict = module_util("_verdict")


def _wrap(name, func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_spec.SpecError, _unit.UnitQuoteError, _gate.GateError, _engine.UnknownEngine) as exc:
            raise AnsibleFilterError("%s: %s" % (name, exc))
    call.__name__ = name
    return call


def engine_facts(engine):
    return _engine.facts(_engine.DEFAULT if engine is None else engine)


def spec_normalize(spec, engine, tp=1):
    return _spec.normalize(spec, engine, tp)


def spec_args(spec, engine, tp=1, schedule_dir=None):
    return _spec.engine_args(spec, engine, tp, _spec.SCHEDULE_DIR if schedule_dir is None else schedule_dir)


def spec_warnings(spec, engine, tp=1):
    return _spec.spec_warnings(spec, engine, tp)


def spec_describe(spec):
    return _spec.describe(spec)


def server_unit(settings):
    return _server.unit_settings(settings)


def server_secret_env(settings):
    return _server.secret_env_text(settings)


def switch_settings(settings):
    out = _switch.settings(settings)
    # The verdict's bars pass the same gate: one trip from Jinja for the switch's settings and thresholds.
    try:
        out["thresholds"] = _verdict.thresholds(settings.get("thresholds"))
    except _verdict.VerdictError as exc:
        raise _gate.GateError("spec_switch_thresholds: %s" % exc)
    return out


def switch_baseline(values):
    out = _switch.baseline_identity(values)
    # The verdict's plan passes the same gate; spec_switch_bench_requests is the baseline's request count and wins
    # over a plan's baseline_requests.
    try:
        plan = values.get("plan") or {}
        out["plan"] = _verdict.plan(dict(plan, baseline_requests=values.get("bench_requests")) if isinstance(plan, dict) else plan)
    except _verdict.VerdictError as exc:
        raise _gate.GateError("spec_switch_plan: %s" % exc)
    return out


def switch_prompts(path, fmt="auto", suite="reasoning"):
    return _switch.prompts_source(path, fmt, suite)[1]


def switch_prompts_text(path, fmt="auto"):
    return _suites.prompts_jsonl(_switch.prompts_source(path, fmt)[0])


def systemd_exec(argv):
    return _unit.exec_line(argv)


def systemd_env(env):
    return _unit.env_line(env)


class FilterModule:
    def filters(self):
        funcs = (engine_facts, spec_normalize, spec_args, spec_warnings, spec_describe, server_unit, server_secret_env, switch_settings,
                 switch_baseline, switch_prompts, switch_prompts_text, systemd_exec, systemd_env)
        return {f.__name__: _wrap(f.__name__, f) for f in funcs}
