"""End to end: the prompt-token accounting checks (tests/test_usage_accounting.py) against the reference engine.

A clean engine passes them, counting with its /tokenize; ``usage-off-by-one``
(``prompt_tokens`` one too many, totals kept consistent) fails exactly these checks
of the text capability, each naming usage and the true count, which the self-test
works out itself from the reference engine's own tokenizer and chat template;
``bad-usage`` (``total_tokens`` off) does not touch them (it fails the usage
consistency check, see test_suite_against_reference_engine.py). Without /tokenize a
local tokenizer.json counts the completions prompt exactly and the chat check is
skipped, saying why; with neither, both are skipped, saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from allure_results import read_results
from suite_runner import NO_LATENCY, REPO, failed, run_suite

from engine_acceptance.reference_engine.chat_template import render_messages
from engine_acceptance.reference_engine.tokenizer import get_tokenizer

pytestmark = pytest.mark.e2e

MODULE = "test_usage_accounting.py"
SELECT = ("-m", "text", "-k", "test_usage_accounting")
CHAT = {f"{MODULE}::test_chat_prompt_tokens_match_the_engines_count[{mode}]" for mode in ("non-streamed", "streamed")}
COMPLETION = {f"{MODULE}::test_completion_prompt_tokens_match_the_engines_count[{mode}]"
              for mode in ("non-streamed", "streamed")}
ACCOUNTING = CHAT | COMPLETION
NO_TOKENIZE = "--reference-serves=no-tokenize"
# The tokenize probe's finding in the engine's words (absent: a 404), then what else could count.
NEITHER = ("no tokenize endpoint (POST /tokenize: HTTP 404: Not Found) and no --tokenizer: nothing can count the "
           "prompt's tokens (--tokenizer PATH takes the model's tokenizer.json)")


def _completion_prompt_tokens() -> int:
    """The true count of the completions check's prompt, by the reference engine's own tokenizer."""
    prompts = yaml.safe_load((REPO / "fixtures" / "prompts" / "text.yaml").read_text(encoding="utf-8"))
    return get_tokenizer().count(prompts["basic"]["prompt"])


def _chat_prompt_tokens(pytester: pytest.Pytester) -> set[int]:
    """The true count of each conversation the chat check sent (read back from its report), template included."""
    counts = set()
    for name, report in read_results(pytester.path / "allure-results").items():
        if name.startswith("test_chat_prompt_tokens_match_the_engines_count"):
            for text in report.attachment_texts("request (non-streamed)") + report.attachment_texts(
                    "request (streamed)"):
                counts.add(get_tokenizer().count(render_messages(json.loads(text)["body"]["messages"])))
    return counts


@pytest.mark.parametrize("defect", [None, "bad-usage"], ids=["clean", "bad-usage"])
def test_accounting_checks_pass_counting_with_the_engines_tokenize(pytester: pytest.Pytester,
                                                                   defect: str | None) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, *SELECT, *(("--inject", defect) if defect else ()))
    assert outcomes == {test_id: "passed" for test_id in ACCOUNTING}, result.stdout.str()[-3000:]


def test_usage_off_by_one_fails_exactly_the_accounting_checks_naming_both_numbers(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "text", "--inject", "usage-off-by-one")
    output = result.stdout.str()
    assert failed(outcomes) == ACCOUNTING, output[-3000:]
    assert result.ret == 1
    (chat,) = _chat_prompt_tokens(pytester)
    completion = _completion_prompt_tokens()
    result.stdout.fnmatch_lines([
        f"*usage.prompt_tokens is {chat + 1} but the engine's own /tokenize counts {chat} for the same "
        "conversation: +1 tokens (tolerance 0)*",
        f"*usage.prompt_tokens is {completion + 1} but the engine's own /tokenize (special tokens added, as "
        f"/v1/completions adds them) counts {completion} for the same prompt: +1 tokens (tolerance 0)*",
    ])


def test_without_tokenize_or_tokenizer_every_accounting_check_is_skipped_saying_why(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, *SELECT, NO_TOKENIZE, "-rs")
    assert outcomes == {test_id: "skipped" for test_id in ACCOUNTING}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"SKIPPED [[]2[]] *test_usage_accounting.py:*: {NEITHER}"] * 2)


@pytest.mark.parametrize("defect", [None, "usage-off-by-one"], ids=["clean", "usage-off-by-one"])
def test_local_tokenizer_counts_the_completion_prompt_exactly_and_skips_the_chat(
        pytester: pytest.Pytester, tokenizer_json: Path, defect: str | None) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, *SELECT, NO_TOKENIZE, f"--tokenizer={tokenizer_json}", "-rs",
                                 *(("--inject", defect) if defect else ()))
    expected = {**{test_id: "skipped" for test_id in CHAT},
                **{test_id: "failed" if defect else "passed" for test_id in COMPLETION}}
    assert outcomes == expected, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        f"SKIPPED [[]2[]] *test_usage_accounting.py:*: only the local tokenizer.json {tokenizer_json} counts here "
        "(no tokenize endpoint (POST /tokenize: HTTP 404: Not Found)), and it has no chat template: the tokens the "
        "engine's template adds to a conversation cannot be known exactly (the /v1/completions check counts a plain "
        "prompt exactly)"])
    if defect:
        completion = _completion_prompt_tokens()
        result.stdout.fnmatch_lines([
            f"*usage.prompt_tokens is {completion + 1} but the local tokenizer.json {tokenizer_json} (special "
            f"tokens added, as the engine adds them) counts {completion} for the same prompt: +1 tokens*"])
