# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A serving group's flags (issue 33): the mock engines read them as the pinned engines' own parsers do.

Every node's argv as the adapters render it (``group_args``), in the parsers' other spellings (short forms,
vLLM's underscores, ``=value``, SGLang's ``--nccl-init-addr``), and the defaults, give the same values to the
real parser and to the mock's; what one refuses the other refuses. The lines the mock prints for the group
are held to the engines' source.
"""
from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _engine_sglang, _engine_vllm  # noqa: E402

from conftest import wheel_file  # noqa: E402

VLLM_DESTS = ("nnodes", "node_rank", "master_addr", "master_port", "headless")
SGLANG_DESTS = ("nnodes", "node_rank", "dist_init_addr", "dist_timeout", "nccl_port")


def _real_vllm():
    pytest.importorskip("vllm.utils.argparse_utils")
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # pylint: disable=import-outside-toplevel
    try:
        from vllm.entrypoints.common.cli_args import make_arg_parser  # pylint: disable=import-outside-toplevel
    except ImportError:  # vLLM 0.32
        from vllm.entrypoints.launchers.cli_args import make_arg_parser  # pylint: disable=import-outside-toplevel
    parser = make_arg_parser(FlexibleArgumentParser())

    def parse(argv):
        return parser.parse_args(["org/m"] + argv)
    return parse


def _mock_vllm(argv):
    from mockengine import vllm_cli  # pylint: disable=import-outside-toplevel
    return vllm_cli.parse(["serve", "org/m"] + argv)


def _real_sglang():
    pytest.importorskip("sglang.srt.server_args")  # the real SGLang (the mock has a launcher package of that name)
    from sglang.srt.server_args import ServerArgs  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    return lambda argv: parser.parse_args(["--model-path", "m"] + argv)


def _mock_sglang(argv):
    from mockengine import sglang_cli  # pylint: disable=import-outside-toplevel
    return sglang_cli.build_parser().parse_args(["--model-path", "m"] + argv)


def _values(parse, argv, dests):
    """{dest: value} the parser reads from argv, or 'refused'."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = parse(argv)
    except SystemExit:
        return "refused"
    return {d: getattr(args, d) for d in dests}


VLLM_CASES = [[]] + [_engine_vllm.group_args(rank, 4, "10.0.0.1", 29600) for rank in range(4)] + [
    ["-n", "2", "-r", "1", "--headless"],
    ["--nnodes=2", "--node_rank=1", "--master_addr", "head", "--master_port=1234"],
    ["--nnodes", "two"],
    ["--master-port", "x"],
]


@pytest.mark.parametrize("argv", VLLM_CASES, ids=lambda a: " ".join(a) or "defaults")
def test_vllm_group_flags_read_as_vllm_reads_them(argv):
    real = _real_vllm()
    assert _values(_mock_vllm, argv, VLLM_DESTS) == _values(real, argv, VLLM_DESTS)


SGLANG_CASES = [[]] + [_engine_sglang.group_args(rank, 4, "10.0.0.1", 29600) for rank in range(4)] + [
    ["--nccl-init-addr", "h:1", "--nnodes", "2", "--node-rank", "1", "--dist-timeout", "60", "--nccl-port", "5"],
    ["--nnodes=2", "--node-rank=1", "--dist-init-addr=h:1"],
    ["--nnodes", "two"],
    ["--dist-timeout", "1.5"],
]


@pytest.mark.parametrize("argv", SGLANG_CASES, ids=lambda a: " ".join(a) or "defaults")
def test_sglang_group_flags_read_as_sglang_reads_them(argv):
    real = _real_sglang()
    assert _values(_mock_sglang, argv, SGLANG_DESTS) == _values(real, argv, SGLANG_DESTS)


def test_the_mock_vllm_group_lines_are_vllms():
    pytest.importorskip("vllm")
    args = wheel_file("vllm", "engine/arg_utils.py")
    for text in ("must evenly divide the total ", "Set it to this node's ", "zero-based index."):
        assert text in args
    serve = wheel_file("vllm", "entrypoints/cli/serve.py")
    assert "headless multiproc executor, " in serve and "data parallel engine(s) in headless mode, " in serve
    assert "Did not receive response from front-end " in wheel_file("vllm", "v1/engine/core.py")
    client = wheel_file("vllm", "v1/engine/core_client.py")
    assert "Timed out waiting for engine core processes to " in client and "VLLM_ENGINE_READY_TIMEOUT_S" in client
    assert "distributed_init_method=%s backend=%s" in wheel_file("vllm", "distributed/parallel_state.py")


def test_the_mock_sglang_group_lines_are_sglangs():
    pytest.importorskip("sglang.srt")
    assert '"tp_size must be divisible by number of nodes"' in wheel_file("sglang", "srt/arg_groups/validation_hook.py")
    engine = wheel_file("sglang", "srt/entrypoints/engine.py")
    assert "waiting for the rank-0 ShutdownReq broadcast to stop " in engine and "launch_dummy_health_check_server(" in engine
    common = wheel_file("sglang", "srt/utils/common.py")
    for path in ('"/ping"', '"/health"', '"/health_generate"'):
        assert path in common
    boot = wheel_file("sglang", "srt/distributed/bootstrap.py")
    assert 'logger.info("Init parallel begin.")' in boot and "Init parallel ends. elapsed=" in boot
