# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render spec_server's unit template the way Ansible's template lookup does, without a playbook.

The template reads only ``spec_server_checked`` (the output of ``_server.unit_settings``), so the
gate's tests can render thousands of values in seconds; test_spec_server_render.py runs the same
template through ansible-playbook for the cases that matter.
"""
from __future__ import annotations

import os

import jinja2

from ansible_collections.llmops.specdec.plugins.module_utils import _server

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
TEMPLATE = os.path.join(REPO, "roles", "spec_server", "templates", "spec_server.service.j2")

# The role's defaults, without the spec_server_ prefix (roles/spec_server/defaults/main.yml).
DEFAULTS = {
    "engine": "vllm", "unit": "vllm-server.service", "executable": None, "model": "/models/llama",
    "served_model_name": "", "host": "127.0.0.1", "port": None, "tensor_parallel_size": 1,
    "gpu_memory_utilization": None, "max_model_len": None, "cuda_visible_devices": [], "extra_args": [],
    "env": {}, "secret_env": {}, "api_key": "", "env_file": "/etc/llmops-specdec/secrets/vllm-server.service.env",
    "spec": {"method": "none"}, "user": "vllm", "group": "vllm", "working_dir": "/var/lib/vllm",
    "read_write_paths": [], "hardening": True, "protect_home": "yes", "device_allow": [],
    "syscall_deny": ["@clock", "@cpu-emulation", "@debug", "@module", "@mount", "@obsolete", "@raw-io", "@reboot",
                     "@swap"],
    "start_timeout": 1800, "stop_timeout": 120, "restart_sec": 30, "start_limit_burst": 10,
    "start_limit_interval": 600, "ready_url": "",
}

with open(TEMPLATE, encoding="utf-8") as _f:
    _TEMPLATE = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined,
                                   autoescape=False).from_string(_f.read())  # nosec: a unit file, not HTML


def settings(**overrides):
    out = dict(DEFAULTS)
    out.update(overrides)
    return out


def render(**overrides):
    """(unit text, checked values) for the defaults with ``overrides``; raises the gate's errors."""
    checked = _server.unit_settings(settings(**overrides))
    return _TEMPLATE.render(spec_server_checked=checked), checked


def directives(text):
    """[(section, key)] of every assignment line, in order; comments and blank lines skipped."""
    out, section = [], None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        if line.startswith("[") and line.rstrip().endswith("]"):
            section = line.strip()
            continue
        out.append((section, line.split("=", 1)[0]))
    return out


def values(text, key):
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]
