# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge: real vLLM / SGLang argument parsers and configs check what _spec renders.

Run with an engine venv's python (scripts/engine-venvs builds them):
    .build/venv-vllm/bin/python -m pytest tests/engines -m engines
    .build/venv-sglang/bin/python -m pytest tests/engines -m engines
Each venv holds one engine; the other engine's tests skip.
"""
from __future__ import annotations

import os

import pytest

# vLLM cannot infer a platform on a GPU-less machine; nothing may reach a model hub.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def pytest_collection_modifyitems(items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.engines)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    from tiny_models import write_all
    return write_all(str(tmp_path_factory.mktemp("models")))
