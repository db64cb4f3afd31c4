# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mock vLLM / SGLang engines for the mock GPU host (stdlib only, Python 3.9+).

They implement the engines' own flag rules, process tree, HTTP API and a
data-driven timing model; they never import the collection under test.
"""
VLLM_VERSION = "0.11.0"
SGLANG_VERSION = "0.5.4"
