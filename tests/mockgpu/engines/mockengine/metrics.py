# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine statistics and their Prometheus text (prometheus_client's layout)."""
import threading
import time

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
               5.0, 7.5, 10.0, 20.0, 40.0, 80.0)


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value):
        self.count += 1
        self.sum += value
        for i, upper in enumerate(self.buckets):
            if value <= upper:
                self.counts[i] += 1


def _fmt(value):
    return repr(float(value))


def _labels(pairs):
    return "{" + ",".join('%s="%s"' % (k, str(v).replace('"', '\\"')) for k, v in pairs) + "}"


class Stats:
    """Everything the engines count. Updated under `lock` exactly as tokens are emitted."""

    def __init__(self, spec_depth=0):
        self.lock = threading.Lock()
        self.created = time.time()
        self.spec_depth = spec_depth
        self.running = 0
        self.waiting = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        # Prefix cache (vLLM's prefix_cache_queries/hits, SGLang's cached_tokens): prompts seen before, by text.
        self.prefix_queries = 0
        self.prefix_hits = 0
        self._seen_prompts = set()
        # vllm.v1.engine.FinishReason: every reason has its series from the start
        self.success = {"stop": 0, "length": 0, "abort": 0, "error": 0, "repetition": 0}
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.accepted_per_pos = [0] * spec_depth
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)  # per streamed chunk, as vLLM's ITL under speculation
        self.tpot = Histogram(ITL_BUCKETS)  # per request: decode time / (tokens - 1)
        self.e2e = Histogram(E2E_BUCKETS)
        # SGLang's gauges: accept length and throughput over the latest ~1 s window.
        self._win_start = time.monotonic()
        self._last_token = 0.0
        self._win_tokens = 0
        self._win_steps = 0
        self._win_spec_tokens = 0
        self.last_gen_throughput = 0.0
        self.last_accept_length = 0.0

    def record_spec_step(self, drafted, accepted):
        """Caller holds the lock. One verification step that proposed `drafted` tokens."""
        self.drafts += 1
        self.draft_tokens += drafted
        self.accepted += accepted
        for i in range(accepted):
            self.accepted_per_pos[i] += 1
        self._win_steps += 1
        self._win_spec_tokens += 1 + accepted

    def record_prefix(self, prompt, prompt_tokens, collapse=False):
        """Caller holds the lock. One request's prefix-cache lookup: a prompt seen before hits in whole blocks of
        16 tokens but the last token (vLLM computes at least one, as SGLang), a new one misses. Fault
        ``prefix_cache_collapse``: nothing hits (EAGLE/MTP with a hybrid cache: vLLM 54360, 53670, SGLang 32459)."""
        hit = 0
        if prompt in self._seen_prompts and not collapse:
            hit = ((prompt_tokens - 1) // 16) * 16
        self._seen_prompts.add(prompt)
        self.prefix_queries += prompt_tokens
        self.prefix_hits += hit
        return hit

    def record_tokens(self, count):
        """Caller holds the lock."""
        now = time.monotonic()
        if now - self._last_token > 1.0:  # idle before: measure from this token, not from the idle start
            self._win_start, self._win_tokens, self._win_steps, self._win_spec_tokens = now, 0, 0, 0
        self._last_token = now
        self.generation_tokens += count
        self._win_tokens += count
        if now - self._win_start >= 1.0:
            self.last_gen_throughput = self._win_tokens / (now - self._win_start)
            if self._win_steps:
                self.last_accept_length = self._win_spec_tokens / self._win_steps
            self._win_start, self._win_tokens, self._win_steps, self._win_spec_tokens = now, 0, 0, 0

    def gauges(self):
        """(gen throughput, accept length) of the latest window; caller holds the lock."""
        elapsed = time.monotonic() - self._win_start
        thr, acc = self.last_gen_throughput, self.last_accept_length
        if not thr and self._win_tokens and elapsed > 0:
            thr = self._win_tokens / elapsed
        if not acc and self._win_steps:
            acc = self._win_spec_tokens / self._win_steps
        return thr, acc

    def avg_accept_length(self):
        """Running average since start, bonus token included (SGLang's avg_spec_accept_length)."""
        return (self.drafts + self.accepted) / self.drafts if self.drafts else 0.0

    # -- Prometheus text -------------------------------------------------
    # prometheus_client 0.26's generate_latest (text format 0.0.4, what both engines serve): a counter's
    # HELP/TYPE name carries `_total`; every `_created` series is a gauge family of its own.
    def _created(self, out, name, help_text, label_sets):
        out.append("# HELP %s_created %s" % (name, help_text))
        out.append("# TYPE %s_created gauge" % name)
        for labels in label_sets:
            out.append("%s_created%s %s" % (name, _labels(labels), _fmt(self.created)))

    def _counter(self, out, name, help_text, samples):
        out.append("# HELP %s_total %s" % (name, help_text))
        out.append("# TYPE %s_total counter" % name)
        for labels, value in samples:
            out.append("%s_total%s %s" % (name, _labels(labels), _fmt(value)))
        if samples:  # a labelled counter without children has no _created family either
            self._created(out, name, help_text, [labels for labels, _value in samples])

    def _gauge(self, out, name, help_text, labels, value):
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s gauge" % name)
        out.append("%s%s %s" % (name, _labels(labels), _fmt(value)))

    def _histogram(self, out, name, help_text, labels, hist):
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s histogram" % name)
        for upper, count in zip(hist.buckets, hist.counts):
            # counts are cumulative already: observe() adds to every bucket whose bound >= value
            out.append("%s_bucket%s %s" % (name, _labels(labels + [("le", _fmt(upper))]), _fmt(count)))
        out.append("%s_bucket%s %s" % (name, _labels(labels + [("le", "+Inf")]), _fmt(hist.count)))
        out.append("%s_count%s %s" % (name, _labels(labels), _fmt(hist.count)))
        out.append("%s_sum%s %s" % (name, _labels(labels), _fmt(hist.sum)))
        self._created(out, name, help_text, [labels])

    def vllm_text(self, model_name, spec_enabled):
        base = [("model_name", model_name), ("engine", "0")]  # PrometheusStatLogger's labelnames
        out = []
        with self.lock:
            self._gauge(out, "vllm:num_requests_running", "Number of requests in model execution batches.", base, self.running)
            self._gauge(out, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", base, self.waiting)
            self._counter(out, "vllm:prompt_tokens", "Number of prefill tokens processed.", [(base, self.prompt_tokens)])
            self._counter(out, "vllm:generation_tokens", "Number of generation tokens processed.", [(base, self.generation_tokens)])
            self._counter(out, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                          [(base, self.prefix_queries)])
            self._counter(out, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                          [(base, self.prefix_hits)])
            self._counter(out, "vllm:request_success", "Count of successfully processed requests.",
                          [(base + [("finished_reason", k)], v) for k, v in self.success.items()])
            if spec_enabled:
                self._counter(out, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", [(base, self.drafts)])
                self._counter(out, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", [(base, self.draft_tokens)])
                self._counter(out, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", [(base, self.accepted)])
                self._counter(out, "vllm:spec_decode_num_accepted_tokens_per_pos",
                              "Accepted tokens per draft position.",
                              [(base + [("position", str(i))], v) for i, v in enumerate(self.accepted_per_pos)])
            self._histogram(out, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", base, self.ttft)
            self._histogram(out, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", base, self.itl)
            self._histogram(out, "vllm:request_time_per_output_token_seconds",
                            "Histogram of time_per_output_token_seconds per request.", base, self.tpot)
            self._histogram(out, "vllm:e2e_request_latency_seconds",
                            "Histogram of e2e request latency in seconds.", base, self.e2e)
        return "\n".join(out) + "\n"

    def sglang_text(self, model_name, spec_enabled):
        # observability/metrics_collector.py: scheduler gauges carry the scheduler's labels (tp_rank 0 only
        # exports them); tokenizer metrics model_name/engine_type, plus is_streaming on some (the mock
        # counts every request as streamed, which is what a benchmark sends).
        base = [("model_name", model_name), ("engine_type", "unified"), ("tp_rank", "0"), ("pp_rank", "0"),
                ("moe_ep_rank", "0")]
        tok = [("model_name", model_name), ("engine_type", "unified")]
        streamed = tok + [("is_streaming", "true")]
        out = []
        with self.lock:
            thr, acc = self.gauges()
            self._gauge(out, "sglang:num_running_reqs", "The number of running requests.", base, self.running)
            self._gauge(out, "sglang:num_queue_reqs", "The number of requests in the waiting queue.", base, self.waiting)
            self._gauge(out, "sglang:gen_throughput", "The generation throughput (token/s).", base, thr)
            self._gauge(out, "sglang:spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
                        base, acc if spec_enabled else 0.0)
            self._counter(out, "sglang:prompt_tokens", "Number of prefill tokens processed.", [(streamed, self.prompt_tokens)])
            self._counter(out, "sglang:generation_tokens", "Number of generation tokens processed.",
                          [(streamed, self.generation_tokens)])
            # a labelled counter without children exports no sample (prometheus_client): none before the first hit
            self._counter(out, "sglang:cached_tokens", "Number of cached prompt tokens by source (device/host/storage).",
                          [(tok + [("cache_source", "device")], self.prefix_hits)] if self.prefix_hits else [])
            self._histogram(out, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                            streamed, self.ttft)
            self._histogram(out, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok, self.itl)
            self._histogram(out, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                            streamed, self.e2e)
        return "\n".join(out) + "\n"
