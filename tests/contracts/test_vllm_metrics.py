# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM 0.33's own Prometheus code judges the collection's acceptance reading and the mock's /metrics.

`SpecDecodingProm` (vllm/v1/spec_decode/metrics.py) is fed known drafts through `SpecDecodingStats`;
its exposition (prometheus_client's `generate_latest`, what `/metrics` serves) goes through the
collection's parsers (prometheus_client's and the fallback) and `vllm_acceptance`. The full
`PrometheusStatLogger` (vllm/v1/metrics/loggers.py), built from a real VllmConfig of a tiny local
model, gives every family name, type, label set and bucket list the mock must match.
"""
from __future__ import annotations

import functools
import json
import time

import pytest

pytest.importorskip("vllm")

# pylint: disable=wrong-import-position
import prometheus_client  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.v1.metrics.loggers import PrometheusStatLogger  # noqa: E402
from vllm.v1.spec_decode.metrics import SpecDecodingProm, SpecDecodingStats  # noqa: E402

from ansible_collections.llmops.specdec.plugins.module_utils import _bench, _engine_vllm, _http, _prom  # noqa: E402

from conftest import MOCK  # noqa: E402


# The engines' metric names and readers, from their adapters (moved out of _prom with the engine adapters).
VLLM = _engine_vllm.ACCEPTANCE_METRICS
VLLM_PREFIX, DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = (VLLM[k] for k in ('prefix', 'drafts', 'draft_tokens', 'accepted', 'per_pos'))


def vllm_acceptance(before, after):
    return _prom.counter_acceptance(before, after, VLLM, _engine_vllm.ACCEPTANCE_SOURCE)


K = 3
LABELS = ["model_name", "engine"]  # PrometheusStatLogger's labelnames
# accepted drafts of each verification step (each proposes K tokens)
FIRST = [0, 1, 3, 2, 3, 0, 1]
SECOND = [3, 3, 2, 0, 1]


@pytest.fixture(scope="module")
def vllm_config(tiny_models):
    args = EngineArgs(model=tiny_models["target"], skip_tokenizer_init=True, served_model_name=["m"], max_model_len=1024,
                      speculative_config={"method": "ngram", "num_speculative_tokens": K})
    return args.create_engine_config()


class _Server:
    """One engine lifetime: SpecDecodingProm on its own registry (a restart is a new one)."""

    def __init__(self, speculative_config):
        self.registry = prometheus_client.CollectorRegistry()
        cls = type("IsolatedSpecDecodingProm", (SpecDecodingProm,),
                   {"_counter_cls": staticmethod(functools.partial(prometheus_client.Counter, registry=self.registry))})
        self.prom = cls(speculative_config, LABELS, {0: ["m", "0"]})

    def run(self, accepted_per_step):
        stats = SpecDecodingStats.new(K)
        for accepted in accepted_per_step:
            stats.observe_draft(num_draft_tokens=K, num_accepted_tokens=accepted)
        self.prom.observe(stats, 0)

    def scrape(self):
        return prometheus_client.generate_latest(self.registry).decode()


def _expected(steps, reset=False):
    drafts, accepted = len(steps), sum(steps)
    return {"drafts": drafts, "draft_tokens": K * drafts, "accepted_tokens": accepted,
            "acceptance_rate": accepted / (K * drafts), "mean_acceptance_length": 1 + accepted / drafts,
            "per_position": [sum(1 for a in steps if a > i) / drafts for i in range(K)], "counter_reset": reset}


def _assert_same(acc, want):
    for key, value in want.items():
        assert acc[key] == pytest.approx(value), key


def _counters(text, parser):
    return _prom.counters(parser(text), VLLM_PREFIX)


PARSERS = {"prometheus_client": _prom.parse_text, "fallback": _prom.parse_text_small}


@pytest.mark.parametrize("parser", list(PARSERS))
def test_window_between_two_scrapes_is_exactly_what_the_engine_counted(vllm_config, parser):
    server = _Server(vllm_config.speculative_config)
    server.run(FIRST)
    before = _counters(server.scrape(), PARSERS[parser])
    server.run(SECOND)
    acc = vllm_acceptance(before, _counters(server.scrape(), PARSERS[parser]))
    _assert_same(acc, _expected(SECOND))


@pytest.mark.parametrize("parser", list(PARSERS))
@pytest.mark.parametrize("case", ["restart, fewer counts", "restart, counts past the old values"])
def test_a_restart_between_scrapes_counts_only_the_new_lifetime(vllm_config, parser, case):
    old = _Server(vllm_config.speculative_config)
    old.run(FIRST if case.startswith("restart, fewer") else SECOND[:1])
    before = _counters(old.scrape(), PARSERS[parser])
    time.sleep(0.01)  # a new process: its counters' _created differ
    new = _Server(vllm_config.speculative_config)
    new.run(SECOND)
    acc = vllm_acceptance(before, _counters(new.scrape(), PARSERS[parser]))
    _assert_same(acc, _expected(SECOND, reset=True))


def test_no_speculation_exports_no_spec_counters():
    prom = SpecDecodingProm(None, LABELS, {0: ["m", "0"]})
    assert not prom.spec_decoding_enabled  # no counters are created at all
    assert vllm_acceptance({}, _counters("", _prom.parse_text)) is None


def _families(text):
    """{family: (type, documentation, {sample name: set of label-name tuples}, {label: values})}."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        samples, values = {}, {}
        for s in fam.samples:
            samples.setdefault(s.name, set()).add(tuple(sorted(s.labels)))
            for key, val in s.labels.items():
                if key not in ("model_name",):
                    values.setdefault((s.name, key), set()).add(val)
        out[fam.name] = (fam.type, fam.documentation, samples, values)
    return out


@pytest.fixture(scope="module")
def real_families(vllm_config):
    PrometheusStatLogger(vllm_config, [0])  # registers on the default registry (it unregisters vLLM's first)
    return _families(prometheus_client.generate_latest().decode())


@pytest.fixture(scope="module")
def mock_vllm(mock_host):
    engine = MOCK.Engine.vllm(mock_host, "--served-model-name", "m", "--speculative-config",
                              json.dumps({"method": "ngram", "num_speculative_tokens": K}),
                              env=mock_host.env(CUDA_VISIBLE_DEVICES="1"))
    engine.wait_ready()
    code, _body = engine.post("/v1/completions", {"model": "m", "prompt": MOCK.REPETITIVE, "max_tokens": 12,
                                                  "ignore_eos": True})
    assert code == 200
    yield engine
    engine.kill_group()


def _mock_text(engine):
    conn = MOCK.http.client.HTTPConnection("127.0.0.1", engine.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        return resp.getheader("content-type"), resp.read().decode()
    finally:
        conn.close()


def test_mock_metrics_have_the_engines_names_types_labels_and_buckets(mock_vllm, real_families):
    # (the Content-Type header is left out: vLLM serves /metrics through prometheus_fastapi_instrumentator,
    # which this venv lacks; the collection does not read the header)
    _ctype, text = _mock_text(mock_vllm)
    mock = _families(text)
    assert set(mock) <= set(real_families), sorted(set(mock) - set(real_families))
    for name, (mtype, doc, samples, values) in mock.items():
        rtype, rdoc, rsamples, rvalues = real_families[name]
        assert (mtype, doc) == (rtype, rdoc), name
        assert samples == rsamples, name
        assert values == rvalues, name  # engine index, finished_reason, position, le (buckets)
    spec = [n for n in real_families if n.startswith("vllm:spec_decode")]
    assert sorted(spec) == sorted(n for n in mock if n.startswith("vllm:spec_decode"))


def test_the_prefix_cache_counters_the_adapter_reads_are_vllms(real_families, mock_vllm):
    """PREFIX_CACHE_METRICS (the verdict's prefix-cache guardrail) name counters PrometheusStatLogger exports; the
    mock exports them with the same samples (test above); the collection's probe reads a repeated prompt's hits."""
    from ansible_collections.llmops.specdec.plugins.module_utils import _bench_accept, _http  # noqa: E402
    for key in ("hits", "queries"):
        name = _engine_vllm.PREFIX_CACHE_METRICS[key]
        family = real_families[name[:-len("_total")]]
        assert family[0] == "counter" and name in family[2], name
    probe = _bench_accept.PrefixCacheProbe(_http.DirectTransport(10), "http://127.0.0.1:%d/v1" % mock_vllm.port, "vllm")
    probe.start()
    for _i in range(2):
        code, _body = mock_vllm.post("/v1/completions", {"model": "m", "prompt": MOCK.REPETITIVE, "max_tokens": 2})
        assert code == 200
    out = probe.finish()
    assert out["error"] is None and out["queries"] > 0 and 0 < out["hits"] <= out["queries"]


def test_the_collection_reads_the_mock_like_the_engine(mock_vllm):
    _ctype, before_text = _mock_text(mock_vllm)
    before = _counters(before_text, _prom.parse_text)
    code, body = mock_vllm.post("/v1/completions", {"model": "m", "prompt": MOCK.REPETITIVE, "max_tokens": 40,
                                                    "ignore_eos": True})
    assert code == 200
    acc = vllm_acceptance(before, _counters(_mock_text(mock_vllm)[1], _prom.parse_text))
    # every token after the first comes from a verification step: 1 + accepted each
    assert body["usage"]["completion_tokens"] == 1 + acc["drafts"] + acc["accepted_tokens"]
    assert acc["draft_tokens"] == K * acc["drafts"] and not acc["counter_reset"]
    assert len(acc["per_position"]) == K


def test_the_running_request_gauge_the_levels_are_read_from_is_vllms(mock_vllm, real_families):
    """Issue 32, item 4: the adapter's RUNNING_GAUGE is a gauge vLLM exports, with the labels it filters on, and the
    collection reads it from the mock as from the engine (idle: 0 running)."""
    gauge = _engine_vllm.RUNNING_GAUGE
    rtype, _doc, rsamples, _values = real_families[gauge["name"]]
    assert rtype == "gauge"
    assert all(set(gauge["only"]) <= set(labels) for labels in rsamples[gauge["name"]])
    value, err = _bench.running_now(_http.DirectTransport(5.0), "http://127.0.0.1:%d" % mock_vllm.port, _engine_vllm)
    assert (value, err) == (0.0, None)
