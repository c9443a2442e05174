"""End to end: agent loops, prefix reuse and reasoning under a budget (issue 41) against the reference engine.

The clean engine passes every check of the three (under its own model profile and under a name no
profile matches, qwen3-8b: the generic profile, everything discovered). Each defect of issue 41
fails the checks that exist for it, in words a record can be written for, under both names:

- history-null-content-400: every history shape with content null next to tool_calls is refused;
- history-reasoning-dropped: the reasoning sent back never reaches the prompt (the interleaved-thinking
  check under the reference profile, which says keep; the prompt-token count against /tokenize under both);
- usage-ignores-history: usage.prompt_tokens does not grow with the history;
- prompt-markers-end-reasoning: the streamed loop, whose system prompt and history hold </think>, gets
  its reasoning in content (seed 000 §3.2);
- prefix-cache-changes-answer: warm answers differ from cold ones, alone and in a batch;
- prefix-cache-never-hits: discovery finds the cache broken and the hit check fails;
- thinking-budget-ignored: discovery finds the budget broken and the budget check fails.

And the capabilities' other states: an engine that reports no cached tokens skips the hit check in
those words (the equality checks still run), a cache that never hits stated off with --not-served
passes (warm equals cold then skips: the engine says nothing was cached, so there is nothing to
compare), and a reasoning that uses up max_tokens is named so by every check that reads an answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

from engine_acceptance.failure_categories import failure_category
from engine_acceptance.resources import suite_path

pytestmark = pytest.mark.e2e

UNPROFILED = "--reference-model=qwen3-8b"
# The checks of issue 41: the agent loop, prefix reuse, the thinking budget.
SELECTION = ("-m", "agent or prefix_cache or thinking", "-k", "agent or prefix or budget")
ONE_SAMPLE = (*NO_LATENCY, "--trials=1")

LOOP = "test_agent_loop.py::"
PREFIX = "test_prefix_cache.py::"


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


def _shapes(*shapes: str) -> set[str]:
    return {f"{LOOP}test_every_history_shape_the_api_allows_is_accepted[{mode}-{shape}]"
            for mode in ("non-streamed", "streamed") for shape in shapes}


TOKENS = _both(f"{LOOP}test_prompt_tokens_grow_with_the_history_and_count_it_all")
INTERLEAVED = _both(f"{LOOP}test_reasoning_sent_back_reaches_the_prompt_as_the_model_profile_says")
LOOP_CHECKS = (_both(f"{LOOP}test_agent_loop_answers_from_the_tool_results_over_four_turns")
               | _both(f"{LOOP}test_agent_loop_keeps_reasoning_apart_from_content_in_every_turn") | TOKENS)
NULL_CONTENT_SHAPES = _shapes("content-null", "content-omitted", "results-as-text-parts", "reasoning-sent-back")
WARM_EQUALS_COLD = _both(f"{PREFIX}test_reply_with_the_prefix_cached_equals_the_reply_without_it")
EQUALITY = WARM_EQUALS_COLD | _both(f"{PREFIX}test_shared_prefix_batch_answers_equal_the_same_requests_sent_alone")
HIT = _both(f"{PREFIX}test_repeated_long_prefix_is_reported_as_a_cache_hit")
BUDGET = _both("test_reasoning_budget.py::test_reasoning_stays_within_the_thinking_budget_and_the_answer_still_comes")

# defect -> (the checks that fail under the reference profile, under qwen3-8b, words every failure of the first holds)
EXPECTED = {
    # The interleaved-thinking check fails too where it runs: its requests carry content null as well.
    "history-null-content-400": (LOOP_CHECKS | NULL_CONTENT_SHAPES | INTERLEAVED, LOOP_CHECKS | NULL_CONTENT_SHAPES
                                 | INTERLEAVED, "Input should be a valid string"),
    "history-reasoning-dropped": (TOKENS | INTERLEAVED, TOKENS, "reasoning"),
    # Usage that counts one message also shows no reasoning in the prompt, by the same count.
    "usage-ignores-history": (TOKENS | INTERLEAVED, TOKENS, "prompt"),
    "prompt-markers-end-reasoning": ({f"{LOOP}test_agent_loop_keeps_reasoning_apart_from_content_in_every_turn"
                                      "[streamed]"},) * 2 + ("reasoning markers ['<think>', '</think>'] in content",),
    "prefix-cache-never-hits": (HIT, HIT, "is no prefix-cache hit"),
    "thinking-budget-ignored": (BUDGET, BUDGET, "the thinking budget is not applied"),
}


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


def _reasons(pytester: pytest.Pytester) -> dict[str, str]:
    """Each failing check (module::test[param]) and the reason gate.json gives."""
    return {check["id"].rsplit("/", 1)[-1]: check["reason"] for check in _gate(pytester)["failing_checks"]}


@pytest.mark.parametrize("model", ["reference", "qwen3-8b"])
def test_clean_engine_passes_the_agent_prefix_and_budget_checks(pytester: pytest.Pytester, model: str) -> None:
    names = () if model == "reference" else (UNPROFILED,)
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, *names, *SELECTION)
    assert result.ret == 0 and outcomes and not failed(outcomes), result.stdout.str()[-3000:]
    skipped = {test for test, outcome in outcomes.items() if outcome == "skipped"}
    if model == "reference":
        assert not skipped, skipped
    else:
        # The generic profile does not say what the model does with reasoning sent back: skipped, saying what it saw.
        assert skipped == INTERLEAVED, skipped
        result.stdout.fnmatch_lines(["*does not say whether the model needs its reasoning carried back*"
                                     "the tool loop in progress: +* tokens with it*"])
    result.stdout.fnmatch_lines(["thinking_budget *served*passed*", "prefix_cache *served*passed*"])


@pytest.mark.parametrize("model", ["reference", "qwen3-8b"])
@pytest.mark.parametrize("defect", sorted(EXPECTED))
def test_each_agent_defect_fails_its_checks(pytester: pytest.Pytester, defect: str, model: str) -> None:
    names = () if model == "reference" else (UNPROFILED,)
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, *names, *SELECTION, "--inject", defect)
    under_reference, under_generic, words = EXPECTED[defect]
    assert result.ret == 1, result.stdout.str()[-3000:]
    assert failed(outcomes) == (under_reference if model == "reference" else under_generic), result.stdout.str()[-3000:]
    reasons = _reasons(pytester)
    for check, reason in reasons.items():
        assert words in reason, (check, reason)


def test_a_cache_that_changes_the_answer_fails_the_equality_checks_in_their_words(pytester: pytest.Pytester) -> None:
    # A lost prefix changes every repeated request's answer, so other checks fail too: these must be among them.
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, UNPROFILED, "-m", "prefix_cache", "--inject",
                                 "prefix-cache-changes-answer")
    assert result.ret == 1 and failed(outcomes) == EQUALITY, result.stdout.str()[-3000:]
    reasons = _reasons(pytester)
    assert any("the same greedy request answered differently once its prefix was cached "
               "(usage.prompt_tokens_details.cached_tokens" in reason for reason in reasons.values()), reasons
    assert any("answered differently in a batch that shares its prefix than alone" in reason
               for reason in reasons.values()), reasons


def test_an_engine_that_reports_no_cached_tokens_skips_the_hit_check_in_those_words(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, UNPROFILED, "-m", "prefix_cache",
                                 "--reference-serves=no-prefix-cache")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert {test for test, outcome in outcomes.items() if outcome == "skipped"} == HIT, outcomes
    assert EQUALITY <= {test for test, outcome in outcomes.items() if outcome == "passed"}, outcomes
    result.stdout.fnmatch_lines(["*not served by the engine: the engine reports no cached tokens: usage has no "
                                 "prompt_tokens_details.cached_tokens*"])


def test_a_cache_off_on_purpose_is_stated_with_not_served(pytester: pytest.Pytester) -> None:
    # vLLM --no-enable-prefix-caching looks like a cache that never hits: the user says which it is.
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, UNPROFILED, "-m", "prefix_cache", "--inject",
                                 "prefix-cache-never-hits", "--not-served", "prefix_cache")
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    # The engine reports 0 cached for the warm request: warm equals cold compares two uncached replies and
    # shows nothing, so it skips in those words; the batch still compares batched with alone.
    assert {test for test, outcome in outcomes.items() if outcome == "skipped"} == HIT | WARM_EQUALS_COLD, outcomes
    result.stdout.fnmatch_lines(["*the engine reported no hit for the warm request "
                                 "(usage.prompt_tokens_details.cached_tokens 0 of * prompt tokens), so no reply was "
                                 "answered with the prefix cached: nothing to compare*"])


def _tight_profile(tmp: Path) -> Path:
    """The reference profile with so small a reply budget that the reasoning uses it all up."""
    text = suite_path("fixtures", "profiles", "models", "reference.yaml").read_text(encoding="utf-8")
    path = tmp / "tight.yaml"
    path.write_text(text.replace("name: reference\n", "name: tight\n") + "reply_tokens: 8\nmax_tokens_cap: 8\n",
                    encoding="utf-8")
    return path


def test_a_reasoning_that_uses_up_max_tokens_is_named_so_by_every_check_that_reads_an_answer(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, "--profile", str(_tight_profile(pytester.path)),
                                 "-m", "text or thinking", "-k", "reply_has_content or arithmetic or "
                                 "arrives_in_the_reasoning_field or enabled_mode or 240_question")
    reasons = _reasons(pytester)
    named = {check for check, reason in reasons.items() if "the reasoning used up max_tokens" in reason}
    assert named and named == set(reasons), reasons
    groups = {check.split("::")[0] for check in named}
    assert groups == {"test_text.py", "test_thinking.py", "test_reasoning_separation.py"}, named
    assert result.ret == 1 and failed(outcomes), result.stdout.str()[-3000:]
    messages = [json.loads(path.read_text(encoding="utf-8"))["statusDetails"]["message"]
                for path in (pytester.path / "allure-results").glob("*-result.json")
                if json.loads(path.read_text(encoding="utf-8"))["status"] == "failed"]
    assert messages and {failure_category(message) for message in messages} == {"Reasoning used up max_tokens"}


def test_an_engine_whose_greedy_replies_depend_on_the_batch_skips_the_batch_comparison_saying_so(
        pytester: pytest.Pytester) -> None:
    # llama.cpp's parallel slots: a batched greedy reply may differ from the same request alone whatever the
    # cache does. The batch check skips in the profile's words; warm against cold, one at a time, still fails.
    text = suite_path("fixtures", "profiles", "engines", "generic.yaml").read_text(encoding="utf-8")
    assert "\nfeatures:\n" in text
    engines = pytester.path / "team" / "engines"
    engines.mkdir(parents=True)
    (engines / "batch-variant.yaml").write_text(
        text.replace("name: generic", "name: batch-variant", 1).replace(
            "\nfeatures:\n", "\nfeatures:\n  greedy_depends_on_batch: true\n", 1), encoding="utf-8")
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, UNPROFILED, "-m", "prefix_cache", "--engine", "batch-variant",
                                 f"--profiles-dir={pytester.path / 'team'}", "--inject", "prefix-cache-changes-answer")
    assert result.ret == 1 and failed(outcomes) == WARM_EQUALS_COLD, result.stdout.str()[-3000:]
    batch = EQUALITY - WARM_EQUALS_COLD
    assert {outcomes[test] for test in batch} == {"skipped"}, outcomes
    result.stdout.fnmatch_lines(["*engine profile 'batch-variant' says a greedy reply may change with the batch it is "
                                 "decoded in (features.greedy_depends_on_batch)*"])


def test_a_budget_is_probed_and_checked_where_the_model_reasons_only_when_a_switch_asks(
        pytester: pytest.Pytester) -> None:
    # CI's vLLM: the qwen3 parser, thinking off unless enable_thinking turns it on. A plain request has no
    # reasoning; the probe turns it on with the known switches (it once read "not served" here).
    budget = "test_reasoning_budget.py::test_reasoning_stays_within_the_thinking_budget_and_the_answer_still_comes"
    common = (*ONE_SAMPLE, UNPROFILED, "--reference-serves=reasoning-on-request", "-m", "thinking", "-k", "budget")
    result, outcomes = run_suite(pytester, *common)
    assert result.ret == 0 and {outcomes[test] for test in _both(budget)} == {"passed"}, result.stdout.str()[-3000:]
    result.stderr.fnmatch_lines(["*probed in*thinking_budget served*"])
    verdict = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    assert " with enable_thinking on: " in verdict["discovery"]["probes"]["thinking_budget"]["evidence"], verdict["discovery"]
    result, outcomes = run_suite(pytester, *common, "--inject", "thinking-budget-ignored")
    assert result.ret == 1, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*the thinking budget is not applied*"])


def test_the_loop_asks_for_reasoning_where_the_model_reasons_only_when_a_switch_asks(pytester: pytest.Pytester) -> None:
    # It skipped there as "does not reason by default"; the discovered 'enabled' mode turns it on in every turn.
    check = "test_agent_loop.py::test_agent_loop_keeps_reasoning_apart_from_content_in_every_turn"
    result, outcomes = run_suite(pytester, *ONE_SAMPLE, UNPROFILED, "--reference-serves=reasoning-on-request",
                                 "-m", "agent", "-k", "keeps_reasoning")
    assert result.ret == 0 and {outcomes[test] for test in _both(check)} == {"passed"}, result.stdout.str()[-3000:]
