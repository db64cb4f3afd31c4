# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd quoting: what _unit writes, read back by a reference reader of systemd's documented rules."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils._unit import (
    UnitQuoteError, env_line, exec_line, quote_word)

from systemd_syntax import SyntaxProblem, parse_environment, parse_exec, split_words

VLLM = "/opt/vllm/bin/vllm"
ARGVS = {
    "plain": [VLLM, "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"],
    "json with quotes": [VLLM, "serve", "m", "--speculative-config",
                         json.dumps({"method": "ngram", "num_speculative_tokens": 5}, separators=(",", ":"))],
    "json with spaces": [VLLM, "--speculative-config", json.dumps({"model": "/srv/my models/eagle head"})],
    "space in path": ["/opt/my engines/bin/python3", "-m", "sglang.launch_server"],
    "percent": [VLLM, "--served-model-name", "100%", "%n", "%%"],
    "dollar": [VLLM, "--download-dir", "$HOME/models", "${CACHE}", "$$", "cost$"],
    "backslashes": [VLLM, "C:\\models\\x", "\\", "\\\\", 'a\\"b', "end\\"],
    "empty string": [VLLM, "", "--flag", ""],
    "unicode": [VLLM, "--served-model-name", "modèle-日本語", "naïve space é"],
    "single quotes": [VLLM, "it's", "'quoted'"],
    "semicolons": [VLLM, ";", "a;b", "\\;", ";;"],
    "controls": [VLLM, "line1\nline2", "tab\there", "bell\a", "esc\x1b[0m", "cr\r"],
    "whitespace only": [VLLM, " ", "\t", "  two  "],
}


@pytest.mark.parametrize("argv", list(ARGVS.values()), ids=list(ARGVS))
def test_exec_line_round_trips(argv):
    line = exec_line(argv)
    assert "\n" not in line
    assert parse_exec(line) == argv


def test_plain_words_stay_unquoted():
    assert exec_line(ARGVS["plain"]) == "/opt/vllm/bin/vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000"


def test_json_is_quoted_and_escaped():
    line = exec_line([VLLM, '{"method":"ngram"}'])
    assert line == '/opt/vllm/bin/vllm "{\\"method\\":\\"ngram\\"}"'


def test_specifiers_and_dollars_are_doubled():
    assert exec_line([VLLM, "50%", "$HOME"]) == "/opt/vllm/bin/vllm 50%% $$HOME"


def test_empty_argument_is_kept_as_empty_quotes():
    assert exec_line([VLLM, ""]) == '/opt/vllm/bin/vllm ""'


def test_lone_semicolon_is_quoted():
    assert exec_line([VLLM, ";"]) == '/opt/vllm/bin/vllm ";"'


def test_reference_reader_catches_unquoted_hazards():
    # The reader must be able to fail, or the round trips above prove nothing.
    with pytest.raises(SyntaxProblem):
        parse_exec("/bin/x 50%")
    with pytest.raises(SyntaxProblem):
        parse_exec("/bin/x $HOME")
    with pytest.raises(SyntaxProblem):
        parse_exec("/bin/x ; /bin/y")
    assert split_words('a "b c" d\\se') == ["a", "b c", "d e"]


@pytest.mark.parametrize("argv, fragment", [
    (["vllm", "serve"], "absolute path"),
    (["./vllm"], "absolute path"),
    (["/opt//vllm"], "normalized"),
    (["/opt/../vllm"], "normalized"),
    (["/opt/vllm/"], "normalized"),
    (["/opt/$HOME/vllm"], "'$'"),
    (["/opt/vl\nlm"], "control"),
    ([], "empty"),
    ([VLLM, "a\x00b"], "NUL"),
    ([VLLM, 5], "must be a string"),
    ([VLLM, "\udc80"], "UTF-8"),
    ("/bin/true", "list of strings"),
])
def test_exec_line_refuses(argv, fragment):
    with pytest.raises(UnitQuoteError, match=fragment.replace("$", "\\$")):
        exec_line(argv)


def test_quote_word_without_dollar_doubling():
    assert quote_word("$X", dollar=False) == "$X"


ENVS = {
    "simple": {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_TARGET_DEVICE": "cuda"},
    "spaces and quotes": {"OPTS": 'a "b" c', "EMPTY": ""},
    "percent and dollar": {"PCT": "90%", "HOME_REF": "$HOME/x"},
    "backslash and unicode": {"WIN": "C:\\x\\", "NAME": "日本 語"},
    "newline and tab": {"MULTI": "a\nb\tc"},
}


@pytest.mark.parametrize("env", list(ENVS.values()), ids=list(ENVS))
def test_env_line_round_trips(env):
    line = env_line(env)
    assert "\n" not in line
    assert parse_environment(line) == env


def test_env_line_keeps_dollar_and_sorts():
    # Environment= does no $ expansion, so '$' must stay single.
    assert env_line({"B": "$x", "A": "1"}) == "A=1 B=$x"


def test_env_line_renders_scalars_as_text():
    assert parse_environment(env_line({"N": 3, "F": 0.5, "T": True, "OFF": False})) == {
        "N": "3", "F": "0.5", "T": "true", "OFF": "false"}


@pytest.mark.parametrize("env, fragment", [
    ({"1X": "a"}, "invalid environment variable name"),
    ({"A-B": "a"}, "invalid environment variable name"),
    ({"A": ["x"]}, "must be a string"),
    ({"A": "bell\a"}, "control characters"),
    (["A=1"], "mapping"),
])
def test_env_line_refuses(env, fragment):
    with pytest.raises(UnitQuoteError, match=fragment):
        env_line(env)
