"""End to end: two runs of the suite on the reference engine, then ``engine-acceptance diff`` of their bundles.

Issue 29's four proofs, each a NEW run against one shared BASE run (made once per self-test
run, whichever xdist worker asks first): (a) the same run again shows no significant change
anywhere; (b) a latency model 30% slower shows TTFT and TPOT regressions, significant, with
intervals above zero; (c) an injected defect puts its check's passed -> failed at the top of
the checks, before any performance finding; (d) the defect BASE had a record for is gone, so
the record went stale: "fixed". (c) and (d) are one run: it injects another defect than BASE.
Issue 41's proof is a fifth: (e) an engine that holds its answer back to the end of its reasoning
(``content-at-end``) and whose draft tokens are accepted a quarter as often
(``spec-decode-rejects``) shows the first content token's regression, with TTFT and the first
reasoning token unchanged, and the acceptance's drop in the rates; the cached prompt tokens the
engine reports (its prefix cache serves the cell's repeated prompt) are compared too, and unchanged.

Every run is small: the usage and max_tokens checks (text), one throughput cell of 8
requests a round for 3 rounds, the same prompts in every run (``--throughput-seed``), and one
media cell (the video, whose reply reasons and then answers in a sentence) of 8 requests a
round, with a latency model slow enough (40 ms to the first token, 4 ms a token) that a busy
CPU's scheduling noise stays under the tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_files import made_once_per_run
from suite_runner import run_suite

from engine_acceptance.diff.bundle import read_bundle
from engine_acceptance.diff.command import main
from engine_acceptance.diff.compare_runs import (
    CHECKS,
    IMPROVEMENT,
    PERFORMANCE,
    RATES,
    REGRESSION,
    SECTIONS,
    UNCHANGED,
    VERDICT,
    DiffReport,
    compare_bundles,
)

pytestmark = pytest.mark.e2e

USAGE_CHECK = "test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion"
MAX_TOKENS_CHECK = "test_text.py::test_max_tokens_cuts_the_reply_with_finish_reason_length"
RECORDS = f"""
records:
  - check: "{USAGE_CHECK}[*]"
    engine: vllm
    model: "^reference-model$"
    reason: the engine adds one to total_tokens (injected for the self-test)
    source: selftest
    date: "2026-12-04"
    failure:
      message: 'usage\\.total_tokens=\\d+ but prompt_tokens \\+ completion_tokens'
"""
SELECTION = ("-m", "text or throughput", "-k", "usage_is_present or max_tokens_cuts or fixed_length or media_load",
             "--throughput-shapes=32/16@2x8", "--throughput-rounds=3", "--throughput-seed=1",
             "--media-shapes=video-16frames@2x8")
THROUGHPUT_CELL, MEDIA_CELL = "throughput 32/16@2", "media_throughput video-16frames@2"
LATENCY = "--reference-latency=40,4"
SLOWER = "--reference-latency=52,5.2"  # 30% slower to the first token and per token


def _run(pytester: pytest.Pytester, *args: str) -> Path:
    """One small run; its bundle's run.json."""
    records = pytester.path / "records.yaml"
    records.write_text(RECORDS, encoding="utf-8")
    bundle = pytester.path / "bundle"
    result, _ = run_suite(pytester, *SELECTION, f"--expectations={records}", f"--run-bundle={bundle}", *args)
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    return bundle / "run.json"


@pytest.fixture
def base(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BASE: the usage defect injected and recorded (a known defect), made once for the whole self-test run."""
    def make(path: Path) -> None:
        _run(pytester, LATENCY, "--inject=bad-usage").replace(path)

    return made_once_per_run(tmp_path_factory, "diff-base-run.json", make)


def _diff(base: Path, new: Path) -> DiffReport:
    return compare_bundles(read_bundle(base), read_bundle(new))


def test_two_clean_runs_show_no_significant_change(pytester: pytest.Pytester, base: Path) -> None:
    new = _run(pytester, LATENCY, "--inject=bad-usage")
    report = _diff(base, new)
    performance = report.of(PERFORMANCE)
    assert performance and not report.not_compared, report.not_compared
    assert all(f.kind == UNCHANGED and not f.significant for f in report.findings), [
        (f.subject, f.metric, f.change, f.low, f.high) for f in report.findings if f.kind != UNCHANGED]
    assert main([str(base), str(new)]) == 0


def test_a_30_percent_slower_engine_shows_significant_ttft_and_tpot_regressions(
        pytester: pytest.Pytester, base: Path) -> None:
    new = _run(pytester, SLOWER, "--inject=bad-usage")
    report = _diff(base, new)
    for metric in ("P50 TTFT", "P50 TPOT"):
        [finding] = [f for f in report.of(PERFORMANCE) if f.metric == metric and f.subject == THROUGHPUT_CELL]
        assert finding.kind == REGRESSION and finding.significant, finding
        assert 0.05 < finding.low <= finding.change <= finding.high, finding
    assert not report.of(CHECKS) and main([str(base), str(new)]) == 1


def test_an_injected_defect_fails_its_check_at_the_top_and_the_stale_record_is_fixed(
        pytester: pytest.Pytester, base: Path) -> None:
    new = _run(pytester, LATENCY, "--inject=max-tokens-ignored")
    report = _diff(base, new)
    # The gate's change first, then the records that went stale, then the checks' changes.
    assert (report.findings[0].subject, report.findings[0].kind) == ("gate", REGRESSION)
    fixed = [f for f in report.of(VERDICT) if f.metric.startswith("fixed")]
    assert {f.subject for f in fixed} == {f"{USAGE_CHECK}[non-streamed]", f"{USAGE_CHECK}[streamed]"}
    assert all(f.kind == IMPROVEMENT and (f.base, f.new) == ("known_defect", "stale_record") for f in fixed)
    checks = report.of(CHECKS)
    assert {(f.subject, f.base, f.new, f.kind) for f in checks} == {
        (f"{MAX_TOKENS_CHECK}[{mode}]", "passed", "failed", REGRESSION) for mode in ("non-streamed", "streamed")}
    assert "finish_reason 'length'" in checks[0].note
    sections = [SECTIONS.index(f.section) for f in report.findings]
    assert sections == sorted(sections)


def test_an_answer_held_to_the_end_and_rejected_drafts_show_in_the_split_and_the_acceptance_rate(
        pytester: pytest.Pytester, base: Path) -> None:
    new = _run(pytester, LATENCY, "--inject=bad-usage", "--inject=content-at-end", "--inject=spec-decode-rejects")
    report = _diff(base, new)
    media = {f.metric: f for f in report.of(PERFORMANCE) if f.subject == MEDIA_CELL}
    # The answer now leaves after its last token: its first token is late by the answer's length; the first
    # output, the reasoning, is not.
    content = media["P50 first content token"]
    assert content.kind == REGRESSION and content.significant and content.low > 0.2, content
    for unchanged in ("P50 TTFT", "P50 first reasoning token", "reasoning tokens/request", "content tokens/request",
                      "cached share of prompt tokens"):
        assert media[unchanged].kind == UNCHANGED, media[unchanged]
    # The engine's prefix cache serves the repeated video prompt in both runs alike: a share, the same in each.
    cached = media["cached share of prompt tokens"]
    assert cached.base == cached.new and cached.base != "0.0%", cached
    # The completions cell has no reasoning to split, so no such figure.
    assert not [f for f in report.of(PERFORMANCE) if f.subject == THROUGHPUT_CELL and "content" in f.metric]
    acceptance = {f.metric: f for f in report.of(RATES) if f.metric.startswith("spec_decode_acceptance")}
    assert set(acceptance) == {"spec_decode_acceptance[32/16@2]", "spec_decode_acceptance[video-16frames@2]"}
    for rate in acceptance.values():
        # 0.8 then 0.2 accepted per draft token, to a token: the counters are served whole.
        assert rate.kind == REGRESSION and rate.significant and -0.62 < rate.change < -0.58, rate
    assert not report.of(CHECKS) and main([str(base), str(new)]) == 1
