# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engines' own parsers say which spellings reach a flag the collection owns (issue 31, item 4).

For every option of the real parser that sets the same destination as a flag in
``_server.OWNED_FLAGS`` (or a credential such as ``--hf-token``), every spelling that parser accepts
(each option string, vLLM's underscore form, each unique abbreviation argparse resolves, ``=value``)
must be refused by the gate. A new alias in a new engine release fails here before it slips through.
``FLAG_SPELLING`` must say what the parser does (underscores folded, abbreviations allowed).
"""
from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _server, _spec  # noqa: E402


def _vllm_parser():
    pytest.importorskip("vllm.utils.argparse_utils")
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # pylint: disable=import-outside-toplevel
    try:
        from vllm.entrypoints.common.cli_args import make_arg_parser  # pylint: disable=import-outside-toplevel
    except ImportError:  # vLLM 0.32
        from vllm.entrypoints.launchers.cli_args import make_arg_parser  # pylint: disable=import-outside-toplevel
    return make_arg_parser(FlexibleArgumentParser())


def _sglang_parser():
    pytest.importorskip("sglang.srt.server_args")  # the real SGLang (the mock has a launcher package of that name)
    from sglang.srt.server_args import ServerArgs  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    return parser


PARSERS = {"vllm": _vllm_parser, "sglang": _sglang_parser}
# What every command line of the engine has besides the spelling under test: SGLang's parser requires
# --model-path, so without it every spelling would look refused (and the defaults could not be read).
BASE_ARGV = {"vllm": [], "sglang": ["--model-path", "m"]}
CREDENTIAL_DESTS = ("api_key", "hf_token", "admin_api_key")


def _dest(parser, option):
    action = parser._option_string_actions.get(option)  # pylint: disable=protected-access
    return action.dest if action else None


def _resolves(engine, parser, spelling):
    """The destination ``parser`` sets for ``spelling=1`` (None when it refuses the spelling)."""
    try:  # parse_args, as the engine calls it (vLLM folds underscores there only)
        with contextlib.redirect_stderr(io.StringIO()):
            args = parser.parse_args(BASE_ARGV[engine] + [spelling + "=1"])
    except (SystemExit, ValueError):
        return None
    defaults = vars(parser.parse_args(BASE_ARGV[engine]))
    changed = [k for k, v in vars(args).items() if v != defaults.get(k)]
    return changed[0] if len(changed) == 1 else None


def _spellings(engine, parser, option):
    out = {option}
    if option.startswith("--"):
        if _server.FLAG_SPELLING[engine]["underscores"]:
            out.add(option.replace("-", "_").replace("__", "--", 1))
        for end in range(3, len(option)):
            out.add(option[:end])
    elif len(option) > 2:
        out.add(option[:2])
    return sorted(o for o in out if _resolves(engine, parser, o) == _dest(parser, option))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_flag_spelling_facts_are_the_parsers(engine):
    parser = PARSERS[engine]()
    assert parser.allow_abbrev == _server.FLAG_SPELLING[engine]["abbrev"]
    folds = _resolves(engine, parser, "--served_model_name") == "served_model_name"
    assert folds == _server.FLAG_SPELLING[engine]["underscores"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_spelling_of_an_owned_flag_is_refused(engine):
    parser = PARSERS[engine]()
    owned = set()
    for flag in _server.OWNED_FLAGS[engine]:
        owned.update(a.dest for o, a in parser._option_string_actions.items()  # pylint: disable=protected-access
                     if o == flag or (flag == "--speculative" and o.startswith(flag)))
    assert {"host", "port", "api_key"} <= owned
    reached = 0
    for option, action in sorted(parser._option_string_actions.items()):  # pylint: disable=protected-access
        if action.dest in owned:
            for spelling in _spellings(engine, parser, option):
                reached += 1
                assert _server._owned(engine, spelling + "=1"), (engine, spelling, action.dest)
        elif action.dest in CREDENTIAL_DESTS:
            for spelling in _spellings(engine, parser, option):
                reached += 1
                assert _server._secret_flag(engine, spelling + "=1"), (engine, spelling, action.dest)
        elif not isinstance(action, argparse._HelpAction):  # pylint: disable=protected-access
            assert not _server._owned(engine, option), (engine, option, "is no owned flag's spelling")
    assert reached > 40  # the spellings checked reached the parser (not an empty loop)


def test_draft_quantization_names_are_the_engines():
    # issue 31, item 10: the gate accepts exactly the names the engine takes for the draft
    try:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS  # pylint: disable=import-outside-toplevel
        assert set(_spec.QUANTIZATIONS["vllm"]) == set(QUANTIZATION_METHODS)
        checked = True
    except ImportError:
        checked = False
    try:
        from sglang.srt.server_args import QUANTIZATION_CHOICES  # pylint: disable=import-outside-toplevel
        assert set(_spec.QUANTIZATIONS["sglang"]) == set(QUANTIZATION_CHOICES)
        checked = True
    except ImportError:
        pass
    if not checked:
        pytest.skip("neither engine is installed in this venv")


def test_load_formats_are_the_engines_but_dummy():
    # issue 34: spec_server_load_format takes exactly the engine's loaders, but `dummy` (random weights)
    from ansible_collections.llmops.specdec.plugins.module_utils import _engine  # pylint: disable=import-outside-toplevel
    checked = []
    try:
        from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER  # pylint: disable=import-outside-toplevel
        assert set(_engine.get("vllm").LOAD_FORMATS) == set(_LOAD_FORMAT_TO_MODEL_LOADER) - {"dummy"}
        checked.append("vllm")
    except ImportError:
        pass
    try:
        from sglang.srt.server_args import LOAD_FORMAT_CHOICES  # pylint: disable=import-outside-toplevel
        assert set(_engine.get("sglang").LOAD_FORMATS) == set(LOAD_FORMAT_CHOICES) - {"dummy"}
        checked.append("sglang")
    except ImportError:
        pass
    if not checked:
        pytest.skip("neither engine is installed in this venv")
    for name in checked:
        assert set(_engine.get(name).DIRECT_IO_LOAD_FORMATS) <= set(_engine.get(name).LOAD_FORMATS)
