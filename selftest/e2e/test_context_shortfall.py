"""A deployment serving less context than its model profile declares is a finding.

The million-token check used to shrink to whatever ``max_model_len`` the engine
advertised, so a 1M-context model started with a 128K limit passed it. Now the
long-context checks fail naming both numbers, unless ``--recall-tokens`` asks for a
size on purpose. A profile that declares no context (``generic``) takes the engine's;
with neither, a stated conservative default.

A size asked for on purpose is still said: recall below the declared context and a
"million-token" check run smaller read so in the capability row, in ``gate.json``'s
``shortfalls``, on the terminal and in Allure; such a check never passes under its
name alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from allure_results import read_results
from suite_runner import failed, run_suite

from engine_acceptance.recall.haystack import DEFAULT_CONTEXT_TOKENS, recall_budget
from engine_acceptance.profiles.profile import load_model_profile
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine

MILLION = {
    "test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json",
    "test_recall.py::test_million_token_prompt_tokens_match_the_engines_count",
}
SHORTFALL = ("model profile reference declares 1,048,576 tokens of context; the engine advertises 65,536 "
             "(max_model_len)")


def test_a_shorter_engine_context_is_a_shortfall_naming_both_numbers() -> None:
    budget = recall_budget(requested=None, profile_context=1_048_576, max_model_len=131_072,
                           profile_name="minimax-m3")
    assert budget.shortfall == ("model profile minimax-m3 declares 1,048,576 tokens of context; the engine "
                                "advertises 131,072 (max_model_len)")
    assert budget.tokens == 131_072 - 1088
    assert recall_budget(requested=None, profile_context=1_048_576, max_model_len=1_048_576).shortfall is None
    assert recall_budget(requested=32_768, profile_context=1_048_576, max_model_len=131_072).shortfall is None


def test_a_profile_without_a_context_takes_the_engines_or_a_stated_default() -> None:
    assert load_model_profile("generic").context_length is None
    engine = recall_budget(requested=None, profile_context=None, max_model_len=8192, profile_name="generic")
    assert engine.tokens == 8192 - 1088 and engine.shortfall is None
    assert "the engine's advertised max_model_len 8192" in engine.explanation
    assert "declares no context length" in engine.explanation
    neither = recall_budget(requested=None, profile_context=None, max_model_len=None, profile_name="generic")
    assert neither.tokens == DEFAULT_CONTEXT_TOKENS - 1088
    assert f"a conservative {DEFAULT_CONTEXT_TOKENS}-token context" in neither.explanation
    assert "reports no max_model_len" in neither.explanation


@pytest.fixture(scope="module")
def short_context_engine() -> Iterator[RunningReferenceEngine]:
    """The reference engine started with 64K of context; its model profile declares 1M."""
    with start_reference_engine(max_model_len=65_536) as engine:
        yield engine


@pytest.mark.e2e
def test_million_token_checks_fail_when_the_engine_advertises_less_than_the_profile(
        pytester: pytest.Pytester, short_context_engine: RunningReferenceEngine) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall_1m", "--engine-url", short_context_engine.url)
    assert failed(outcomes) == MILLION, result.stdout.str()[-3000:]
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*{SHORTFALL}*the checks that need that context fail*",
                                 f"*{SHORTFALL}: the million-token check needs the declared context*"])


@pytest.mark.e2e
def test_recall_tokens_asks_for_a_smaller_size_on_purpose_and_it_passes(
        pytester: pytest.Pytester, short_context_engine: RunningReferenceEngine) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall_1m", "--engine-url", short_context_engine.url,
                                 "--recall-tokens=32768")
    assert result.ret == 0 and set(outcomes) == MILLION and set(outcomes.values()) == {"passed"}, \
        result.stdout.str()[-3000:]
    assert "declares 1,048,576 tokens of context" not in result.stdout.str()


@pytest.mark.e2e
def test_a_recall_run_below_the_declared_context_says_so_in_the_row_gate_json_terminal_and_allure(
        pytester: pytest.Pytester) -> None:
    # The built-in engine's profile declares 1,048,576 tokens; this run asks for 2,000.
    result, outcomes = run_suite(pytester, "-m", "recall or recall_1m", "--recall-tokens=2000",
                                 "-k", "control or million_token_prompt_returns", "-v")
    control = "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"
    codes = "test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json"
    assert outcomes == {control: "passed", codes: "passed"}, result.stdout.str()[-3000:]
    assert result.ret == 0  # a shortfall alone does not fail the gate
    result.stdout.fnmatch_lines([
        f"*{codes} PASSED (ran at 2,000 tokens, not 1,048,576)*",
        "long_context *passed; recall at 2,000 of 1,048,576 declared tokens; "
        "million-token recall ran at 2,000 tokens, not 1,048,576",
    ])
    # Not fnmatch: the line's [...] would read as a character class.
    assert ("  SHORTFALL (long_context): million-token recall ran at 2,000 tokens, not 1,048,576 "
            "[--recall-tokens=2000: a 2,000-token prompt]; checks: 1 passed at 2,000 tokens, not 1,048,576"
            ) in result.stdout.lines
    assert "GATE: PASS" in result.stdout.lines
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    assert [(s["capability"], s["check"], s["declared"], s["ran"], s["option"]) for s in gate["shortfalls"]] == [
        ("long_context", "recall", 1_048_576, 2000, "--recall-tokens=2000"),
        ("long_context", "recall_1m", 1_048_576, 2000, "--recall-tokens=2000"),
    ]
    assert [c["result"] for c in gate["shortfalls"][1]["checks"]] == ["passed at 2,000 tokens, not 1,048,576"]
    [row] = [row for row in gate["capabilities"] if row["name"] == "long_context"]
    assert row["result"].startswith("passed; recall at 2,000 of 1,048,576 declared tokens")
    [million] = [test for name, test in read_results(pytester.path / "allure-results").items()
                 if name.startswith("test_million_token_prompt_returns")]
    assert million.name.endswith(": ran at 2,000 tokens, not 1,048,576") and million.status == "passed"
    environment = (pytester.path / "allure-results" / "environment.properties").read_text(encoding="utf-8")
    assert ("shortfall.2.recall_1m = million-token recall ran at 2,000 tokens, not 1,048,576 "
            "(--recall-tokens=2000: a 2,000-token prompt)") in environment


LONG_131K = """\
name: long-131k
description: a team's model with 128K of context, served by the built-in engine for the self-test
match: ["^long-131k"]
capabilities: [text, streaming]
context_length: 131072
reasoning: {markers: []}
"""


@pytest.mark.e2e
def test_a_million_token_check_on_a_128k_model_is_said_against_the_context_the_model_declares(
        pytester: pytest.Pytester) -> None:
    # The engine advertises a million (the built-in engine's own context); the model profile declares 131,072.
    team = pytester.path / "team"
    (team / "models").mkdir(parents=True)
    (team / "models" / "long-131k.yaml").write_text(LONG_131K, encoding="utf-8")
    codes = "test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json"
    result, outcomes = run_suite(pytester, "-m", "recall_1m", "-k", "million_token_prompt_returns", "-v",
                                 f"--profiles-dir={team}", "--reference-model=long-131k", "--recall-tokens=7000")
    assert outcomes == {codes: "passed"} and result.ret == 0, result.stdout.str()[-3000:]
    said = "million-token recall at 7,000 of the 131,072 tokens the model declares"
    result.stdout.fnmatch_lines([f"*{codes} PASSED (ran at 7,000 of the 131,072 tokens the model declares)*",
                                 f"long_context *passed; {said}"])
    assert (f"  SHORTFALL (long_context): {said} [--recall-tokens=7000: a 7,000-token prompt]; checks: 1 passed at "
            "7,000 of the 131,072 tokens the model declares") in result.stdout.lines
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    million = [s for s in gate["shortfalls"] if s["check"] == "recall_1m"]
    assert [(s["declared"], s["ran"], s["summary"]) for s in million] == [(131_072, 7000, said)]
    assert "1,048,576" not in json.dumps(million)
