# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_server's render entry point, run by ansible-playbook on the controller (no host touched).

Every engine x method renders a unit that systemd-analyze accepts without a word, whose ExecStart
reads back (systemd's own rules, tests/.../systemd_syntax.py) as exactly the argv the role computed:
engine flags, then spec_args, then the extra args. The mock host checks the same against a running
systemd in molecule/server; this tier catches a broken template in seconds.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _engine
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.systemd_syntax import (
    parse_environment, parse_exec,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
HAZARDS = ["--note", "%h $HOME 'single' \"double\" back\\slash ; semi", '{"json": "a \\"b\\" $c %d"}']

CASES = [
    ("vllm-none", "vllm", {"method": "none"}, 1, []),
    ("vllm-ngram", "vllm", {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}, 2, [0, 1]),
    ("vllm-eagle3", "vllm", {"method": "eagle3", "draft_model": "/models/EAGLE3 head", "num_speculative_tokens": 3},
     1, [3]),
    ("sglang-ngram", "sglang", {"method": "ngram", "num_speculative_tokens": 9}, 2, [2, 3]),
    ("sglang-eagle3", "sglang", {"method": "eagle3", "draft_model": "/models/EAGLE3 head", "eagle_steps": 3,
                                 "eagle_topk": 4, "num_draft_tokens": 8}, 4, [4, 5, 6, 7]),
    ("sglang-mtp", "sglang", {"method": "mtp"}, 8, []),
    ("vllm-ngram-schedule", "vllm", {"method": "ngram", "schedule": "1-8:4,9-32:2,33+:0"}, 1, []),
    ("sglang-eagle3-schedule", "sglang", {"method": "eagle3", "draft_model": "/models/EAGLE3 head",
                                          "schedule": [{"batch": [1, 8], "k": 4}, {"batch": [9, 64], "k": 1}]}, 1, []),
    ("vllm-deepseek-mtp", "vllm", {"method": "deepseek_mtp", "num_speculative_tokens": 1}, 1, []),
    ("sglang-dflash", "sglang", {"method": "dflash", "draft_model": "/models/dflash", "num_speculative_tokens": 15}, 1, []),
]

# name, tp, gpus, working dir, spec -> words the refusal must contain
BAD_CASES = [
    ("few-gpus", 2, [0], "/var/lib/x", {"method": "none"}),
    ("quote-in-dir", 1, [], "/var/lib/it's", {"method": "none"}),
    ("relative-dir", 1, [], "var/lib/x", {"method": "none"}),
    ("backslash-in-dir", 1, [], "/var/lib/a\\b", {"method": "none"}),
    ("dollar-in-dir", 1, [], "/var/lib/$HOME", {"method": "none"}),
    ("newline-in-dir", 1, [], "/var/lib/a\nb", {"method": "none"}),
    ("missing-draft", 1, [], "/var/lib/x", {"method": "eagle3", "num_speculative_tokens": 3}),
    ("sglang-ngram-window", 1, [], "/var/lib/x",
     {"method": "ngram", "num_speculative_tokens": 7, "ngram_max_bfs_breadth": 10}),
    ("sglang-schedule-on-ngram", 1, [], "/var/lib/x", {"method": "ngram", "schedule": "1-8:4,9+:1"}),
    ("vllm-schedule-gap", 1, [], "/var/lib/x", {"method": "ngram", "schedule": "1-8:4,10+:1"}),
]
REFUSALS = {
    "few-gpus": "spec_server_tensor_parallel_size=2 needs at least that many GPUs",
    "quote-in-dir": "spec_server_working_dir must be an absolute path without quotes",
    "relative-dir": "spec_server_working_dir must be an absolute path",
    "backslash-in-dir": "spec_server_working_dir must be an absolute path without quotes, backslashes",
    "dollar-in-dir": "spec_server_working_dir must be an absolute path without quotes, backslashes, '$'",
    "newline-in-dir": "spec_server_working_dir contains a control or line-separator character (U+000A",
    "missing-draft": "eagle3 on vllm requires draft_model",
    "sglang-ngram-window": "must be <= num_speculative_tokens + 1",
    "sglang-schedule-on-ngram": "schedule is not possible for ngram on sglang",
    "vllm-schedule-gap": "schedule has a gap: 1-8 then 10+",
}

RENDER_ONE = """\
- name: Render the case
  ansible.builtin.include_role:
    name: llmops.specdec.spec_server
    tasks_from: render
  vars:
    spec_server_engine: "{{ case.engine }}"
    spec_server_executable: /usr/bin/python3
    spec_server_model: /models/Target Model 8B
    spec_server_served_model_name: "served %n $USER"
    spec_server_spec: "{{ case.spec }}"
    spec_server_tensor_parallel_size: "{{ case.tp }}"
    spec_server_cuda_visible_devices: "{{ case.gpus }}"
    spec_server_extra_args: "{{ hazards }}"
    spec_server_env: {HF_HOME: "/var/lib/srv %i/hf", NOTE: "a$b \\"c\\""}
    spec_server_working_dir: /var/lib/srv-fx07 %i dir
    spec_server_cache_dir: /var/cache/srv %i
    spec_server_hardening: "{{ case.hardening }}"

- name: Keep the unit and what the role computed
  ansible.builtin.set_fact:
    results: >-
      {{ results | default({}) | combine({case.name: {
           'unit': spec_server_unit_text, 'argv': spec_server_argv,
           'spec_args': case.spec | llmops.specdec.spec_args(case.engine, case.tp),
           'schedule_path': spec_server_checked.schedule_path, 'schedule_text': spec_server_checked.schedule_text,
           'warnings': spec_server_checked.spec_warnings,
           'spec_warnings': case.spec | llmops.specdec.spec_warnings(case.engine, case.tp),
           'describe': case.spec | llmops.specdec.spec_normalize(case.engine, case.tp) | llmops.specdec.spec_describe}}) }}
"""

RENDER_BAD = """\
- name: Render a case the role must refuse
  block:
    - name: Render it
      ansible.builtin.include_role:
        name: llmops.specdec.spec_server
        tasks_from: render
      vars:
        spec_server_model: /m
        spec_server_engine: "{{ 'sglang' if bad.name.startswith('sglang') else 'vllm' }}"
        spec_server_tensor_parallel_size: "{{ bad.tp }}"
        spec_server_cuda_visible_devices: "{{ bad.gpus }}"
        spec_server_working_dir: "{{ bad.dir }}"
        spec_server_spec: "{{ bad.spec }}"

    - name: Record that it rendered
      ansible.builtin.set_fact:
        refusals: "{{ refusals | default({}) | combine({bad.name: 'RENDERED'}) }}"
  rescue:
    - name: Record why it was refused
      ansible.builtin.set_fact:
        refusals: "{{ refusals | default({}) | combine({bad.name: ansible_failed_result.msg | default('?')}) }}"
"""

PLAYBOOK = """\
- name: Render spec_server units on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Render every case
      ansible.builtin.include_tasks: render_one.yml
      loop: "{{ cases }}"
      loop_control:
        loop_var: case
        label: "{{ case.name }}"

    - name: Refuse what cannot be rendered safely
      ansible.builtin.include_tasks: render_bad.yml
      loop: "{{ bad_cases }}"
      loop_control:
        loop_var: bad
        label: "{{ bad.name }}"

    - name: Write everything for the tests
      ansible.builtin.copy:
        content: "{{ {'results': results, 'refusals': refusals} | to_json }}"
        dest: "{{ out }}/rendered.json"
        mode: "0644"
"""


def _run_playbook(out, extra):
    with open(os.path.join(out, "render_one.yml"), "w") as f:
        f.write(RENDER_ONE)
    with open(os.path.join(out, "render_bad.yml"), "w") as f:
        f.write(RENDER_BAD)
    with open(os.path.join(out, "play.yml"), "w") as f:
        f.write(PLAYBOOK)
    with open(os.path.join(out, "vars.json"), "w") as f:
        json.dump(dict(extra, out=out, hazards=HAZARDS), f)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
         "-e", "@" + os.path.join(out, "vars.json"), os.path.join(out, "play.yml")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("spec_server_render"))
    cases = [{"name": n, "engine": e, "spec": s, "tp": tp, "gpus": g, "hardening": True} for n, e, s, tp, g in CASES]
    cases.append({"name": "vllm-plain", "engine": "vllm", "spec": {"method": "none"}, "tp": 1, "gpus": [],
                  "hardening": False})
    _run_playbook(out, {"cases": cases, "bad_cases": [dict(zip(("name", "tp", "gpus", "dir", "spec"), b))
                                                      for b in BAD_CASES]})
    with open(os.path.join(out, "rendered.json")) as f:
        data = json.load(f)
    for name, res in data["results"].items():  # systemd-analyze reads files
        with open(os.path.join(out, name + ".service"), "w") as f:
            f.write(res["unit"])
    return out, data


def _load(rendered, name):
    res = rendered[1]["results"][name]
    return res["unit"], res


def _values(text, key):
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


@pytest.mark.parametrize("name, engine, spec, tp, gpus", CASES, ids=[c[0] for c in CASES])
def test_exec_start_reads_back_as_engine_flags_then_spec_then_extra(rendered, name, engine, spec, tp, gpus):
    text, computed = _load(rendered, name)
    [exec_start] = _values(text, "ExecStart")
    argv = parse_exec(exec_start)
    assert argv == computed["argv"]
    n_spec = len(computed["spec_args"])
    assert argv[len(argv) - len(HAZARDS):] == HAZARDS
    assert argv[len(argv) - len(HAZARDS) - n_spec:len(argv) - len(HAZARDS)] == computed["spec_args"]
    if engine == "vllm":
        assert argv[:3] == ["/usr/bin/python3", "serve", "/models/Target Model 8B"]
        assert argv[argv.index("--tensor-parallel-size") + 1] == str(tp)
    else:
        assert argv[:5] == ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/Target Model 8B"]
        assert argv[argv.index("--tp-size") + 1] == str(tp)
    assert argv[argv.index("--served-model-name") + 1] == "served %n $USER"
    assert (n_spec == 0) == (spec["method"] == "none")


@pytest.mark.parametrize("name, engine, spec, tp, gpus", CASES, ids=[c[0] for c in CASES])
def test_header_environment_and_paths(rendered, name, engine, spec, tp, gpus):
    text, computed = _load(rendered, name)
    assert text.startswith("# Managed by llmops.specdec")
    assert "speculative decoding: %s\n" % computed["describe"] in text
    [env_line] = _values(text, "Environment")
    env = parse_environment(env_line)
    want = {"HF_HOME": "/var/lib/srv %i/hf", "NOTE": 'a$b "c"', "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    # Always named: without a GPU list the engine takes 0..TP-1, and gpu_reclaim reads the unit's list.
    want["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus or range(tp))
    # The compilation caches in spec_server_cache_dir, through the engine's own variables (docs/load.md).
    want.update(_engine.get(engine).cache_env("/var/cache/srv %i"))
    assert env == want
    assert _values(text, "WorkingDirectory") == ["/var/lib/srv-fx07 %%i dir"]  # the rest of the line, % doubled
    assert _values(text, "ReadWritePaths") == ['"/var/lib/srv-fx07 %%i dir"', '"/var/cache/srv %%i"']
    assert _values(text, "Restart") == ["always"]
    assert _values(text, "KillMode") == ["control-group"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)")
@pytest.mark.parametrize("name", [c[0] for c in CASES] + ["vllm-plain"])
def test_systemd_analyze_verify_says_nothing(rendered, name):
    out = rendered[0]
    # rc=0 can hide warnings (unknown keys, bad values): they go to stderr, so require silence.
    proc = subprocess.run(["systemd-analyze", "verify", os.path.join(out, name + ".service")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)")
def test_sandbox_lowers_the_exposure(rendered):
    out = rendered[0]

    def exposure(name):
        proc = subprocess.run(["systemd-analyze", "security", "--offline=true", os.path.join(out, name + ".service")],
                              capture_output=True, text=True, timeout=60, check=False)
        return float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout).group(1))

    hardened, plain = exposure("vllm-ngram"), exposure("vllm-plain")
    assert hardened <= 2.0, hardened  # docs/hardening.md: 1.7
    assert plain >= 9.0, plain  # 9.2 without the sandbox


def test_plain_unit_has_no_sandbox(rendered):
    text = _load(rendered, "vllm-plain")[0]
    for key in ("ProtectSystem", "DevicePolicy", "SystemCallFilter", "NoNewPrivileges"):
        assert _values(text, key) == []
    assert _values(text, "Restart") == ["always"]


@pytest.mark.parametrize("name", [b[0] for b in BAD_CASES])
def test_render_refuses_before_touching_anything(rendered, name):
    assert REFUSALS[name] in rendered[1]["refusals"][name]


def test_schedule_renders_in_the_argv_or_as_a_file(rendered):
    _text, vllm = _load(rendered, "vllm-ngram-schedule")
    assert (vllm["schedule_path"], vllm["schedule_text"]) == ("", "")
    cfg = json.loads(vllm["argv"][vllm["argv"].index("--speculative-config") + 1])
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 8, 4], [9, 32, 2], [33, 1 << 20, 0]]
    text, sglang = _load(rendered, "sglang-eagle3-schedule")
    argv = sglang["argv"]
    assert argv[argv.index("--speculative-adaptive-config") + 1] == sglang["schedule_path"]
    assert sglang["schedule_path"].startswith("/etc/llmops-specdec/schedules/sglang-adaptive-")
    assert json.loads(sglang["schedule_text"]) == {"1": {"candidate_steps": [4]}, "9": {"candidate_steps": [1]}}
    assert "schedule=1-8:4,9+:1" in text
    # The closed last band is said, by the role's checked values and by the filter alike.
    assert sglang["warnings"] == sglang["spec_warnings"] and "covers every larger batch" in sglang["warnings"][0]


def test_deprecated_mtp_name_runs_as_mtp_and_is_reported(rendered):
    text, res = _load(rendered, "vllm-deepseek-mtp")
    assert json.loads(res["argv"][res["argv"].index("--speculative-config") + 1]) == {
        "method": "mtp", "num_speculative_tokens": 1}
    assert "speculative decoding: mtp k=1\n" in text
    assert len(res["warnings"]) == 1 and "'deepseek_mtp' is deprecated" in res["warnings"][0]
    assert res["spec_warnings"] == res["warnings"]


def test_install_hands_the_checked_schedule_and_secrets_to_the_one_install_call():
    # What the call does with them (root-owned, modes, the order: the files the unit reads first) is
    # tested on real files in tests/unit/plugins/module_utils/test__install.py.
    import yaml
    with open(os.path.join(REPO, "roles", "spec_server", "tasks", "install.yml")) as f:
        tasks = yaml.safe_load(f)
    [install] = [t["llmops.specdec.spec_unit"]["install"] for t in tasks if "llmops.specdec.spec_unit" in t]
    assert install["schedule_path"] == "{{ spec_server_checked.schedule_path | default(omit, true) }}"
    assert install["schedule_text"] == "{{ spec_server_checked.schedule_text }}"
    assert install["env_file"] == "{{ spec_server_env_file }}" and "server_secret_env" in install["env_text"]
    assert install["text"] == "{{ spec_server_unit_text }}"
