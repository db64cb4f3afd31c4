# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of every module that talks to an engine's HTTP API (engine_ready, engine_park, spec_bench).

Their argument spec is ``module_utils._http.ENGINE_API_ARGSPEC``; keep the two in step.
"""
from __future__ import annotations


class ModuleDocFragment:
    # Use with `extends_documentation_fragment: [llmops.specdec.engine_api]`.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the engine's HTTP API, without a path, for example C(http://127.0.0.1:8000).
        A trailing C(/v1) is accepted.
    type: str
    required: true
  api_key:
    description:
      - Bearer token (C(Authorization) header) for an engine that requires an API key (vLLM C(--api-key)
        or C(VLLM_API_KEY), SGLang C(--api-key)).
      - It never appears in the result or in an error message.
      - A key that holds a control character (CR, LF, tab, NUL and the like, often a trailing newline left
        by a file or a lookup) or a non-ASCII character is refused before any request.
    type: str
  validate_certs:
    description:
      - Whether to validate TLS certificates for an C(https) O(url).
    type: bool
    default: true
"""
