#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spec_bench
short_description: Benchmark decoding speed and speculative acceptance of a vLLM or SGLang server
version_added: 0.1.0
description:
  - Sends streaming requests (temperature 0, C(stream_options.include_usage)) to the server's OpenAI-compatible
    completions or chat API from a closed loop of O(concurrency) workers, and measures per request the time to
    first token (TTFT), the time per output token (TPOT), the gaps between streamed chunks, the per-token
    latency, the end-to-end latency, the tokens and the errors; per level the output tokens per second,
    the requests per second, mean / median / p90 / p99, and the error count. Warm-up requests are not counted.
  - Token counts come from the server's C(usage), never from the requested length. With O(chunk_usage)
    the server also reports the running count in every chunk (vLLM and SGLang C(continuous_usage_stats)),
    which gives the tokens per chunk under speculation and so the exact per-token latency.
  - "Speculative acceptance: from vLLM the C(vllm:spec_decode_*_total) counters are read before and after
    each level and differenced (acceptance rate, mean acceptance length = 1 + accepted / drafts, per
    position; a counter that went down means the server restarted and is reported). From SGLang the
    C(avg_spec_accept_length) of C(/get_server_info), which is a running average since the server started:
    the result says so in RV(bench.levels[].acceptance.caveat)."
  - TTFT runs from the moment the request is written to the socket (after connecting) to the arrival of the first chunk
    that carries a token; TPOT = (e2e - TTFT) / (output tokens - 1), where e2e ends at the last chunk that
    carries a token. Timestamps are taken right after each socket read; the stream is parsed after the level.
  - The module only reads from the server. It fails when no request succeeded; otherwise failed requests
    are counted by kind in the result.
  - Per-request samples of each level (TTFT, TPOT, e2e, output tokens and tok/s, start time) are returned
    in RV(bench.levels[].samples), for statistics beyond the summaries.
author:
  - llmops.specdec developers (@llmops)
options:
  api:
    description:
      - Which OpenAI-compatible API to stream from, C(/v1/completions) or C(/v1/chat/completions).
    type: str
    choices: [completions, chat]
    default: completions
  model:
    description:
      - Model name to send. When omitted, the first model listed by C(/v1/models) is used.
    type: str
  suite:
    description:
      - A prompt suite shipped with the collection. C(reasoning) has short fresh questions (little for n-gram
        drafting to copy), C(coding) code to change, C(chat) everyday requests, C(summarise) long passages to
        summarise or quote, C(repetitive) tables, units and logs to reproduce (the most to copy);
        C(all) interleaves every category.
      - Used when neither O(prompts) nor O(prompts_file) is given.
    type: str
    choices: [reasoning, coding, chat, summarise, repetitive, all]
    default: all
  prompts:
    description:
      - Prompts to send instead of a suite, used round-robin.
    type: list
    elements: str
  prompts_file:
    description:
      - Path on the target of a prompts file, used round-robin instead of a suite.
      - Either JSON lines with a C(prompt) and an optional C(category) key, or one prompt per line
        (a literal C(\n) stands for a newline). Blank lines and lines starting with C(#) are skipped.
    type: path
  max_tokens:
    description:
      - Tokens to generate per request (C(max_tokens)).
    type: int
    default: 256
  ignore_eos:
    description:
      - Send C(ignore_eos) (vLLM and SGLang honour it) so every request decodes O(max_tokens) tokens and runs
        are comparable. Token counts still come from the server's C(usage).
    type: bool
    default: true
  temperature:
    description:
      - Sampling temperature. C(0) (greedy) makes the output, and so the acceptance, repeatable.
    type: float
    default: 0.0
  concurrency:
    description:
      - Concurrency levels to run, one after the other; each level is a closed loop of that many workers.
      - An empty list takes the levels from the engine's running-request gauge (vLLM C(vllm:num_requests_running),
        SGLang C(sglang:num_running_reqs)), read every O(observe_interval) seconds for O(observe_seconds) before
        the first request is sent, while the server serves its own traffic; the median and 90th percentile of the
        samples taken while it was busy, rounded up to a power of two, with 1, at most O(max_concurrency). Without
        enough busy samples (no gauge, an idle server) the levels are 1 and 8. RV(bench.level_choice) says which.
    type: list
    elements: int
    default: [1]
  requests:
    description:
      - Measured requests per concurrency level (at least O(min_waves) waves of it).
    type: int
    default: 16
  min_waves:
    description:
      - At least this many waves of requests at each level, that is O(min_waves) times its concurrency when that is
        more than O(requests). Requests running together are not independent samples; the switch's verdict needs
        three waves at a level to give it an interval, so the role sets 3.
      - 0 measures exactly O(requests) at every level.
    type: int
    default: 0
  warmup:
    description:
      - Unmeasured requests sent before each level, at that level's concurrency.
    type: int
    default: 2
  metrics:
    description:
      - Where to read speculative acceptance from. C(auto) picks C(vllm) when C(/metrics) has C(vllm:) series,
        C(sglang) when C(/get_server_info) answers, else C(none).
    type: str
    choices: [auto, vllm, sglang, none]
    default: auto
  chunk_usage:
    description:
      - Ask for C(stream_options.continuous_usage_stats) so every chunk carries the running token count;
        needed for the exact per-token latency when a chunk carries several tokens.
      - Without it (or when the server ignores it) each chunk gap is spread over the request's mean tokens per
        chunk; RV(bench.levels[].token_latency_source) says which.
    type: bool
    default: true
  timeout:
    description:
      - Seconds a request may wait to connect, for the response, and between two reads of its stream (a stall).
        A request that stalls longer is counted as a C(timeout) error.
      - A server that keeps sending a little within every stall limit is bounded by O(request_timeout) instead.
    type: float
    default: 60
  request_timeout:
    description:
      - Seconds one request may take, wall clock from its start (connect and send) to its last byte, however
        steadily the server sends. A request that takes longer is ended and counted as a C(request_timeout) error.
      - Set it above the slowest request you expect, O(max_tokens) times the slowest time per token plus the
        time to first token.
    type: float
    default: 600
  run_timeout:
    description:
      - Seconds the whole benchmark may take, discovery and every level included.
      - When it passes, the requests still running are ended, they and the measured requests not yet started
        (also of the levels not reached) are counted as C(deadline) errors, and the module returns what it has
        measured, with RV(bench.run_timeout_reached=true) and a RV(msg) that says so. It fails only when no
        request succeeded at all.
    type: float
    default: 3600
  max_samples:
    description:
      - Most per-request samples kept per level in RV(bench.levels[].samples), the first ones in start order;
        RV(bench.levels[].samples_truncated) says when more requests succeeded.
    type: int
    default: 1000
  lossless_prompts:
    description:
      - How many of the first prompts get a digest of their greedy output in RV(bench.outputs), for the verdict's
        lossless check (the candidate must write what the baseline writes). The digests come from the requests of
        the lowest concurrency level, the first one that succeeded for each prompt; no extra request is sent.
      - C(0) digests nothing. With a O(temperature) other than C(0) nothing is digested either (the outputs are
        not greedy), and RV(bench.outputs.skipped) says so.
    type: int
    default: 8
  observe_seconds:
    description:
      - With an empty O(concurrency), seconds the running-request gauge is read before the first request.
      - C(0) reads nothing and runs levels 1 and 8.
    type: float
    default: 10
  observe_interval:
    description:
      - Seconds between two reads of the running-request gauge.
    type: float
    default: 0.5
  max_concurrency:
    description:
      - With an empty O(concurrency), the highest level the gauge may give.
    type: int
    default: 64
  use_proxy:
    description:
      - Whether to honour C(http_proxy) and friends. Off by default because a proxy would be measured too.
      - When on, the streams go through C(ansible.module_utils.urls), which costs more CPU per request and
        so delays request starts at high concurrency; otherwise they use Python's C(http.client) directly.
    type: bool
    default: false
  output:
    description:
      - Path on the target to write the RV(bench) result to, as JSON (mode C(0644)), atomically (a reader never sees
        half of it). Not written in check mode.
    type: path
  per_request:
    description:
      - Add each measured request's own figures to its level as RV(bench.levels[].per_request).
    type: bool
    default: false
  lease:
    description:
      - The switch's lease on the host's guard (P(llmops.specdec.switch_guard#module)). The module never renews it;
        only the controller's liveness may (P(llmops.specdec.spec_bench_wait#module), one renewal per cycle, while
        this module runs with C(async) and C(poll=0)).
      - The module reads the guard's state file when it starts and every second while it runs. Once the lease has
        run out (the deadline passed, the guard restores or restored the host, another run owns it) it ends the
        requests still running, sends no more, and fails with RV(lease_lost) and the figures it had. A lease
        already lost at the start fails at once with nothing measured.
    type: dict
    suboptions:
      statefile:
        description: The guard's state file (C(<state_dir>/guard/<unit>.json)).
        type: path
        required: true
      run_id:
        description: The run that armed the guard.
        type: str
        required: true
      ttl:
        description: Seconds each renewal grants (not used by this module, which never renews).
        type: float
        required: true
attributes:
  check_mode:
    support: partial
    details:
      - The benchmark only reads from the server, so it runs in check mode and reports real figures.
      - O(output) is not written in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - RV(changed) is true exactly when O(output) was written with other content than it had (the figures differ
        from run to run as measurements do); without O(output) it is false.
extends_documentation_fragment:
  - llmops.specdec._attributes
  - llmops.specdec.engine_api
notes:
  - "Bounded: besides the three time limits, each request keeps at most 1 MiB plus 4 KiB per O(max_tokens) of
    response and each SSE event at most 1 MiB; a longer response or an event that never ends is abandoned
    and counted as C(oversize), so a broken server cannot grow the module's memory. An unexpected error
    inside a request is counted as C(client_error) with a short detail, never a traceback."
  - Runs on the target with the Python standard library; a worker thread per concurrent stream. The streamed
    POSTs use C(http.client) directly, the transport with the least CPU per request before it is sent, which
    keeps TTFT exact at high concurrency (bench/README.md, "Transport", has the figures against
    C(ansible.module_utils.urls) and C(open_url)). Each stream keeps one HTTP/1.1 connection alive, as load
    balancers and SDKs do, and opens a fresh one after an error or a server close (bench/README.md, "Keep-alive
    connections"). TLS contexts come from C(ansible.module_utils.urls.make_context); model discovery and metrics
    use C(ansible.module_utils.urls).
  - Run it on the host that runs the engine, or close to it, because network latency is part of what it measures.
seealso:
  - name: bench/README.md
    description: How exact and how cheap the measurement is, beside C(vllm bench serve) and C(sglang.bench_serving).
    link: https://github.com/llmops/specdec/blob/main/bench/README.md
"""

EXAMPLES = r"""
- name: Benchmark the vLLM server with the repetitive suite at 1 and 8 streams
  llmops.specdec.spec_bench:
    url: http://127.0.0.1:8000
    suite: repetitive
    concurrency: [1, 8]
    requests: 32
    output: /var/lib/specdec/bench-ngram.json
  register: bench_result

- name: Show decode speed and acceptance at one stream
  ansible.builtin.debug:
    msg: >-
      {{ bench_result.bench.single_stream_tok_s | round(1) }} tok/s,
      acceptance length {{ bench_result.bench.levels[0].acceptance.mean_acceptance_length }}

- name: Benchmark an SGLang server through the chat API with a user prompts file
  llmops.specdec.spec_bench:
    url: http://127.0.0.1:30000
    api: chat
    prompts_file: /etc/specdec/prompts.jsonl
    max_tokens: 512
    api_key: "{{ sglang_api_key }}"
"""

RETURN = r"""
lease_lost:
  description:
    - Why the lease on the host's guard ran out (its deadline passed, the guard restores or restored the host, or
      another run owns it). The benchmark then stopped, and the module failed with the figures it had.
  returned: when O(lease) was given and it ran out before the benchmark ended
  type: str
bench:
  description: The benchmark result.
  returned: always
  type: dict
  contains:
    url:
      description: The O(url) benchmarked.
      type: str
      sample: http://127.0.0.1:8000
    api:
      description: The API used.
      type: str
      sample: completions
    model:
      description: The model name sent (given or discovered).
      type: str
      sample: meta-llama/Llama-3.1-8B-Instruct
    metrics_source:
      description: Where acceptance was read from, C(vllm), C(sglang) or C(none).
      type: str
      sample: vllm
    prompts:
      description: Number of distinct prompts used round-robin.
      type: int
      sample: 5
    prompts_sha256:
      description:
        - SHA-256 (16 hex digits) of the prompts and their categories in the order sent. Two runs whose digests are
          equal sent the same prompts, so their requests can be paired by RV(bench.levels[].samples.prompt).
      type: str
      sample: 3f2a9c0d1e4b5a67
    categories:
      description: Number of prompts per category (C(file) for plain user prompts).
      type: dict
      sample: {repetitive: 5}
    max_tokens:
      description: The O(max_tokens) requested.
      type: int
      sample: 256
    ignore_eos:
      description: Whether O(ignore_eos) was sent.
      type: bool
      sample: true
    temperature:
      description: The O(temperature) sent.
      type: float
      sample: 0.0
    warmup:
      description: Unmeasured warm-up requests per level.
      type: int
      sample: 2
    requests_per_level:
      description: Measured requests per level.
      type: int
      sample: 16
    transport:
      description: The HTTP client of the streams, C(http.client) or C(ansible_urls) (with O(use_proxy)).
      type: str
      sample: http.client
    single_stream_tok_s:
      description: Output tokens per second of the concurrency 1 level; null when no such level ran.
      type: float
      sample: 81.9
    ok:
      description: Successful measured requests over all levels.
      type: int
      sample: 16
    errors:
      description: Failed measured requests over all levels.
      type: int
      sample: 0
    duration_s:
      description: Wall time of the whole run in seconds, discovery and warm-up included.
      type: float
      sample: 121.4
    run_timeout_reached:
      description:
        - Whether O(run_timeout) cut the run short. The requests it left unfinished are counted as C(deadline)
          errors of their levels, and an acceptance not read then says so in its C(error).
      type: bool
      sample: false
    level_choice:
      description:
        - Which levels ran and why. C(source) is C(named) (O(concurrency) as given), C(observed) (from the
          running-request gauge) or C(fallback) (1 and 8, C(why) says why the gauge did not give levels).
        - With C(observed) or C(fallback) also C(gauge), C(samples) (reads), C(busy) (reads of at least one running
          request), C(median), C(p90), C(max) (of the busy reads), C(seconds) and C(max_level).
      type: dict
      sample: {source: observed, levels: [1, 16, 32], gauge: "vllm:num_requests_running", samples: 21, busy: 21,
               median: 12.0, p90: 18.0, max: 20.0, seconds: 10, max_level: 64,
               why: "vllm:num_requests_running while busy: median 12, p90 18 running request(s) over 21 sample(s), rounded up to the ladder"}
    levels:
      description: One entry per concurrency level, in the order run.
      type: list
      elements: dict
      contains:
        concurrency:
          description: Concurrent streams (closed-loop workers).
          type: int
          sample: 1
        requests:
          description: Measured requests sent.
          type: int
          sample: 16
        ok:
          description: Requests that streamed to C(data [DONE]) with at least one token.
          type: int
          sample: 16
        errors:
          description: Requests that failed.
          type: int
          sample: 0
        error_kinds:
          description:
            - Failed requests by kind. C(connect), C(http_4xx), C(http_5xx), C(timeout) (no byte within
              O(timeout)), C(request_timeout) (not complete within O(request_timeout)), C(deadline) (unfinished
              or not started when O(run_timeout) passed), C(oversize) (a response or an SSE event beyond its byte
              cap), C(stream_cut) (closed before C(data [DONE])), C(server_error) (an error event in the
              stream), C(bad_response) (unparsable), C(bad_usage) (the server's C(usage) holds a token count that
              cannot be one (negative, not an integer, shrinking, or more than O(max_tokens)), and the verdict then
              calls the level invalid), C(no_tokens), C(client_error) (an unexpected error in the client, with
              its detail in RV(bench.levels[].first_error)).
          type: dict
          sample: {http_5xx: 2}
        first_error:
          description:
            - Message of the first failed request that carries the server's words (any kind but C(timeout),
              C(request_timeout), C(connect), C(deadline)), else of the first failed request; null when none failed.
          type: str
          sample: "HTTP 500: injected fault"
        duration_s:
          description: Wall time from the first measured request's start to the last one's end.
          type: float
          sample: 50.1
        output_tokens:
          description: Output tokens of the successful requests, from the server's C(usage).
          type: int
          sample: 4096
        output_tok_s:
          description: Output tokens per second over the level (all streams); null when none succeeded.
          type: float
          sample: 81.8
        request_s:
          description: Successful requests per second.
          type: float
          sample: 0.32
        stream_tok_s:
          description: Per-request output tokens / e2e, the rate one user sees (statistics as for RV(bench.levels[].ttft_ms)).
          type: dict
          sample: {mean: 82.2, median: 82.2, p90: 82.3, p99: 82.3, min: 82.1, max: 82.3, count: 16}
        ttft_ms:
          description:
            - Time to first token in milliseconds. Statistics over the successful requests, each with keys
              C(mean), C(median), C(p90), C(p99), C(min), C(max) and C(count); null when none succeeded.
              Percentiles are linear-interpolated (as numpy's default).
          type: dict
          sample: {mean: 50.4, median: 50.4, p90: 50.5, p99: 50.6, min: 50.3, max: 50.6, count: 16}
        tpot_ms:
          description: Time per output token, (e2e - TTFT) / (output tokens - 1), per request; statistics as above.
          type: dict
          sample: {mean: 12.0, median: 12.0, p90: 12.0, p99: 12.01, min: 11.99, max: 12.01, count: 16}
        itl_ms:
          description:
            - Gaps between consecutive token-bearing chunks (what C(vllm bench serve) calls ITL); statistics
              as above. Under speculation one chunk carries several tokens, so this overstates the per-token
              latency.
          type: dict
          sample: {mean: 24.1, median: 24.0, p90: 24.2, p99: 25.0, min: 23.5, max: 30.1, count: 2040}
        token_latency_ms:
          description: Per-token latency, each chunk gap divided evenly over the tokens it carried; statistics as above.
          type: dict
          sample: {mean: 12.0, median: 12.0, p90: 12.1, p99: 12.5, min: 11.7, max: 15.0, count: 4080}
        token_latency_source:
          description:
            - C(usage_per_chunk) when every chunk's token count came from the server's running usage,
              C(mean_per_chunk) when the gaps were spread over each request's mean tokens per chunk.
          type: str
          sample: usage_per_chunk
        e2e_ms:
          description: End-to-end latency to the last token-bearing chunk; statistics as above.
          type: dict
          sample: {mean: 3111.5, median: 3111.5, p90: 3111.7, p99: 3111.7, min: 3111.4, max: 3111.7, count: 16}
        output_tokens_per_request:
          description: Output tokens per request; statistics as above.
          type: dict
          sample: {mean: 256, median: 256, p90: 256, p99: 256, min: 256, max: 256, count: 16}
        tokens_per_chunk:
          description: Output tokens per token-bearing chunk (above 1 when the server streams speculative steps whole).
          type: float
          sample: 1.0
        tokens_source:
          description:
            - C(usage) when token counts came from the server's C(usage); C(chunks) when the server sent no usage
              and token-bearing chunks were counted instead (exact only at one token per chunk); C(mixed).
          type: str
          sample: usage
        samples:
          description:
            - Per-request figures of the successful requests, in the order they started, as equal-length lists
              (entry I of every list is the same request). At most O(max_samples) requests, the first ones.
          type: dict
          contains:
            ttft_ms:
              description: Time to first token of each request, in ms.
              type: list
              elements: float
              sample: [50.31, 50.42]
            tpot_ms:
              description: Time per output token of each request, in ms; null for a request of one token.
              type: list
              elements: float
              sample: [12.0012, 11.9987]
            e2e_ms:
              description: Time to the last token-bearing chunk of each request, in ms.
              type: list
              elements: float
              sample: [3110.42, 3110.12]
            output_tokens:
              description: Output tokens of each request (from the server's C(usage)).
              type: list
              elements: int
              sample: [256, 256]
            output_tok_s:
              description: Output tokens / e2e seconds of each request (its own decode rate).
              type: list
              elements: float
              sample: [82.304, 82.312]
            start_ms:
              description: When each request started, in ms after the level's first request.
              type: list
              elements: float
              sample: [0.0, 3112.8]
            prompt:
              description:
                - Index of the prompt each request sent, in the run's prompts (0-based; warm-up requests take the
                  first ones, so the measured requests start after them). The verdict pairs the requests of the
                  baseline and the candidate by it.
              type: list
              elements: int
              sample: [1, 2]
        samples_truncated:
          description: Whether more requests succeeded than RV(bench.levels[].samples) holds (O(max_samples)).
          type: bool
          sample: false
        acceptance:
          description: Speculative acceptance over this level; null when O(metrics) is C(none).
          type: dict
          contains:
            source:
              description: C(vllm_counters) or C(sglang_server_info).
              type: str
              sample: vllm_counters
            error:
              description: Why the figures could not be read, or null.
              type: str
              sample: null
            caveat:
              description: What limits the figures (SGLang's since-start average, a counter reset, speculation off), or null.
              type: str
              sample: null
            drafts:
              description: vLLM only. Verification steps in the level (counter delta).
              type: int
              sample: 1200
            draft_tokens:
              description: vLLM only. Tokens proposed in the level.
              type: int
              sample: 4800
            accepted_tokens:
              description: vLLM only. Draft tokens accepted in the level (without the bonus token).
              type: int
              sample: 2900
            acceptance_rate:
              description: vLLM only. accepted / draft tokens.
              type: float
              sample: 0.60
            mean_acceptance_length:
              description: Tokens per verification step including the bonus token. vLLM, 1 + accepted / drafts over the level; SGLang, the since-start average.
              type: float
              sample: 3.4
            per_position:
              description: vLLM only. Acceptance rate of each draft position (accepted at that position / drafts).
              type: list
              elements: float
              sample: [0.8, 0.62, 0.5, 0.4]
            counter_reset:
              description: vLLM only. True when a counter went down during the level (server restarted).
              type: bool
              sample: false
            since_server_start:
              description: SGLang only. Always true; the figure is an average since the server started.
              type: bool
              sample: true
            last_batch_accept_length:
              description: SGLang only. The C(sglang:spec_accept_length) gauge (last batch) when C(/metrics) exports it.
              type: float
              sample: 3.1
        prefix_cache:
          description:
            - The engine's prefix-cache counters over this level (its adapter's names; vLLM C(vllm:prefix_cache_queries_total)
              and C(vllm:prefix_cache_hits_total), SGLang C(sglang:prompt_tokens_total) and C(sglang:cached_tokens_total)),
              for the verdict's prefix-cache guardrail; null when O(metrics) is C(none).
          type: dict
          contains:
            source:
              description: Always C(metrics).
              type: str
              sample: metrics
            hits:
              description: Prompt tokens found in the prefix cache during the level.
              type: int
              sample: 9216
            queries:
              description: Prompt tokens looked up in the prefix cache during the level.
              type: int
              sample: 10240
            hit_rate:
              description: hits / queries, or null without queries.
              type: float
              sample: 0.9
            error:
              description: Why the figures could not be read (no such counter, a restart during the level), or null.
              type: str
              sample: null
        per_request:
          description: With O(per_request), one entry per measured request in the order sent; otherwise absent.
          type: list
          elements: dict
          returned: when O(per_request=true)
          contains:
            start_ms:
              description: When the request was sent, after the level's first request; null when never sent (O(run_timeout)).
              type: float
              sample: 0.0
            prompt:
              description: Index of the prompt the request sent (as in RV(bench.levels[].samples.prompt)).
              type: int
              sample: 1
            ok:
              description: Whether the request succeeded.
              type: bool
              sample: true
            error:
              description: The error kind (as in RV(bench.levels[].error_kinds)), or null.
              type: str
              sample: null
            detail:
              description: The error message, or null.
              type: str
              sample: null
            ttft_ms:
              description: Time to first token; null when failed.
              type: float
              sample: 50.3
            tpot_ms:
              description: Time per output token; null when failed or with one token.
              type: float
              sample: 12.0
            e2e_ms:
              description: Time to the last token-bearing chunk; null when failed.
              type: float
              sample: 3110.4
            output_tokens:
              description: Output tokens (from usage); null when failed.
              type: int
              sample: 256
            chunks:
              description: Token-bearing chunks received; null when failed.
              type: int
              sample: 256
            max_chunk_gap_ms:
              description: The longest gap between two token-bearing chunks (a stall shows here); null when failed.
              type: float
              sample: 14.2
            bytes:
              description: Response bytes read (at most the per-request cap, see the notes).
              type: int
              sample: 81920
    outputs:
      description:
        - Digests of the greedy outputs of the lowest concurrency level, per prompt, for the verdict's lossless check
          (P(llmops.specdec.verdict_round#filter)); the text itself is not kept.
        - Positions are in characters of the streamed text, to within RV(bench.outputs.block_chars).
      type: dict
      contains:
        skipped:
          description: Why no digest was taken (O(lossless_prompts=0), a O(temperature) other than C(0)); null when digests were taken.
          type: str
          sample: lossless_prompts is 0
        level:
          description: The concurrency level the digests come from.
          type: int
          sample: 1
        temperature:
          description: The temperature of the requests (C(0) when digests were taken).
          type: float
          sample: 0.0
        block_chars:
          description: Characters per block digest.
          type: int
          sample: 32
        prompts:
          description: One entry per prompt digested, by its index in the prompts sent; empty when skipped.
          type: list
          elements: dict
          sample:
            - index: 0
              category: reasoning
              prompt_sha256: 1f0c2e9a77d3b410
              stable: true
              sha256: 9b2d1c0e5f6a7788
              chars: 1290
              blocks: [0a1b2c3d, 4e5f6a7b]
msg:
  description: One line on the run; says when O(run_timeout) cut it short, and how many requests that cost.
  returned: always
  type: str
  sample: "1 level(s) (concurrency 1): 16 request(s) ok, 0 failed, in 52.1 s"
changed:
  description: Whether O(output) was written (the module only reads from the server).
  returned: always
  type: bool
  sample: false
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _engine, _files, _http, _lease, _secrets, _suites


def _prompts(module):
    p = module.params
    if p['prompts']:
        return [('file', text) for text in p['prompts']]
    if p['prompts_file']:
        try:
            with open(p['prompts_file'], encoding='utf-8') as f:
                prompts = _suites.parse_prompts_file(f.read())
        except (OSError, ValueError) as exc:
            module.fail_json(msg='cannot read prompts_file %s: %s' % (p['prompts_file'], to_native(exc)))
        if not prompts:
            module.fail_json(msg='prompts_file %s holds no prompt' % p['prompts_file'])
        return prompts
    return _suites.suite_prompts(p['suite'])


def main():
    module = AnsibleModule(
        argument_spec=_http.engine_api_argspec(
            api=dict(type='str', choices=['completions', 'chat'], default='completions'),
            model=dict(type='str'),
            suite=dict(type='str', choices=list(_suites.SUITE_CHOICES), default='all'),
            prompts=dict(type='list', elements='str'),
            prompts_file=dict(type='path'),
            max_tokens=dict(type='int', default=256, no_log=False),
            ignore_eos=dict(type='bool', default=True),
            temperature=dict(type='float', default=0.0),
            concurrency=dict(type='list', elements='int', default=[1]),
            requests=dict(type='int', default=16),
            min_waves=dict(type='int', default=0),
            warmup=dict(type='int', default=2),
            metrics=dict(type='str', choices=['auto'] + list(_engine.NAMES) + ['none'], default='auto'),
            chunk_usage=dict(type='bool', default=True),
            use_proxy=dict(type='bool', default=False),
            output=dict(type='path'),
            per_request=dict(type='bool', default=False),
            lease=_lease.lease_argspec(),
            **_bench.LIMIT_OPTIONS
        ),
        mutually_exclusive=[('prompts', 'prompts_file')],
        supports_check_mode=True,
    )
    p = module.params
    problem = _secrets.api_key_problem(p['api_key'])
    if problem:
        module.fail_json(msg=problem)
    if p['max_tokens'] < 1:
        module.fail_json(msg='max_tokens must be at least 1, got %d' % p['max_tokens'])
    if p['requests'] < 1 or p['warmup'] < 0 or p['min_waves'] < 0:
        module.fail_json(msg='requests must be at least 1, warmup and min_waves at least 0')
    if any(c < 1 for c in p['concurrency'] or []):
        module.fail_json(msg='concurrency must list levels of at least 1, got %s' % p['concurrency'])
    if p['observe_seconds'] < 0 or p['observe_interval'] <= 0 or p['max_concurrency'] < 1:
        module.fail_json(msg='observe_seconds must be at least 0, observe_interval positive and max_concurrency at least 1')
    for name in ('timeout', 'request_timeout', 'run_timeout'):
        if p[name] <= 0:
            module.fail_json(msg='%s must be positive, got %s' % (name, p[name]))
    if p['max_samples'] < 0:
        module.fail_json(msg='max_samples must be at least 0, got %d' % p['max_samples'])
    if p['lossless_prompts'] < 0:
        module.fail_json(msg='lossless_prompts must be at least 0, got %d' % p['lossless_prompts'])

    cfg = dict(p, prompts=_prompts(module))
    lost_msg = ("spec_bench against %s: the lease on the host's guard ran out, the benchmark stopped and the host is "
                "being restored to its previous configuration: %s")
    # The lease is the controller's to renew (spec_bench_wait, one renewal per cycle); the benchmark only
    # watches it, and ends its requests once it is lost.
    with _lease.Watch(p['lease']) as watch:
        if watch.lost:
            module.fail_json(msg=lost_msg % (p['url'], watch.lost) + '; nothing was measured',
                             lease_lost=watch.lost, changed=False)
        try:
            ends = {}
            if p['lease']:
                ends['on_start'] = lambda end_run: watch.on_lost(lambda why: end_run("the lease on the host's guard ran out"))
            bench = _bench.run_benchmark(cfg, **ends)
        except _bench.BenchError as exc:
            if watch.lost:
                module.fail_json(msg=lost_msg % (p['url'], watch.lost) + ' (%s)' % to_native(exc),
                                 lease_lost=watch.lost, changed=False)
            module.fail_json(msg='spec_bench against %s: %s' % (p['url'], to_native(exc)), changed=False)
    if watch.lost:
        module.fail_json(msg=lost_msg % (p['url'], watch.lost), lease_lost=watch.lost, bench=bench, changed=False)

    changed = False
    if p['output'] and not module.check_mode:
        try:
            changed = _files.write_if_changed(p['output'], json.dumps(bench, indent=2, sort_keys=True) + '\n')
        except OSError as exc:
            module.fail_json(msg='cannot write output %s: %s' % (p['output'], to_native(exc)), bench=bench, changed=False)

    if bench['ok'] == 0:
        kinds = {}
        for level in bench['levels']:
            for kind, n in level['error_kinds'].items():
                kinds[kind] = kinds.get(kind, 0) + n
        first = next((lv['first_error'] for lv in bench['levels'] if lv['first_error']), None)
        module.fail_json(msg='spec_bench against %s: no request succeeded (%s); first error: %s' % (
            p['url'], ', '.join('%d %s' % (n, k) for k, n in sorted(kinds.items())), first),
            bench=bench, changed=changed)
    msg = _bench.describe(bench, p['run_timeout'])
    if bench['run_timeout_reached']:
        module.warn(msg)
    module.exit_json(changed=changed, bench=bench, msg=msg)


if __name__ == '__main__':
    main()
