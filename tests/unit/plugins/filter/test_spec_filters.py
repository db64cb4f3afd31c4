# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The spec/systemd filters: through real Jinja2 with the plugin's FilterModule, and through a
real ansible-playbook run that loads them by FQCN from the collection."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jinja2
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.specdec.plugins.filter.spec import FilterModule
from ansible_collections.llmops.specdec.plugins.module_utils import _spec, _unit

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


@pytest.fixture(scope="module")
def env():
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.filters.update(FilterModule().filters())
    return environment


def render(env, text, **kw):
    return env.from_string(text).render(**kw)


def test_filter_names():
    assert sorted(FilterModule().filters()) == [
        "engine_facts", "server_secret_env", "server_unit", "spec_args", "spec_describe", "spec_normalize", "spec_warnings", "switch_baseline",
        "switch_prompts",
        "switch_prompts_text", "switch_settings", "systemd_env",
        "systemd_exec"]


def test_spec_args_and_exec_in_a_template(env):
    spec = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    line = render(env, "ExecStart={{ (['/opt/vllm/bin/vllm', 'serve', 'm'] + (spec | spec_args('vllm', 2))) | systemd_exec }}",
                  spec=spec)
    assert line == ('ExecStart=/opt/vllm/bin/vllm serve m --speculative-config '
                    '"{\\"method\\":\\"ngram\\",\\"num_speculative_tokens\\":5,\\"prompt_lookup_max\\":4,'
                    '\\"prompt_lookup_min\\":2}"')


def test_normalize_and_describe_chain(env):
    out = render(env, "{{ spec | spec_normalize('sglang') | spec_describe }}", spec={"method": "ngram"})
    assert out == "ngram k=11 bfs=1..10"


def test_environment_line(env):
    assert render(env, "{{ e | systemd_env }}", e={"B": "x y", "A": "90%"}) == 'A=90%% "B=x y"'


@pytest.mark.parametrize("template, value, message", [
    ("{{ v | spec_args('sglang') }}", {"method": "suffix"},
     "spec_args: sglang does not support speculative method 'suffix' (supported by: vllm)"),
    ("{{ v | spec_normalize('vllm', 4) }}", {"method": "mtp", "num_speculative_tokens": 1, "draft_tensor_parallel_size": 2},
     "spec_normalize: draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (4), got 2"),
    ("{{ v | spec_describe }}", "ngram", "spec_describe: a speculative spec must be a mapping"),
    ("{{ v | systemd_exec }}", ["vllm", "serve"], "systemd_exec: the executable must be an absolute path"),
    ("{{ v | systemd_env }}", {"9X": "1"}, "systemd_env: invalid environment variable name '9X'"),
])
def test_errors_surface_as_filter_errors(env, template, value, message):
    with pytest.raises(AnsibleFilterError) as err:
        render(env, template, v=value)
    assert message in str(err.value)


PLAYBOOK = """
- name: Render a unit's ExecStart and Environment with the collection's filters
  hosts: localhost
  gather_facts: false
  vars:
    spec: {method: eagle3, draft_model: "/srv/my models/EAGLE3 head", num_speculative_tokens: "3"}
  tasks:
    - name: Render
      ansible.builtin.set_fact:
        argv: "{{ ['/opt/vllm/bin/vllm', 'serve', 'org/model'] + (spec | llmops.specdec.spec_args('vllm', 2)) }}"
        label: "{{ spec | llmops.specdec.spec_normalize('vllm', 2) | llmops.specdec.spec_describe }}"
        environment_line: "{{ {'HOME_REF': '$HOME', 'PCT': '90%'} | llmops.specdec.systemd_env }}"
    - name: Write what was rendered
      ansible.builtin.copy:
        dest: "{{ out }}"
        mode: "0644"
        content: "{{ {'argv': argv, 'exec': argv | llmops.specdec.systemd_exec, 'label': label,
                      'env': environment_line} | to_json }}"
"""

FAILING = """
- name: A spec the engine cannot run fails while templating
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Render
      ansible.builtin.set_fact:
        argv: "{{ {'method': 'suffix'} | llmops.specdec.spec_args('sglang') }}"
    - name: Never reached
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: reached
        mode: "0644"
"""


def run_playbook(tmp_path, text):
    book = tmp_path / "play.yml"
    book.write_text(text)
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(book), "-e", "out=%s" % out,
         "-e", "ansible_python_interpreter=%s" % sys.executable],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    return proc, out


def test_playbook_renders_through_fqcn_filters(tmp_path):
    proc, out = run_playbook(tmp_path, PLAYBOOK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(out.read_text())
    spec = {"method": "eagle3", "draft_model": "/srv/my models/EAGLE3 head", "num_speculative_tokens": 3}
    assert got["argv"] == ["/opt/vllm/bin/vllm", "serve", "org/model"] + _spec.engine_args(spec, "vllm", 2)
    assert json.loads(got["argv"][-1]) == {"method": "eagle3", "model": "/srv/my models/EAGLE3 head",
                                           "num_speculative_tokens": 3}
    assert got["exec"] == _unit.exec_line(got["argv"])
    assert got["label"] == "eagle3 k=3 draft=EAGLE3 head"
    assert got["env"] == "HOME_REF=$HOME PCT=90%%"


def test_playbook_fails_before_acting_on_a_bad_spec(tmp_path):
    proc, out = run_playbook(tmp_path, FAILING)
    assert proc.returncode != 0
    assert "sglang does not support speculative method 'suffix'" in proc.stdout + proc.stderr
    assert not out.exists()


def test_the_prompts_filters_describe_the_operators_file_and_give_only_its_prompts(env, tmp_path):
    """Issue 32, item 5: what the role's key.yml and lock.yml call, through Jinja."""
    path = tmp_path / "requests.jsonl"
    path.write_text('{"model": "m", "user": "u-1", "messages": [{"role": "user", "content": "hello"}]}\n')
    out = render(env, "{{ (p | switch_prompts('auto', 'reasoning')).source }} {{ (p | switch_prompts).prompts }}", p=str(path))
    assert out == "request_log 1"
    assert render(env, "{{ p | switch_prompts_text }}", p=str(path)) == '{"category": "chat", "prompt": "user: hello"}\n'
    assert render(env, "{{ (p | switch_prompts('auto', 'coding')).synthetic }}", p="") == "True"
    with pytest.raises(AnsibleFilterError, match="spec_switch_prompts_file .* cannot be read on the controller"):
        render(env, "{{ p | switch_prompts }}", p=str(tmp_path / "missing"))


def test_switch_settings_checks_the_thresholds_at_the_same_gate(env):
    from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.test__switch import GOOD
    out = FilterModule().filters()["switch_settings"](dict(GOOD, thresholds={"min_speedup": "1.2"}))
    assert out["thresholds"]["min_speedup"] == 1.2 and out["thresholds"]["max_tpot_regression"] == 0.05  # a default kept
    assert FilterModule().filters()["switch_settings"](GOOD)["thresholds"]["min_speedup"] == 1.05  # none given: the defaults
    with pytest.raises(AnsibleFilterError, match="^switch_settings: spec_switch_thresholds: unknown threshold 'speedup'"):
        render(env, "{{ v | switch_settings }}", v=dict(GOOD, thresholds={"speedup": 2}))


IDENTITY = {"prompts_file": "", "prompts_format": "auto", "suite": "coding", "state_dir": "/var/lib/llmops-specdec",
            "host": "gpu-1", "engine": "vllm", "model": "Qwen/Qwen3 8B", "bench_api": "completions",
            "bench_concurrency": ["8", 1, 8], "bench_max_tokens": "256", "bench_warmup": 1, "bench_min_waves": 3,
            "lossless_prompts": 8, "plan": {"first_round": 12}, "bench_requests": 48}


def test_switch_baseline_names_the_baseline_and_checks_its_plan(env, tmp_path):
    out = FilterModule().filters()["switch_baseline"](IDENTITY)
    assert out["key"] == "vllm__Qwen_Qwen3_8B__coding"  # a run of other characters is one '_'
    assert out["prompts"]["synthetic"] and out["prompts_path"] == ""
    assert out["settings"] == {"host": "gpu-1", "engine": "vllm", "model": "Qwen/Qwen3 8B", "suite": "coding",
                               "api": "completions", "concurrency": [1, 8], "max_tokens": 256, "warmup": 1,
                               "min_waves": 3, "lossless_prompts": 8, "ignore_eos": True}
    # spec_switch_bench_requests wins over the plan's own baseline_requests; the rest of the plan is checked and kept.
    assert out["plan"]["baseline_requests"] == 48 and out["plan"]["first_round"] == 12 and out["plan"]["rounds"]
    # The operator's prompts: read on the controller, named by their digest, waiting on the host beside the state.
    log = tmp_path / "requests.jsonl"
    log.write_text('{"model": "m", "messages": [{"role": "user", "content": "hello"}]}\n')
    ops = FilterModule().filters()["switch_baseline"](dict(IDENTITY, prompts_file=str(log)))
    assert ops["prompts"]["suite"].startswith("ops-") and ops["key"] == "vllm__Qwen_Qwen3_8B__" + ops["prompts"]["suite"]
    assert ops["prompts_path"] == "/var/lib/llmops-specdec/prompts-%s.jsonl" % ops["prompts"]["suite"]
    with pytest.raises(AnsibleFilterError, match="^switch_baseline: spec_switch_plan: unknown plan setting 'alpah'"):
        render(env, "{{ v | switch_baseline }}", v=dict(IDENTITY, plan={"alpah": 0.1}))
    with pytest.raises(AnsibleFilterError, match="^switch_baseline: spec_switch_bench_max_tokens"):
        render(env, "{{ v | switch_baseline }}", v=dict(IDENTITY, bench_max_tokens="lots"))


@pytest.mark.parametrize("model, refused", [
    ("../../etc/cron.d/x", None),  # a path in the model's name: no '/' reaches the baseline's file name
    ("m\n[Service]", "spec_server_model contains a control or line-separator character"),
])
def test_switch_baseline_keeps_a_hostile_model_name_out_of_host_paths(env, model, refused):
    if refused:
        with pytest.raises(AnsibleFilterError, match=refused.replace("[", "\\[")):
            render(env, "{{ v | switch_baseline }}", v=dict(IDENTITY, model=model))
        return
    key = FilterModule().filters()["switch_baseline"](dict(IDENTITY, model=model))["key"]
    assert "/" not in key and key == "vllm__.._.._etc_cron.d_x__coding"
