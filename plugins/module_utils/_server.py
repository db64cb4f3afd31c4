# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything the spec_server unit template writes, computed and checked in one place.

``unit_settings(settings) -> dict`` takes the role's variables without their ``spec_server_``
prefix and returns the values the template lays out: the engine argv (base flags, then the spec's
rendering by ``_spec``, then the operator's extra arguments) quoted for ``ExecStart=``, the
``Environment=`` line, the secrets for the root-only ``EnvironmentFile=``, the sandbox lists, the
readiness URL. Every value passes ``_gate`` first, so a refusal names the variable
(``spec_server_user must be ...``) and happens on the controller, before the host is touched.

Secrets never reach the unit text, its argv or ``systemctl show``: ``api_key``, ``secret_env`` and
any ``env`` entry whose name looks like a credential (``HF_TOKEN``, ``*_API_KEY``...) go to the
environment file, the key under the engine's ``API_KEY_VAR``; an engine that reads its key only from
argv is started through its adapter's launcher (``KEY_LAUNCHER``), which appends the flag from the
environment inside the interpreter, where it is not part of the process's command line
(``/proc/PID/cmdline`` is readable by every local user). Every engine fact comes from ``_engine``.

A spec with a batch-size ``schedule`` on SGLang needs a file: ``schedule_path`` / ``schedule_text`` are
the adaptive config the argv names (``--speculative-adaptive-config``), which the role installs
root-owned before the unit (``schedule_dir``, named by content so a rolled-back unit finds its own).
Settings with which an engine silently drops a schedule (its adapter's ``SCHEDULE_OFF`` flags in
``extra_args``, its ``schedule_env_conflict``) are refused here, before the host is touched.
``spec_warnings`` lists what the operator should see (a deprecated method name, a band the engine reads
differently); the unit runs as rendered all the same.
"""
from __future__ import annotations

import re

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate, _group, _spec, _unit

__all__ = ["unit_settings", "secret_env_text", "ready_url", "OWNED_FLAGS", "FLAG_SPELLING", "SECRET_NAME",
           "secret_name", "flag_name"]

# Flags the collection sets itself, and how each engine's parser reads a flag's name (``underscores``: '_'
# folded into '-'; ``abbrev``: a unique prefix is the flag), so that a spelling it accepts cannot slip past
# OWNED_FLAGS. Both parsers take --flag=value as --flag value. Each engine's own, from its adapter (_engine);
# tests/contracts read them from the engines' own parsers.
OWNED_FLAGS = dict((name, mod.OWNED_FLAGS) for name, mod in _engine.ENGINES.items())
# The owned flags that make a serving group across nodes (their short forms and aliases included).
_GROUP_ONLY = dict((name, frozenset(mod.GROUP_FLAGS)) for name, mod in _engine.ENGINES.items())
FLAG_SPELLING = dict((name, mod.FLAG_SPELLING) for name, mod in _engine.ENGINES.items())
# Flags whose value is a credential (the key, a hub token): never in ExecStart= (a 0644 file, and argv is
# readable by every local user). A name ending in -key/-token/-secret/-password or holding secret/passw is one;
# what to use instead is named where the engine has a variable for it.
SECRET_FLAG = re.compile(r"-(key|token|secret|password|passwd)\Z|secret|passw")
# Flags that read more flags from a file the gate never sees (both engines: a YAML of options), so an
# owned flag or a credential could come back through them.
INDIRECT_FLAGS = ("--config",)
# Every engine's credential flags, refused on every engine (a key in the unit is one too many).
SECRET_FLAG_INSTEAD = {}
for _mod in _engine.ENGINES.values():
    SECRET_FLAG_INSTEAD.update(_mod.SECRET_FLAGS)
# Environment names that hold credentials: written only to the root-only environment file.
# Also every *_KEY (OPENAI_KEY, WANDB_KEY) but the few below, which name no secret.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|CREDENTIAL|PRIVATE|(?:\A|_)KEY\Z", re.I)
HARMLESS_KEY_NAMES = frozenset(("CACHE_KEY", "SORT_KEY", "PARTITION_KEY", "ROUTING_KEY", "SHARD_KEY"))
_GPU_ID = re.compile(r"([0-9]{1,4}|(GPU|MIG)-[0-9A-Fa-f-]{8,64})\Z")
_PROTECT_HOME = ("yes", "no", "read-only", "tmpfs")


def secret_name(name):
    """Whether the environment variable ``name`` holds a credential (it then goes to the environment file)."""
    return bool(SECRET_NAME.search(name)) and name.upper() not in HARMLESS_KEY_NAMES


def flag_name(engine, arg):
    """The name ``engine``'s parser reads in ``arg`` (``--api_key=x`` -> ``--api-key`` on vLLM), or None
    when ``arg`` is no flag (a value, a negative number)."""
    if not isinstance(arg, str) or not arg.startswith("-") or arg == "-" or re.match(r"-[0-9.]", arg):
        return None
    name = arg.split("=", 1)[0]
    return _fold_underscores(name) if FLAG_SPELLING[engine]["underscores"] else name


def _fold_underscores(name):
    if name is None or not name.startswith("--"):
        return name
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _is_prefix(name, flag):
    """``name`` abbreviates ``flag`` as argparse allows (a prefix with the same dashes, more than the dashes)."""
    dashes = "--" if flag.startswith("--") else "-"
    return name.startswith(dashes) and len(name) > len(dashes) and flag.startswith(name) \
        and (dashes == "--" or not name.startswith("--"))


def _owned(engine, arg):
    name = flag_name(engine, arg)
    if name is None:
        return None
    abbrev = FLAG_SPELLING[engine]["abbrev"]
    for flag in OWNED_FLAGS[engine]:
        if name == flag or name.startswith(flag + ".") or (flag == "--speculative" and name.startswith(flag)):
            return flag
        if abbrev and _is_prefix(name, flag):
            return flag
    return None


def _secret_flag(engine, arg):
    """The credential flag ``arg`` names (in any spelling, on any engine: a key in the unit is one too many)."""
    name = _fold_underscores(flag_name(engine, arg))  # whatever the engine: refused either way
    if name is None or not name.startswith("--"):
        return None
    if SECRET_FLAG.search(name):
        return name
    for flag in SECRET_FLAG_INSTEAD:
        if FLAG_SPELLING[engine]["abbrev"] and _is_prefix(name, flag):
            return flag
    return None


def _extra_args(engine, values):
    """The operator's extra engine arguments, checked; a refusal never quotes a value (it may be a secret)."""
    items = _gate.word_list("spec_server_extra_args", values, lambda field, item: item)
    args = []
    for i, item in enumerate(items):
        secret = _secret_flag(engine, item)  # refused below, before the item after it (its value) is read
        field = "spec_server_extra_args[%d]" % i
        args.append(_gate.text(field, item, secret=bool(secret)))
        flag = _owned(engine, item)
        if flag:
            where = {"--speculative": "spec_server_spec (docs/spec-methods.md)", "-sc": "spec_server_spec",
                     "--api-key": "spec_server_api_key (kept out of the unit and argv)",
                     "--load-format": "spec_server_load_format (docs/load.md)"}.get(
                         flag, "its spec_server_* variable")
            if flag in _GROUP_ONLY[engine]:
                where = ("spec_server_nodes, spec_server_rendezvous_address and spec_server_rendezvous_port: a "
                         "serving group's flags are rendered per node from one spec (docs/group.md)")
            raise _gate.GateError("spec_server_extra_args may not carry %r (item %d, which %s reads as %s; its value "
                                  "is not shown): the collection sets %s itself; use %s"
                                  % (item.split("=", 1)[0], i, engine, flag,
                                     flag + "*" if flag == "--speculative" else flag, where))
        name = flag_name(engine, item)
        if name is not None and any(name == f or (FLAG_SPELLING[engine]["abbrev"] and _is_prefix(name, f))
                                    for f in INDIRECT_FLAGS):
            raise _gate.GateError("spec_server_extra_args may not carry %r (item %d, which %s reads as --config): it "
                                  "reads engine options from a file that the gate cannot check; give them as "
                                  "spec_server_* variables or extra args" % (item.split("=", 1)[0], i, engine))
        if secret:
            raise _gate.GateError(
                "%s is %s, whose value is a credential and would be written into the unit's ExecStart= and the "
                "process's argv (value hidden); use %s" % (
                    field, secret, SECRET_FLAG_INSTEAD.get(secret, "spec_server_secret_env with the environment "
                                                                   "variable the engine reads it from")))
    return args


def _schedule_conflicts(engine, spec, extra, environment):
    """Refuse the settings with which the engine would drop the spec's schedule without a word."""
    if "schedule" not in spec:
        return
    mod = _engine.get(engine)
    for i, arg in enumerate(extra):
        flag, eq, value = arg.partition("=")
        flag = _fold_underscores(flag)  # vLLM's parser reads --data_parallel_size too
        if flag not in mod.SCHEDULE_OFF:
            continue
        if mod.SCHEDULE_OFF_UNLESS_ONE:
            value = value if eq else (extra[i + 1] if i + 1 < len(extra) else "1")
            if value.strip() in ("1", ""):
                continue
        raise _gate.GateError("spec_server_extra_args carry %r, with which %s turns the spec's schedule off (%s) "
                              "and runs a fixed k; drop one of them" % (arg, mod.RELEASE, mod.SCHEDULE_OFF[flag]))
    problem = mod.schedule_env_conflict(spec["method"], environment)
    if problem:
        raise _gate.GateError(problem)


def _env(values, field, secret=False):
    if not isinstance(values, dict):
        raise _gate.GateError("%s must be a mapping of names to values, got %s" % (field, type(values).__name__))
    out = {}
    for key, value in values.items():
        key = _gate.name("%s key" % field, key, "env_name")
        if isinstance(value, bool):
            value = "true" if value else "false"
        out[key] = _gate.text("%s.%s" % (field, key), value, allow_empty=True, secret=secret or secret_name(key))
    return out


def _gpus(values, tp, nnodes=1):
    """The GPUs of this host's engine (``tp``: its tensor-parallel ranks on this host, a group node's share)."""
    def one(field, value):
        value = _gate.text(field, value, max_len=72)
        if not _GPU_ID.match(value):
            raise _gate.GateError("%s must be a GPU index or a GPU-/MIG- UUID, got %r" % (field, value))
        return value
    gpus = _gate.word_list("spec_server_cuda_visible_devices", values, one, max_items=1024)
    if len(set(gpus)) != len(gpus):
        raise _gate.GateError("spec_server_cuda_visible_devices lists a GPU twice: %s" % gpus)
    if gpus and len(gpus) < tp and nnodes > 1:
        raise _gate.GateError("spec_server_tensor_parallel_size=%d over %d nodes needs %d GPUs on each in "
                              "spec_server_cuda_visible_devices=%s" % (tp * nnodes, nnodes, tp, gpus))
    if gpus and len(gpus) < tp:
        raise _gate.GateError("spec_server_tensor_parallel_size=%d needs at least that many GPUs in "
                              "spec_server_cuda_visible_devices=%s" % (tp, gpus))
    return gpus


def ready_url(host, port, url=""):
    """Where readiness is probed, on the host itself: ``url`` when set, else a wildcard bind through loopback."""
    return url or "http://%s:%d" % (_probe_host(host), int(port))


def _probe_host(host):
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return "[%s]" % host if ":" in host else host


def _load_format(engine, value):
    """spec_server_load_format: one of the engine's loaders, or '' for its default."""
    mod = _engine.get(engine)
    if value and value not in mod.LOAD_FORMATS:
        raise _gate.GateError("spec_server_load_format must be one of %s for %s (or empty for its default), got %r%s" % (
            ", ".join(mod.LOAD_FORMATS), engine, value,
            ": dummy loads random weights, a server that answers nonsense" if value == "dummy" else ""))
    return value


def _base_argv(s, engine, model, tp, secrets):
    mod = _engine.get(engine)
    argv = mod.serve_argv(s["executable"], model, mod.API_KEY_VAR in secrets)
    argv += ["--host", s["host"], "--port", str(s["port"])]
    argv += [mod.TP_FLAG, str(tp)]
    if s["served_model_name"]:
        argv += ["--served-model-name", s["served_model_name"]]
    if s["gpu_memory_utilization"] is not None:
        argv += [mod.MEMORY_FLAG, repr(s["gpu_memory_utilization"])]
    if s["max_model_len"] is not None:
        argv += [mod.MAX_LEN_FLAG, str(s["max_model_len"])]
    if s["load_format"]:
        argv += [mod.LOAD_FORMAT_FLAG, s["load_format"]]
    return argv


def _secrets(engine, env, secret_env, api_key):
    moved = {k: v for k, v in env.items() if secret_name(k)}
    plain = {k: v for k, v in env.items() if k not in moved}
    secrets = dict(moved, **secret_env)
    if api_key:
        secrets[_engine.get(engine).API_KEY_VAR] = api_key
    return plain, secrets


def _split_env(engine, s):
    api_key = _gate.text("spec_server_api_key", s.get("api_key") or "", max_len=1024, allow_empty=True, secret=True)
    return _secrets(engine, _env(s.get("env") or {}, "spec_server_env"),
                    _env(s.get("secret_env") or {}, "spec_server_secret_env", secret=True), api_key)


def secret_env_text(settings):
    """The environment file's text (``NAME='value'`` lines) for the secrets of ``settings``; '' if none."""
    _plain, secrets = _split_env(settings.get("engine"), settings)
    return "".join(_unit.env_file_line(k, secrets[k]) for k in sorted(secrets))


def _unset(value):
    return value is None or value == ""


def _optional(value, check):
    return None if _unset(value) else check(value)


def unit_settings(settings):
    """Check the role's variables (names without ``spec_server_``) and return what the unit writes."""
    g = _gate
    s = dict(settings)
    engine = s.get("engine")
    if not _engine.known(engine):
        raise g.GateError("spec_server_engine must be one of %s, got %r" % (", ".join(_engine.NAMES), engine))
    tp = g.integer("spec_server_tensor_parallel_size", s.get("tensor_parallel_size", 1), 1, 64)
    s["unit"] = g.name("spec_server_unit", s["unit"], "unit")
    # Unset (the role's default): the engine's own, from its adapter, so the role's defaults call no filter.
    adapter = _engine.get(engine)
    s["executable"] = g.path("spec_server_executable", adapter.EXECUTABLE if _unset(s.get("executable")) else s["executable"])
    model = g.text("spec_server_model", s.get("model"), no_dash=True)
    s["served_model_name"] = g.text("spec_server_served_model_name", s.get("served_model_name") or "",
                                    max_len=255, allow_empty=True, no_dash=True)
    s["host"] = g.name("spec_server_host", s.get("host") or "", "host")
    s["port"] = g.integer("spec_server_port", adapter.DEFAULT_PORT if _unset(s.get("port")) else s["port"], 1, 65535)
    s["load_format"] = _load_format(engine, s.get("load_format") or "")
    s["gpu_memory_utilization"] = _optional(s.get("gpu_memory_utilization"), lambda v: g.number(
        "spec_server_gpu_memory_utilization", v, 0.0, 1.0, lo_open=True))
    s["max_model_len"] = _optional(s.get("max_model_len"), lambda v: g.integer(
        "spec_server_max_model_len", v, 16, 1 << 24))
    # A node of a serving group: the same spec as every other node, its own rank (_group.py, issue 33); each
    # node runs its share of the tensor-parallel ranks on its own GPUs.
    node = _group.node(engine, s.get("nodes") or [], s.get("node") or "", s.get("rendezvous_address") or "",
                       s.get("rendezvous_port"), tp, s.get("play_hosts"))
    node_tp = tp // node["nnodes"] if node else tp
    gpus = _gpus(s.get("cuda_visible_devices") or [], node_tp, node["nnodes"] if node else 1)
    warnings = []
    spec = _spec.normalize(s.get("spec"), engine, tp, warnings=warnings)
    extra = _extra_args(engine, s.get("extra_args") or [])
    plain, secrets = _split_env(engine, s)
    _schedule_conflicts(engine, spec, extra, plain)
    schedule_dir = g.path("spec_server_schedule_dir", s.get("schedule_dir") or _spec.SCHEDULE_DIR)
    schedule = _spec.schedule_file(spec, engine, tp, schedule_dir) or {"path": "", "text": ""}
    # NVML numbers GPUs in PCI bus order, CUDA by default fastest first: make CUDA_VISIBLE_DEVICES
    # name the GPUs that gpu_reclaim and nvidia-smi call by the same index.
    # Always named, also for an empty list (the engine then takes GPUs 0..TP-1 anyway): gpu_reclaim
    # reads the unit's CUDA_VISIBLE_DEVICES to know which GPUs are the service's, even when it is stopped.
    environment = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                   "CUDA_VISIBLE_DEVICES": ",".join(gpus or [str(i) for i in range(node_tp)])}
    # The compilation caches in one directory the unit may write, shared by every unit of this user (the
    # baseline, its candidates, a rollback), so a second start of a configuration finds its compiled graphs.
    # The operator's own spec_server_env still wins for any of these names.
    # The user first: the cache directory's default is named after it, and a bad user is the cause to name.
    user = g.name("spec_server_user", s["user"], "user")
    group = g.name("spec_server_group", s["group"], "user")
    cache_dir = g.path("spec_server_cache_dir", s["cache_dir"]) if s.get("cache_dir") else ""
    if cache_dir:
        environment.update(_engine.get(engine).cache_env(cache_dir.rstrip("/") or "/"))
    environment.update(plain)

    working_dir = g.path("spec_server_working_dir", s["working_dir"])
    rw_paths = g.word_list("spec_server_read_write_paths", s.get("read_write_paths") or [], g.path)
    devices = g.word_list("spec_server_device_allow", s.get("device_allow") or [],
                          lambda f, v: g.name(f, v, "device_allow"))
    syscalls = g.word_list("spec_server_syscall_deny", s.get("syscall_deny") or [],
                           lambda f, v: g.name(f, v, "syscall"))
    protect_home = s.get("protect_home", "yes")
    protect_home = {True: "yes", False: "no"}.get(protect_home, protect_home)
    if protect_home not in _PROTECT_HOME:
        raise g.GateError("spec_server_protect_home must be one of %s, got %r" % (", ".join(_PROTECT_HOME), protect_home))
    env_file = g.path("spec_server_env_file", s["env_file"]) if secrets else ""

    argv = _base_argv(s, engine, model, tp, secrets) + (node["args"] if node else []) \
        + _spec.engine_args(spec, engine, tp, schedule_dir) + extra
    probe_url = ready_url(s["host"], s["port"], s.get("ready_url") or "")
    g.text("spec_server_ready_url", probe_url, max_len=2048)
    return {
        "engine": engine,
        "unit": s["unit"],
        "port": s["port"],
        "executable": s["executable"],
        "label": g.text("spec label", _spec.describe(spec)),
        "spec": spec,
        "spec_warnings": warnings,
        "schedule_path": schedule["path"],
        "schedule_text": schedule["text"],
        "argv": argv,
        "exec_start": _unit.exec_line(argv),
        "environment": _unit.env_line(environment),
        "secret_names": sorted(secrets),
        "env_file": env_file,
        "env_file_line": env_file.replace("%", "%%"),
        "user": user,
        "group": group,
        "working_dir_line": working_dir.replace("%", "%%"),
        "read_write_paths": [_unit.exec_line([p]) for p in [working_dir] + ([cache_dir] if cache_dir else []) + rw_paths],
        "cache_dir": cache_dir,
        "load_format": s["load_format"],
        # A loader that reads past the page cache gains nothing from a prewarm (docs/load.md).
        "load_reads_page_cache": s["load_format"] not in _engine.get(engine).DIRECT_IO_LOAD_FORMATS,
        "device_allow": ["char-nvidia* rw"] + devices,
        "syscall_filter": ("~" + " ".join(syscalls)) if syscalls else "",
        "protect_home": protect_home,
        "hardening": g.boolean("spec_server_hardening", s.get("hardening", True)),
        "start_timeout": g.integer("spec_server_start_timeout", s.get("start_timeout"), 1, 7 * 86400),
        "stop_timeout": g.integer("spec_server_stop_timeout", s.get("stop_timeout"), 1, 86400),
        "restart_sec": g.integer("spec_server_restart_sec", s.get("restart_sec"), 0, 86400),
        "start_limit_burst": g.integer("spec_server_start_limit_burst", s.get("start_limit_burst"), 1, 10000),
        "start_limit_interval": g.integer("spec_server_start_limit_interval", s.get("start_limit_interval"), 0, 7 * 86400),
        "model_name": s["served_model_name"] or model,
        # What the readiness probes ask /v1/models for (None where the engine's readiness needs no model).
        "ready_model": (s["served_model_name"] or model) if _engine.get(engine).READY_LISTS_MODEL else None,
        "api_key_var": _engine.get(engine).API_KEY_VAR,
        "description": _engine.get(engine).UNIT_DESCRIPTION,
        "docs_url": _engine.get(engine).DOCS_URL,
        "ready_url": probe_url,
        "gpus": gpus,
        "tensor_parallel_size": tp,
        "serving_group": node,
        # Only a group's head serves the API (vLLM's workers run --headless; SGLang's rank > 0 nodes run no API,
        # only a dummy health server).
        "serves_api": node is None or node["is_head"],
    }
