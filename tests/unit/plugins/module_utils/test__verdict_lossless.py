# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lossless check: digests of greedy outputs (_bench_outputs) compared by the verdict (_verdict_lossless, _verdict).

Every case builds its digests from texts, so what is compared is what spec_bench would have digested.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.specdec.plugins.module_utils import _bench_outputs as bo
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict as v
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_stats as vs
from ansible_collections.llmops.specdec.plugins.module_utils import _verdict_lossless as vl

TEXT = "".join(" word%d" % i for i in range(60))   # 60 words, 426 characters


class Result:
    """What collect() reads of a _bench_stream.RequestResult."""

    def __init__(self, text, ok=True):
        self.ok = ok
        self.text = [text[:10], text[10:]] if ok else None


def outputs(texts, level=1, categories=None):
    """The outputs spec_bench keeps for prompts whose greedy outputs are ``texts``."""
    prompts = [((categories or {}).get(i, "reasoning"), "prompt %d" % i) for i in range(len(texts))]
    return bo.collect([Result(t) for t in texts], level, prompts, limit=len(texts))


def changed(text, at):
    return text[:at] + ("X" if text[at] != "X" else "Y") + text[at + 1:]


# ---------------------------------------------------------------- digests

def test_first_difference_is_the_block_of_the_first_changed_character():
    one = bo.digest(TEXT)
    assert bo.first_difference(one, bo.digest(TEXT)) is None
    for at in (0, 31, 32, 70, len(TEXT) - 1):
        first, last = bo.first_difference(one, bo.digest(changed(TEXT, at)))
        assert first <= at <= last and last - first < bo.BLOCK_CHARS and first % bo.BLOCK_CHARS == 0, at
    # one text a prefix of the other: where the shorter one ends (within its last block)
    first, last = bo.first_difference(one, bo.digest(TEXT[:100]))
    assert first <= 100 <= last + 1
    # characters, not bytes: a multi-byte character counts one
    assert bo.first_difference(bo.digest("é" * 40), bo.digest("é" * 33 + "e" + "é" * 6)) == [32, 39]


def test_collect_takes_the_first_success_per_prompt_and_says_when_a_prompt_is_not_repeatable():
    prompts = [("coding", "p0"), ("chat", "p1"), ("chat", "p2")]
    # round-robin over three prompts; prompt 1's first request failed, prompt 2 is beyond lossless_prompts
    results = [Result("a0"), Result("", ok=False), Result("c0"), Result("a0"), Result("b0"), Result("c1"),
               Result("a1")]
    out = bo.collect(results, 1, prompts, limit=2)
    assert out["level"] == 1 and out["temperature"] == 0.0
    rows = {row["index"]: row for row in out["prompts"]}
    assert sorted(rows) == [0, 1]
    assert rows[0]["sha256"] == bo.digest("a0")["sha256"] and rows[0]["stable"] is False  # a0, a0, a1
    assert rows[1]["sha256"] == bo.digest("b0")["sha256"] and rows[1]["stable"] is True
    assert rows[1]["category"] == "chat" and rows[1]["prompt_sha256"] != rows[0]["prompt_sha256"]
    assert bo.collect(results, 1, prompts, limit=0)["skipped"] == "lossless_prompts is 0"
    assert bo.collect(results, 1, prompts, limit=0)["prompts"] == [] and out["skipped"] is None
    assert "not greedy" in bo.collect(results, 1, prompts, limit=2, temperature=0.7)["skipped"]


# ---------------------------------------------------------------- the comparison

def test_identical_outputs_pass_with_divergence_zero():
    out = vl.compare(outputs([TEXT] * 8), outputs([TEXT] * 8), 0.0)
    assert out["status"] == "pass" and out["rate"] == 0.0 and out["compared"] == 8 and out["prompts"] == []
    assert out["why"] == "outputs identical to the baseline on 8/8 prompts (greedy, c=1)"


def test_outputs_that_differ_fail_naming_prompts_and_characters():
    cand = [TEXT] * 8
    cand[3] = changed(TEXT, 70)
    cand[5] = changed(TEXT, 0)
    out = vl.compare(outputs([TEXT] * 8), outputs(cand, categories={5: "coding"}), 0.0)
    assert out["status"] == "fail" and out["differ"] == 2 and out["rate"] == pytest.approx(0.25)
    assert [(p["index"], p["chars"]) for p in out["prompts"]] == [(3, [64, 95]), (5, [0, 31])]
    assert out["why"] == ("outputs differ from the baseline on 2/8 prompts (25.0%, allowed 0.0%): "
                          "prompt 3 (reasoning) from characters 64-95; prompt 5 (coding) from characters 0-31")


def test_a_share_within_the_limit_passes_and_a_lossy_sampler_only_reports():
    cand = [TEXT] * 8
    cand[2] = changed(TEXT, 200)
    assert vl.compare(outputs([TEXT] * 8), outputs(cand), 0.125)["status"] == "pass"
    assert vl.compare(outputs([TEXT] * 8), outputs(cand), 0.1)["status"] == "fail"
    every = [changed(TEXT, 5)] * 8
    lossy = vl.compare(outputs([TEXT] * 8), outputs(every), 0.0, lossy=True)
    assert lossy["status"] == "pass" and lossy["rate"] == 1.0 and lossy["lossy_sampler"] is True
    assert "lossy sampler by the operator's opt-in" in lossy["why"] and "and 3 more" in lossy["why"]


def test_sides_that_cannot_be_compared_say_why():
    assert "no output digests (measured by an older version)" in vl.compare(None, outputs([TEXT]), 0.0)["skipped"]
    off = bo.collect([Result(TEXT)], 1, [("chat", "p")], limit=0)
    assert "not digested (lossless_prompts is 0)" in vl.compare(outputs([TEXT]), off, 0.0)["skipped"]
    assert "c=1, the candidate's of c=8" in vl.compare(outputs([TEXT]), outputs([TEXT], level=8), 0.0)["skipped"]
    other = outputs([TEXT])
    other["prompts"][0]["prompt_sha256"] = "0" * 16   # another prompt at the same index
    assert vl.compare(outputs([TEXT]), other, 0.0) == {"skipped": "no prompt digested on both sides"}


def test_rounds_merge_keeping_the_first_digest_of_each_prompt():
    first = outputs([TEXT, TEXT])
    first["prompts"] = first["prompts"][:1]
    second = outputs([changed(TEXT, 1), TEXT])
    merged = vl.merge([first, second])
    assert [row["index"] for row in merged["prompts"]] == [0, 1]
    assert merged["prompts"][0]["sha256"] == bo.digest(TEXT)["sha256"]


# ---------------------------------------------------------------- in the verdict

def level(c, tok_s):
    return {"concurrency": c, "output_tok_s": tok_s, "tpot_ms": {"median": 10.0}, "ttft_ms": {"median": 50.0},
            "errors": 0, "ok": 24}


def bench(tok_s, texts):
    return {"levels": [level(1, tok_s), level(8, tok_s * 6)], "outputs": outputs(texts)}


def test_a_faster_candidate_whose_outputs_differ_is_rolled_back_first():
    base = vs.summarize(bench(80.0, [TEXT] * 8))
    assert base["outputs"]["prompts"][0]["sha256"] == bo.digest(TEXT)["sha256"]   # the stored baseline keeps them
    same = v.decide(base, bench(120.0, [TEXT] * 8))
    assert same["decision"] == "keep" and same["lossless"]["rate"] == 0.0
    assert same["checks"][0]["figure"] == "outputs" and same["checks"][0]["status"] == "pass"
    cand = [TEXT] * 8
    cand[6] = changed(TEXT, 100)
    out = v.decide(base, bench(120.0, cand), final=False)
    assert out["decision"] == "rollback" and out["verdict"] == "rollback"
    assert out["reason"] == ("c=1 outputs differ from the baseline on 1/8 prompts (12.5%, allowed 0.0%): "
                             "prompt 6 (reasoning) from characters 96-127")
    assert out["lossless"]["differ"] == 1
    # an operator's share of 1/8 lets it through; so does the opt-in for a lossy sampler, which reports it
    assert v.decide(base, bench(120.0, cand), {"max_output_divergence": 0.125})["decision"] == "keep"
    lossy = v.decide(base, bench(120.0, cand), lossy=True)
    assert lossy["decision"] == "keep" and "outputs differ from the baseline on 1/8" in lossy["reason"]


def test_without_digests_on_a_side_the_verdict_is_as_before_and_says_why():
    base = vs.summarize({"levels": [level(1, 80.0), level(8, 480.0)]})
    out = v.decide(base, bench(120.0, [TEXT] * 8))
    assert out["decision"] == "keep" and "no output digests" in out["lossless"]["skipped"]
    assert all(c["figure"] != "outputs" for c in out["checks"])


def test_max_output_divergence_is_a_share():
    assert v.thresholds()["max_output_divergence"] == 0.0
    with pytest.raises(v.VerdictError, match="max_output_divergence is a share"):
        v.thresholds({"max_output_divergence": 2})


def test_a_stored_baseline_without_digests_does_not_stand_while_the_check_is_on():
    settings = {"host": "h", "engine": "vllm", "model": "m", "suite": "reasoning", "api": "completions",
                "concurrency": [1, 8], "max_tokens": 256, "warmup": 1, "ignore_eos": True, "unit_sha256": "x"}
    samples = {"e2e_ms": [100.0] * 24, "output_tokens": [256] * 24, "tpot_ms": [10.0] * 24, "ttft_ms": [50.0] * 24}
    levels = {"1": dict(level(1, 80.0), samples=samples), "8": dict(level(8, 480.0), samples=samples)}
    stored = {"measured_epoch": 1000.0, "settings": settings, "summary": vs.summarize({"levels": list(levels.values())})}
    for lv in stored["summary"]["levels"].values():
        lv["samples"] = samples
    on = dict(settings, lossless_prompts=8)
    assert v.baseline_check(stored, settings, now=1000.0)["usable"] is True
    old = v.baseline_check(stored, on, now=1000.0)
    assert old["usable"] is False and "no output digests for the lossless check" in old["why"]
    stored["summary"]["outputs"] = outputs([TEXT] * 8)
    assert v.baseline_check(stored, on, now=1000.0)["usable"] is True


# ---------------------------------------------------------------- the role's settings, the report, the textfile

SETTINGS = {"suite": "reasoning", "bench_api": "completions", "bench_concurrency": [1, 8], "bench_requests": 8,
            "bench_warmup": 1, "bench_max_tokens": 256, "bench_timeout": 120, "missing_baseline": "measure",
            "reclaim_scope": "gpu", "reclaim_verify_timeout": 60, "state_dir": "/var/lib/llmops-specdec",
            "lock_path": "/run/llmops-specdec.lock", "lock_wait": 0, "textfile_dir": ""}


@pytest.mark.parametrize("key, value, match", [
    ("lossless_prompts", -1, "spec_switch_lossless_prompts must be between 0"),
    ("lossless_prompts", "8; rm", "spec_switch_lossless_prompts must be an integer"),
    ("lossy_sampler", "maybe", "spec_switch_lossy_sampler must be a boolean"),
])
def test_the_gate_checks_the_lossless_settings(key, value, match):
    from ansible_collections.llmops.specdec.plugins.module_utils import _gate, _switch
    out = _switch.settings(SETTINGS)
    assert out["lossless_prompts"] == 8 and out["lossy_sampler"] is False
    assert _switch.settings(dict(SETTINGS, lossy_sampler="yes"))["lossy_sampler"] is True
    with pytest.raises(_gate.GateError) as info:
        _switch.settings(dict(SETTINGS, **{key: value}))
    assert match in str(info.value)


def test_report_and_textfile_carry_the_divergence():
    from ansible_collections.llmops.specdec.plugins.module_utils import _prom, _report
    cand = [TEXT] * 8
    cand[6] = changed(TEXT, 100)
    verdict = v.decide(vs.summarize(bench(80.0, [TEXT] * 8)), bench(120.0, cand))
    rec = {"host": "gpu1", "engine": "vllm", "model": "m", "suite": "reasoning", "label": "eagle3 k=3",
           "candidate": {"method": "eagle3"}, "outcome": "rolled_back", "decision": "rollback",
           "reason": verdict["reason"], "speedup": verdict["speedup"], "lossless": verdict["lossless"],
           "baseline": None, "result": None}
    md = _report.markdown([rec], "now")
    assert "ROLLED BACK eagle3 k=3 on reasoning" in md and "outputs differ from the baseline on 1/8 prompts" in md
    assert ("- gpu1 eagle3 k=3: FAILED, divergence 12.5% (1/8 prompts) - outputs differ from the baseline on 1/8 "
            "prompts (12.5%, allowed 0.0%): prompt 6 (reasoning) from characters 96-127") in md
    text = _prom.switch_textfile(rec, 0)
    assert 'llmops_specdec_switch_output_divergence{method="eagle3",suite="reasoning"} 0.125' in text
    skipped = dict(rec, lossless={"skipped": "the baseline has no output digests"})
    assert "- gpu1 eagle3 k=3: not compared - the baseline has no output digests" in _report.markdown([skipped], "now")
    assert "output_divergence{" not in _prom.switch_textfile(skipped, 0)
