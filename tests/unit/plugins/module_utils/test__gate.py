# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one validation gate: what the review of 2026-12-01 injected is refused, naming the field.

Each finding of issue 12 that concerns rendering is replayed here with the reviewer's own values
(shared/reference/review-2026-12-01/inj.json, inj2.json, sec.json, t_spec.py) against the real template.
"""
from __future__ import annotations

import shlex

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate, _server, _spec, _unit
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.systemd_syntax import (
    parse_environment, parse_exec,
)
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.unit_render import (
    directives, render, settings, values,
)

INJECTION = 'org/head\n[Service]\nExecStartPre=+/bin/sh -c "id > /root/pwned"'
BASE_DIRECTIVES = directives(render()[0])


def _refused(match, **overrides):
    with pytest.raises((_gate.GateError, _spec.SpecError, _unit.UnitQuoteError)) as info:
        render(**overrides)
    assert match in str(info.value), str(info.value)
    return str(info.value)


# --- inj.json: a newline in draft_model became an ExecStartPre=+ line through the header comment
@pytest.mark.parametrize("sep", ["\n", "\r", "\x00", "\x85", "\u2028", "\u2029", "\x1b", "\x7f"])
def test_control_characters_in_a_spec_string_are_refused_naming_the_field(sep):
    bad = INJECTION.replace("\n", sep)
    msg = _refused("draft_model contains a control or line-separator character",
                   spec={"method": "eagle3", "num_speculative_tokens": 3, "draft_model": bad})
    assert "U+%04X" % ord(sep) in msg


def test_draft_quantization_newline_and_flag_lookalikes_are_refused():
    _refused("draft_quantization contains a control", engine="sglang", executable="/usr/bin/python3",
             spec={"method": "eagle3", "draft_model": "x", "draft_quantization": "fp8\nExecStartPost=+/usr/bin/id"})
    _refused("draft_quantization may not start with '-'", engine="sglang", executable="/usr/bin/python3",
             spec={"method": "eagle3", "draft_model": "x", "draft_quantization": "--served-model-name"})
    _refused("draft_model may not start with '-'", engine="sglang", executable="/usr/bin/python3",
             spec={"method": "eagle3", "draft_model": "--trust-remote-code"})
    _refused("at most 1024 allowed", spec={"method": "eagle3", "num_speculative_tokens": 3,
                                           "draft_model": "/m/" + "a" * 100000})


# --- inj2.json: newlines in User=, DeviceAllow=, SystemCallFilter= became directives
@pytest.mark.parametrize("field, value, match", [
    ("user", "vllm\nExecStartPre=+/usr/bin/touch /root/x", "spec_server_user contains a control"),
    ("user", "root user", "spec_server_user must be a user/group name"),
    ("group", "0wheel;x", "spec_server_group must be a user/group name"),
    ("device_allow", ["char-infiniband_verbs rw\nExecStartPost=+/usr/bin/id"], "spec_server_device_allow[0] contains"),
    ("device_allow", ["char-infiniband_verbs rwx"], "spec_server_device_allow[0] must be a DeviceAllow= entry"),
    ("syscall_deny", ["@clock\nExecStopPost=+/usr/bin/id"], "spec_server_syscall_deny[0] contains"),
    ("syscall_deny", ["@clock ~@debug"], "spec_server_syscall_deny[0] must be a system call name"),
    ("unit", "vllm.service\n[Service]", "spec_server_unit contains"),
    ("unit", "../../etc/x.service", "spec_server_unit must be a systemd service name"),
    ("model", "/m\nExecStartPre=/bin/id", "spec_server_model contains"),
    ("served_model_name", "--trust-remote-code", "spec_server_served_model_name may not start with '-'"),
    ("host", "0.0.0.0 --api-key x", "spec_server_host must be an IP address or host name"),
    ("env", {"NOTE": "a\nb"}, "spec_server_env.NOTE contains"),
    ("env", {"BAD NAME": "x"}, "spec_server_env key must be an environment variable name"),
    ("extra_args", ["--x", "y\nExecStartPre=/bin/id"], "spec_server_extra_args[1] contains"),
    ("extra_args", "--enforce-eager", "spec_server_extra_args must be a list"),
    ("working_dir", "/var/lib/a\u2028b", "spec_server_working_dir contains"),
    ("read_write_paths", ["/srv/../etc"], "spec_server_read_write_paths[0] must be a normalised path"),
    ("protect_home", "yes\nx", "spec_server_protect_home must be one of"),
])
def test_every_rendered_role_variable_passes_the_gate(field, value, match):
    _refused(match, **{field: value})


@pytest.mark.parametrize("field, value, match", [
    ("port", 0, "spec_server_port must be between 1 and 65535"),
    ("port", 70000, "spec_server_port must be between 1 and 65535"),
    ("port", "80 --x", "spec_server_port must be an integer"),
    ("port", True, "spec_server_port must be an integer"),
    ("gpu_memory_utilization", 0, "spec_server_gpu_memory_utilization must be > 0.0"),
    ("gpu_memory_utilization", 1.5, "spec_server_gpu_memory_utilization must be > 0.0 and <= 1.0"),
    ("gpu_memory_utilization", "nan", "spec_server_gpu_memory_utilization must be a number"),
    ("max_model_len", -1, "spec_server_max_model_len must be between 16"),
    ("max_model_len", "1e9", "spec_server_max_model_len must be an integer"),
    ("tensor_parallel_size", 0, "spec_server_tensor_parallel_size must be between 1 and 64"),
    ("start_limit_burst", 0, "spec_server_start_limit_burst must be between 1"),
    ("cuda_visible_devices", ["0", "0"], "lists a GPU twice"),
    ("cuda_visible_devices", ["0,1"], "spec_server_cuda_visible_devices[0] must be a GPU index"),
])
def test_ranges_are_checked_before_the_host_is_touched(field, value, match):
    _refused(match, **{field: value})


def test_tensor_parallel_size_is_checked_against_the_gpus_given():
    _refused("spec_server_tensor_parallel_size=4 needs at least that many GPUs",
             tensor_parallel_size=4, cuda_visible_devices=[0, 1])
    text, checked = render(tensor_parallel_size=2, cuda_visible_devices=[4, "5"])
    assert parse_environment(values(text, "Environment")[0])["CUDA_VISIBLE_DEVICES"] == "4,5"
    assert checked["gpus"] == ["4", "5"]


@pytest.mark.parametrize("engine, arg", [
    ("vllm", "--speculative-config"), ("vllm", '--speculative-config={"method":"ngram"}'),
    ("vllm", "--speculative-config.method"), ("vllm", "--port"), ("vllm", "--host=0.0.0.0"), ("vllm", "-tp"),
    ("vllm", "--api-key"), ("sglang", "--speculative-algorithm"), ("sglang", "--tp-size"),
    ("sglang", "--model-path"), ("sglang", "--api-key=x"),
])
def test_extra_args_may_not_carry_the_flags_the_collection_owns(engine, arg):
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    msg = _refused("spec_server_extra_args may not carry", engine=engine, executable=exe, extra_args=[arg, "x"])
    assert "spec_server_" in msg  # says which variable to use instead


def test_extra_args_that_only_look_alike_pass():
    _text, checked = render(extra_args=["--enforce-eager", "--hosting-note", "--portable"])
    assert checked["argv"][-3:] == ["--enforce-eager", "--hosting-note", "--portable"]


# --- sec.json: HF_TOKEN and --api-key were written into the 0644 unit
def test_secrets_never_reach_the_unit_text_or_argv():
    text, checked = render(env={"HF_TOKEN": "hf_TOPSECRET", "HF_HOME": "/var/lib/vllm/hf"},
                           secret_env={"WANDB_KEY": "wb_TOPSECRET"}, api_key="sk-TOPSECRET")
    assert "TOPSECRET" not in text
    assert "TOPSECRET" not in repr(checked)
    assert checked["secret_names"] == ["HF_TOKEN", "VLLM_API_KEY", "WANDB_KEY"]
    assert values(text, "EnvironmentFile") == ["/etc/llmops-specdec/secrets/vllm-server.service.env"]
    assert parse_environment(values(text, "Environment")[0]) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                                                 "CUDA_VISIBLE_DEVICES": "0",
                                                                 "HF_HOME": "/var/lib/vllm/hf"}
    env_file = _server.secret_env_text(settings(
        env={"HF_TOKEN": "hf_TOPSECRET"}, secret_env={"WANDB_KEY": "wb_TOPSECRET"}, api_key="sk-TOPSECRET"))
    assert dict(shlex.split(line)[0].split("=", 1) for line in env_file.splitlines()) == {
        "HF_TOKEN": "hf_TOPSECRET", "VLLM_API_KEY": "sk-TOPSECRET", "WANDB_KEY": "wb_TOPSECRET"}


def test_sglang_gets_its_key_inside_the_launcher_not_on_the_command_line():
    text, checked = render(engine="sglang", executable="/usr/bin/python3", unit="sglang-server.service",
                           api_key="sk-TOPSECRET", port=30000)
    argv = parse_exec(values(text, "ExecStart")[0])
    assert "sk-TOPSECRET" not in text and "sk-TOPSECRET" not in " ".join(argv)
    assert argv[:2] == ["/usr/bin/python3", "-c"] and "SPECDEC_API_KEY" in argv[2]
    assert argv[3:5] == ["--model-path", "/models/llama"]
    assert checked["secret_names"] == ["SPECDEC_API_KEY"]
    # Without a key the plain module form stays (what gpu_reclaim and the docs show).
    assert render(engine="sglang", executable="/usr/bin/python3", port=30000)[1]["argv"][1:3] == [
        "-m", "sglang.launch_server"]


def test_a_refused_secret_is_never_quoted_in_the_message():
    for kwargs in ({"api_key": "sk-TOPSECRET\n"}, {"secret_env": {"X": "TOPSECRET\r\n"}},
                   {"env": {"HF_TOKEN": "hf_TOPSECRET\n"}}):
        msg = _refused("contains a control", **kwargs)
        assert "TOPSECRET" not in msg and "(value hidden)" in msg


@pytest.mark.parametrize("value", ["plain", "it's", 'a "q" $HOME `id` \\n', "%h %%", " lead and trail "])
def test_env_file_lines_read_back_exactly(value):
    line = _unit.env_file_line("K", value)
    assert line.endswith("\n") and line.count("\n") == 1
    assert shlex.split(line) == ["K=" + value]


def test_accepted_values_render_only_the_template_directives():
    text, checked = render(spec={"method": "eagle3", "num_speculative_tokens": 3,
                                 "draft_model": '/m/x","method":"ngram %h $HOME'},
                           served_model_name="llama %n $USER", device_allow=["char-infiniband_verbs rw", "/dev/nvme0n1 r"])
    got = directives(text)
    assert got.count(("[Service]", "DeviceAllow")) == 3
    lists = ("[Service]", "DeviceAllow")
    assert [d for d in got if d != lists] == [d for d in BASE_DIRECTIVES if d != lists]
    assert parse_exec(values(text, "ExecStart")[0]) == checked["argv"]
    assert '"model":"/m/x\\",\\"method\\":\\"ngram %h $HOME"' in checked["argv"][-1]


def test_the_gate_helpers():
    assert _gate.integer("f", " 42 ", 1, 100) == 42
    assert _gate.number("f", "0.5", 0, 1) == 0.5
    assert _gate.boolean("f", "yes") is True and _gate.boolean("f", 0) is False
    with pytest.raises(_gate.GateError, match="f must be a boolean"):
        _gate.boolean("f", "maybe")
    assert _gate.suggest("prompt_lookup_mx", _spec.PARAMS) == "prompt_lookup_max"
    assert _gate.suggest("zzz", _spec.PARAMS) is None
    assert _gate.text("f", 70) == "70"
    with pytest.raises(_gate.GateError, match="f must be text"):
        _gate.text("f", float("inf"))


# --- batch-size schedules: the file SGLang reads, and settings with which an engine drops a schedule
SGLANG = dict(engine="sglang", executable="/usr/bin/python3", unit="sglang-server.service")
SCHEDULED = {"method": "eagle3", "draft_model": "/m/e3", "schedule": "1-8:4,9-32:2,33+:0"}


def test_sglang_schedule_file_and_its_path_in_the_unit():
    text, checked = render(spec=SCHEDULED, **SGLANG)
    f = _spec.schedule_file(SCHEDULED, "sglang")
    assert (checked["schedule_path"], checked["schedule_text"]) == (f["path"], f["text"])
    argv = parse_exec(values(text, "ExecStart")[0])
    assert argv[argv.index("--speculative-adaptive-config") + 1] == f["path"]
    moved = render(spec=SCHEDULED, schedule_dir="/srv/my schedules", **SGLANG)[1]
    assert moved["schedule_path"].startswith("/srv/my schedules/sglang-adaptive-")
    assert moved["schedule_path"] in moved["argv"]
    # vLLM carries it in --speculative-config: no file.
    assert render(spec={"method": "ngram", "schedule": "1+:3"})[1]["schedule_path"] == ""
    assert render()[1]["spec_warnings"] == []


@pytest.mark.parametrize("value", ["relative/dir", "/etc/x/../y", "/etc/$HOME", "/etc/a\nb"])
def test_schedule_dir_is_a_clean_absolute_path(value):
    _refused("spec_server_schedule_dir", spec=SCHEDULED, schedule_dir=value, **SGLANG)


@pytest.mark.parametrize("engine, extra", [
    ("vllm", ["--data-parallel-size", "2"]), ("vllm", ["--data-parallel-size=4"]), ("vllm", ["--data_parallel_size", "2"]),
    ("vllm", ["-dp", "2"]), ("sglang", ["--enable-dp-attention"]), ("sglang", ["--enable-two-batch-overlap"]),
    ("sglang", ["--enable-pdmux"]), ("sglang", ["--enable-multi-layer-eagle"]),
])
def test_extra_args_that_turn_a_schedule_off_are_refused(engine, extra):
    spec = SCHEDULED if engine == "sglang" else {"method": "ngram", "schedule": "1-8:4,9+:1"}
    kw = SGLANG if engine == "sglang" else {}
    msg = _refused("turns the spec's schedule off", spec=spec, extra_args=extra, **kw)
    assert "spec_server_extra_args carry %r" % extra[0] in msg
    render(extra_args=extra, **kw)  # without a schedule they are the operator's business


def test_data_parallel_of_one_keeps_the_schedule():
    assert render(spec={"method": "ngram", "schedule": "1-8:4,9+:1"}, extra_args=["--data-parallel-size", "1"])[0]


@pytest.mark.parametrize("method, extra", [("ngram_gpu", {}), ("dspark", {"draft_model": "/m/dspark"})])
def test_model_runner_v1_with_a_v2_only_schedule_is_refused(method, extra):
    spec = dict({"method": method, "schedule": "1-8:4,9+:1"}, **extra)
    _refused("spec_server_env sets VLLM_USE_V2_MODEL_RUNNER=0", spec=spec, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert render(spec=spec, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})[0]
    assert render(spec={"method": "ngram", "schedule": "1-8:4,9+:1"}, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})[0]


def test_spec_warnings_reach_the_checked_values():
    checked = render(spec={"method": "qwen3_next_mtp", "num_speculative_tokens": 1})[1]
    assert checked["spec"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert len(checked["spec_warnings"]) == 1 and "'qwen3_next_mtp' is deprecated" in checked["spec_warnings"][0]


@pytest.mark.parametrize("field, value", [("uno_lora_path", INJECTION), ("uno_lora_path", "--trust-remote-code")])
def test_new_string_parameters_pass_the_gate(field, value):
    _refused(field, spec={"method": "uno", "num_speculative_tokens": 3, field: value}, **SGLANG)


def test_schedule_text_never_reaches_the_unit_unquoted():
    # Only integers and fixed words reach the argv and the file; hostile text is refused while parsing.
    _refused("schedule[0]", spec={"method": "ngram", "schedule": "1-8:4\nExecStartPre=/bin/sh"})
    _refused("schedule[0].batch", spec={"method": "ngram", "schedule": [{"batch": "1-8\n[Service]", "k": 1}]})


# --- issue 31: what still got through
@pytest.mark.parametrize("engine, arg, flag", [
    ("vllm", "--api_key=sk-TOPSECRET", "--api-key"),           # vLLM folds '_' into '-' in a flag's name
    ("vllm", "--gpu_memory_utilization=0.99", "--gpu-memory-utilization"),
    ("vllm", "--tensor_parallel_size", "--tensor-parallel-size"),
    ("vllm", "--speculative_config.method=ngram", "--speculative"),
    ("vllm", "--api-k=sk-TOPSECRET", "--api-key"),             # argparse's allow_abbrev: a unique prefix
    ("vllm", "--gpu-memory-util=0.5", "--gpu-memory-utilization"),
    ("vllm", "--served-model=x", "--served-model-name"),
    ("vllm", "-t", "-tp"),
    ("vllm", "-tp=2", "-tp"),
    ("vllm", "-sc", "-sc"),                                   # vLLM's short alias of --speculative-config
    ("vllm", "--device-memory-utilization=0.99", "--device-memory-utilization"),  # an alias of the share
    ("sglang", "--mem-fraction=0.5", "--mem-fraction-static"),
    ("sglang", "--context-len=4096", "--context-length"),
    ("sglang", "--served-model=x", "--served-model-name"),
])
def test_every_spelling_the_engine_reads_as_an_owned_flag_is_refused(engine, arg, flag):
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    msg = _refused("spec_server_extra_args may not carry", engine=engine, executable=exe, extra_args=[arg, "1"])
    assert "reads as %s" % flag in msg
    assert "TOPSECRET" not in msg


@pytest.mark.parametrize("engine, arg", [("vllm", "--api_key=x"), ("vllm", "--gpu_memory_utilization")])
def test_flag_names_are_read_as_the_engine_reads_them(engine, arg):
    assert _server.flag_name(engine, arg) == arg.split("=")[0].replace("_", "-")
    # SGLang's plain argparse keeps underscores: --tp_size is no flag of its own (SGLang refuses it).
    assert _server.flag_name("sglang", "--tp_size=2") == "--tp_size"
    assert _server.flag_name("vllm", "-1") is None and _server.flag_name("vllm", "value") is None


@pytest.mark.parametrize("engine, extra, instead", [
    ("vllm", ["--hf-token", "hf_TOPSECRET"], "spec_server_secret_env: {HF_TOKEN"),
    ("vllm", ["--hf_token=hf_TOPSECRET"], "spec_server_secret_env: {HF_TOKEN"),
    ("vllm", ["--hf-tok=hf_TOPSECRET"], "spec_server_secret_env: {HF_TOKEN"),
    ("sglang", ["--hf-token", "hf_TOPSECRET"], "spec_server_secret_env: {HF_TOKEN"),
    ("sglang", ["--api_key=sk-TOPSECRET"], "spec_server_api_key"),
    ("vllm", ["--wandb-api-key", "TOPSECRET"], "spec_server_secret_env"),
    ("vllm", ["--db-password=TOPSECRET"], "spec_server_secret_env"),
    ("sglang", ["--admin-api-key", "TOPSECRET"], "no admin key"),
    ("sglang", ["--ad=TOPSECRET"], "no admin key"),  # SGLang's parser resolves --ad to --admin-api-key
])
def test_a_flag_whose_value_is_a_credential_never_reaches_exec_start(engine, extra, instead):
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    with pytest.raises(_gate.GateError) as info:
        render(engine=engine, executable=exe, extra_args=["--enforce-eager"] + extra)
    msg = str(info.value)
    assert instead in msg and "spec_server_extra_args[1]" in msg, msg
    assert "TOPSECRET" not in msg


def test_flags_that_only_look_like_credentials_pass():
    _text, checked = render(extra_args=["--allow-credentials", "--ssl-keyfile", "/etc/ssl/k.pem", "--tokenizer", "t",
                                        "--return-tokens-as-token-ids", "--max-num-batched-tokens", "8192"])
    assert "--allow-credentials" in checked["argv"] and "--ssl-keyfile" in checked["argv"]


def test_a_credential_flag_with_a_control_character_is_refused_without_its_value():
    msg = _refused("whose value is a credential", extra_args=["--hf-token", "hf_TOPSECRET\n"])
    assert "TOPSECRET" not in msg
    msg = _refused("contains a control", extra_args=["--api-key=sk-TOPSECRET\n"])
    assert "TOPSECRET" not in msg


@pytest.mark.parametrize("arg", ["--api-key=sk-TOPSECRET", "--api-key", "--api_key=sk-TOPSECRET"])
def test_the_refusal_of_an_api_key_in_extra_args_never_quotes_it(arg):
    msg = _refused("spec_server_extra_args may not carry", extra_args=[arg, "sk-TOPSECRET"])
    assert "TOPSECRET" not in msg and "spec_server_api_key" in msg


@pytest.mark.parametrize("name", ["OPENAI_KEY", "WANDB_KEY", "ANTHROPIC_KEY", "KEY", "openai_key", "HF_TOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "MY_API_KEY", "DB_PASSWORD"])
def test_key_like_environment_names_go_to_the_environment_file(name):
    text, checked = render(env={name: "TOPSECRET", "HF_HOME": "/var/lib/vllm/hf"})
    assert "TOPSECRET" not in text and name in checked["secret_names"]
    msg = _refused("contains a control", env={name: "TOPSECRET\n"})
    assert "TOPSECRET" not in msg


@pytest.mark.parametrize("name", ["CACHE_KEY", "SORT_KEY", "HF_HOME", "KEYBOARD", "MONKEY_PATCH"])
def test_known_harmless_names_stay_in_the_unit(name):
    text, checked = render(env={name: "plain"})
    assert name not in checked["secret_names"]
    assert _server.secret_name(name) is False


# --- issue 31 item 10: values that reached the engine unchecked
@pytest.mark.parametrize("engine, value", [
    ("vllm", "fp8 --enable-lora"), ("sglang", "fp8 --enable-lora"), ("vllm", "FP8x"), ("vllm", "w8a8_int8"),
    ("sglang", "auto_gptq"), ("vllm", "fp8;id"),
])
def test_draft_quantization_must_be_a_name_of_the_engines_list(engine, value):
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    spec = {"method": "draft_model", "draft_model": "org/draft", "num_speculative_tokens": 3,
            "draft_quantization": value}
    msg = _refused("draft_quantization must be one of %s's quantization methods" % engine, engine=engine,
                   executable=exe, spec=spec)
    assert repr(value) in msg


@pytest.mark.parametrize("engine, value", [("vllm", "fp8"), ("vllm", "compressed-tensors"), ("sglang", "fp8"),
                                           ("sglang", "w8a8_int8"), ("vllm", " fp8 ")])
def test_the_engines_quantization_names_pass(engine, value):
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    _text, checked = render(engine=engine, executable=exe, spec={
        "method": "draft_model", "draft_model": "org/draft", "num_speculative_tokens": 3, "draft_quantization": value})
    assert checked["spec"]["draft_quantization"] == value.strip()


@pytest.mark.parametrize("field, value", [
    ("num_speculative_tokens", "5\n"), ("num_speculative_tokens", "\t5"), ("num_speculative_tokens", "5\r\n"),
    ("prompt_lookup_max", "4\x0b"),
])
def test_integers_with_control_characters_are_refused_not_coerced(field, value):
    spec = {"method": "ngram", field: value}
    _refused("%s must be an integer" % field, spec=spec)


def test_numbers_in_role_variables_with_control_characters_are_refused():
    _refused("spec_server_port must be an integer", port="8000\n")
    _refused("spec_server_gpu_memory_utilization must be a number", gpu_memory_utilization="0.9\n")
    assert render(port=" 8000 ")[1]["argv"][5:7] == ["--port", "8000"]  # plain spaces, as -e k=' 8000 ' gives


@pytest.mark.parametrize("field, value", [
    ("draft_model", "../../etc/shadow"), ("draft_model", "/models/../etc/shadow"), ("draft_model", "models/../x"),
    ("draft_model", "https://evil.example/head"), ("draft_model", "hf://org/head"), ("draft_model", "s3://b/k"),
    ("draft_model", "org/name/extra"), ("draft_model", "org name"), ("draft_model", "~/models/head"),
    ("draft_model", "./head"), ("draft_model", "org--x/y"), ("uno_lora_path", "../lora"),
    ("uno_lora_path", "http://x/lora"),
])
def test_model_references_are_a_hub_id_or_an_absolute_path(field, value):
    if field == "uno_lora_path":
        engine, exe = "sglang", "/usr/bin/python3"
        spec = {"method": "uno", "uno_lora_path": value, "num_speculative_tokens": 3}
    else:
        engine, exe = "vllm", "/usr/local/bin/vllm"
        spec = {"method": "eagle3", "draft_model": value, "num_speculative_tokens": 3}
    msg = _refused("%s must be a model hub id (org/name) or an absolute path without '..'" % field,
                   engine=engine, executable=exe, spec=spec)
    assert field in msg


@pytest.mark.parametrize("value", ["org/head", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "gpt2", "/models/eagle3-8b",
                                   "/srv/models/eagle3-8b/", "/m/with space", "Org_1/x.y-z"])
def test_hub_ids_and_absolute_paths_pass(value):
    _text, checked = render(spec={"method": "eagle3", "draft_model": value, "num_speculative_tokens": 3})
    assert checked["spec"]["draft_model"] == value


@pytest.mark.parametrize("engine, arg", [("vllm", "--config"), ("vllm", "--config=/etc/x.yaml"), ("vllm", "--conf"),
                                         ("sglang", "--config")])
def test_a_config_file_of_engine_options_is_refused(engine, arg):
    # issue 31, item 4: a YAML given with --config could set any owned flag or a key again, out of the gate's sight
    exe = "/usr/local/bin/vllm" if engine == "vllm" else "/usr/bin/python3"
    _refused("reads engine options from a file that the gate cannot check", engine=engine, executable=exe,
             extra_args=[arg, "/etc/opts.yaml"])


@pytest.mark.parametrize("engine, exe", [("vllm", "/usr/local/bin/vllm"), ("sglang", "/usr/bin/python3")])
def test_the_load_format_is_rendered_once_and_checked(engine, exe):
    # issue 34: spec_server_load_format, one of the engine's loaders; the flag itself is the collection's
    _text, checked = render(engine=engine, executable=exe, load_format="runai_streamer")
    assert checked["argv"].count("--load-format") == 1
    assert checked["argv"][checked["argv"].index("--load-format") + 1] == "runai_streamer"
    assert checked["load_format"] == "runai_streamer" and not checked["load_reads_page_cache"]
    _text, plain = render(engine=engine, executable=exe)
    assert "--load-format" not in plain["argv"] and plain["load_reads_page_cache"]
    assert _refused("dummy loads random weights", engine=engine, executable=exe, load_format="dummy")
    assert _refused("spec_server_load_format must be one of", engine=engine, executable=exe, load_format="magic")
    msg = _refused("use spec_server_load_format", engine=engine, executable=exe, extra_args=["--load-format=pt"])
    assert "reads as --load-format" in msg


def test_a_hostile_user_is_named_before_the_cache_directory_made_from_it():
    # molecule/faults hostile.yml h_user: the role's cache_dir default carries the user's name
    bad = "vllm\nExecStartPre=+/usr/bin/touch /root/x"
    msg = _refused("spec_server_user contains a control", user=bad, cache_dir="/var/cache/llmops-specdec/" + bad)
    assert "cache_dir" not in msg


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_unset_port_and_executable_are_the_engines_own(engine):
    """The role's defaults leave them null (no filter call at every role start): the gate takes its adapter's."""
    adapter = _engine.get(engine)
    _text, checked = render(engine=engine, unit="%s-server.service" % engine)
    assert checked["port"] == adapter.DEFAULT_PORT and checked["executable"] == adapter.EXECUTABLE
    assert checked["argv"][checked["argv"].index("--port") + 1] == str(adapter.DEFAULT_PORT)
    assert checked["ready_url"].startswith("http://127.0.0.1:%d" % adapter.DEFAULT_PORT)
    # Set, they win, and an empty string is unset as null is.
    _text, checked = render(engine=engine, unit="%s-server.service" % engine, port="8123", executable="")
    assert checked["port"] == 8123 and checked["executable"] == adapter.EXECUTABLE
