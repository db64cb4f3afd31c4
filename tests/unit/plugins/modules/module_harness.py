# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's main() in-process: exit_json/fail_json raise, so a test reads the result dict."""
from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def patch_exits(monkeypatch):
    def exit_json(self, **kwargs):
        # What Ansible would mask in the output: a test can check a secret is registered no_log.
        kwargs["_no_log_values"] = set(self.no_log_values)
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module(main, args, outcome=ExitJson):
    """Call ``main`` with ``args``; return the dict it exited or failed with (``outcome``)."""
    with pytest.raises(outcome) as exc:
        with patch_module_args(args):
            main()
    return exc.value.args[0]
