# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_prom.acceptance_textfile: the nightly acceptance watch as node_exporter textfile lines."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _prom, _watch
from ansible_collections.llmops.specdec.tests.unit.plugins.module_utils.test__watch import KEPT, UNIT, bench, level, stored

LABELS = {"host": "gpu1", "unit": "vllm-server.service", "suite": "reasoning"}


def series(text):
    """{(name, frozenset(labels)): value} by the fallback parser, checked against prometheus_client's when installed."""
    small = {(n, frozenset(lb.items())): v for n, lb, v in _prom.parse_text_small(text)}
    if _prom.PARSER.get() is not None:
        assert {(n, frozenset(lb.items())): v for n, lb, v in _prom.parse_text(text)} == small
    return small


def value(parsed, name, **labels):
    return parsed[(name, frozenset(dict(LABELS, **labels).items()))]


def test_a_drop_is_exported_per_position_with_both_rates():
    watch = _watch.watch(stored(KEPT), bench(level(1, 12000, [0.6, 0.38, 0.3])), UNIT)
    text = _prom.acceptance_textfile(watch, LABELS, 1764547200.7)
    assert text.endswith("\n")
    parsed = series(text)
    assert value(parsed, "llmops_specdec_acceptance_judged") == 1
    assert value(parsed, "llmops_specdec_acceptance_dropped") == 1
    assert [value(parsed, "llmops_specdec_acceptance_drop", position=str(i)) for i in range(3)] == [0, 1, 0]
    assert value(parsed, "llmops_specdec_acceptance_rate", position="1", when="kept") == pytest.approx(0.45)
    assert value(parsed, "llmops_specdec_acceptance_rate", position="1", when="now") == pytest.approx(0.38)
    assert value(parsed, "llmops_specdec_acceptance_length", when="kept") == pytest.approx(2.35)
    assert value(parsed, "llmops_specdec_acceptance_watch_timestamp_seconds") == 1764547200
    assert "# TYPE llmops_specdec_acceptance_drop gauge" in text
    assert len(parsed) == 1 + 1 + 1 + 3 + 6 + 2


def test_not_judged_never_raises_the_flag_and_still_shows_tonight():
    watch = _watch.watch(None, bench(level(1, 1000, [0.5, 0.25])), UNIT)
    parsed = series(_prom.acceptance_textfile(watch, LABELS))
    assert value(parsed, "llmops_specdec_acceptance_judged") == 0
    assert value(parsed, "llmops_specdec_acceptance_dropped") == 0
    assert not [k for k in parsed if k[0] == "llmops_specdec_acceptance_drop"]
    assert value(parsed, "llmops_specdec_acceptance_rate", position="0", when="now") == 0.5
    assert value(parsed, "llmops_specdec_acceptance_length", when="now") == 1.75
    assert not [k for k in parsed if k[0] == "llmops_specdec_acceptance_watch_timestamp_seconds"]


def test_label_values_are_escaped_and_an_empty_watch_renders():
    text = _prom.acceptance_textfile({}, [("host", 'a"b\\c\nd')])
    assert 'llmops_specdec_acceptance_judged{host="a\\"b\\\\c\\nd"} 0' in text
    assert series(text)[("llmops_specdec_acceptance_dropped", frozenset({"host": 'a"b\\c\nd'}.items()))] == 0
