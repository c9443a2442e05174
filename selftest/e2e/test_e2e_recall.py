"""End to end: the recall checks run by pytest against the reference engine.

A clean engine passes the 32K field extraction and the million-token check (the
reference engine takes a 1,048,576-token context); each recall defect fails exactly
the checks that exist for it, with a message naming the missing code, the count
difference or the wrong character. Runs go through ``pytester`` in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_runner import failed, run_suite

pytestmark = pytest.mark.e2e

RECALL = ("-m", "recall or recall_1m")
FIELD = "test_recall.py::test_field_extraction_returns_the_asked_key_exactly"
FIELD_KEYS = {f"{FIELD}[depth{depth}-key{key}]" for depth in (10, 50, 90) for key in (1, 2, 3)}
MILLION_CODES = "test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json"
ACCOUNTING = {
    "test_recall.py::test_field_extraction_prompt_tokens_match_the_engines_count",
    "test_recall.py::test_million_token_prompt_tokens_match_the_engines_count",
}
ALL_RECALL = FIELD_KEYS | ACCOUNTING | {
    MILLION_CODES, "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"}


def test_clean_engine_passes_the_32k_and_million_token_checks(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *RECALL)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert set(outcomes) == ALL_RECALL and set(outcomes.values()) == {"passed"}
    result.stdout.fnmatch_lines([
        "*recall prompt length: 1,047,488 tokens (profile 'reference' context length 1048576*",
        "*recall million: building a 1,047,488-token prompt (server POST /tokenize*",
        "*recall million: TTFT * s, E2E * s*",
        "*recall million: prompt tokens: text 1,047,488 *; conversation by the engine 1,047,493 (template +5); "
        "usage.prompt_tokens 1,047,493; difference +0 (tolerance 0)*",
    ])


@pytest.mark.parametrize(
    ("defect", "expected_failures", "message"),
    [
        ("drop-middle", {f"{FIELD}[depth50-key{key}]" for key in (1, 2, 3)} | {MILLION_CODES},
         "*in a 1,047,488-token prompt: the code at 50% depth, jade-50-1-*, is missing*"),
        ("usage-off-by-one", ACCOUNTING,
         "*usage.prompt_tokens is 1047494 but the engine's own /tokenize counts 1047493 for the same conversation: "
         "+1 tokens (tolerance 0)*"),
        ("corrupt-code", FIELD_KEYS | {MILLION_CODES},
         "*the code at 10% depth is wrong: jade-10-1-* instead of jade-10-1-* (character 16 is *, expected *)*"),
    ],
    ids=["drop-middle", "usage-off-by-one", "corrupt-code"],
)
def test_recall_defect_fails_exactly_its_checks_and_says_why(pytester: pytest.Pytester, tokenizer_json: Path,
                                                            defect: str, expected_failures: set[str],
                                                            message: str) -> None:
    # Counting locally halves the run; the clean run above covers counting with /tokenize.
    # corrupt-code's run sends the field prompts together: each check still judges its own reply.
    together = ("--recall-concurrency=3",) if defect == "corrupt-code" else ()
    result, outcomes = run_suite(pytester, *RECALL, "--inject", defect, f"--tokenizer={tokenizer_json}", *together)
    assert failed(outcomes) == expected_failures, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([message])
    if together:
        result.stdout.fnmatch_lines(["*recall: sending 10 prompts of one document 3 at a time "
                                     "(--recall-concurrency=3): their TTFT and E2E are not alone on the engine*"])
    assert result.ret == 1


def test_local_tokenizer_counts_like_the_engine(pytester: pytest.Pytester, tokenizer_json: Path) -> None:
    path = tokenizer_json
    result, outcomes = run_suite(pytester, "-m", "recall_1m", f"--tokenizer={path}")
    assert result.ret == 0 and set(outcomes.values()) == {"passed"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        f"*prompt tokens: text 1,047,488 (local tokenizer.json {path} *); text by the engine 1,047,488; "
        "conversation by the engine 1,047,493*difference +0*",
    ])


def test_short_recall_tokens_run_both_variants_at_that_length(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *RECALL, "--recall-tokens=4096", "-k", "control or million")
    assert result.ret == 0 and set(outcomes.values()) == {"passed"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*recall prompt length: 4,096 tokens (4096 tokens from --recall-tokens)*"])
    assert "building a 4,096-token prompt" in result.stdout.str()


def test_recall_without_a_way_to_count_tokens_checks_the_codes_and_skips_only_the_accounting(
        pytester: pytest.Pytester) -> None:
    # No /tokenize, no --tokenizer: the million-token prompt is built to an estimated length
    # (test_measure_without_tokenize.py covers the 32K variant and the throughput smoke).
    result, outcomes = run_suite(pytester, "-m", "recall_1m", "--reference-serves=no-tokenize")
    assert result.ret == 0 and outcomes == {MILLION_CODES: "passed", **{
        check: "skipped" for check in ACCOUNTING if "million" in check}}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "*recall million: aiming at * tokens instead of 1,047,488: an estimated length is kept 2% below*",
        "*recall million: prompt tokens approximate: asked *, engine counted * (usage.prompt_tokens*",
        "*SKIPPED*no tokenize endpoint (POST /tokenize: HTTP 404: Not Found) and no --tokenizer: the engine's count "
        "cannot be checked*",
    ])


def test_recall_runs_after_the_functional_checks_in_the_same_run(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall or text", "-k", "control or arithmetic",
                                 "--recall-tokens=4096", "-v")
    control = "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"
    assert outcomes[control] == "passed" and not failed(outcomes), result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert out.rindex("test_text.py::") < out.index("test_recall.py::"), out[-3000:]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--recall-tokens=lots", "*--recall-tokens: 'lots' is not a whole number of tokens*"),
        ("--recall-tokens=2000000", "*--recall-tokens: '2000000': 2000000 tokens do not fit: the engine reports "
                                    "max_model_len 1048576*leaves 1047488*"),
        ("--tokenizer=missing.json", "*--tokenizer: 'missing.json': missing.json is not a file*"),
        ("--recall-concurrency=0", "*--recall-concurrency: '0': sending needs at least 1 prompt*"),
    ],
    ids=["not-a-number", "longer-than-the-engine-takes", "missing-tokenizer", "no-concurrency"],
)
def test_bad_recall_option_is_a_usage_error_naming_it(pytester: pytest.Pytester, option: str, message: str) -> None:
    result, _ = run_suite(pytester, "-m", "recall", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
