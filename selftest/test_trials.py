"""Repeated trials (engine_acceptance/trials.py): the rule, the count, the message, concurrency."""

from __future__ import annotations

import asyncio
import csv
import io
import json

import pytest

from engine_acceptance.profiles.expectations import load_expectations
from engine_acceptance.resources import suite_path
from engine_acceptance.trials import (
    DEFAULT_SAMPLES,
    TRIAL_KINDS,
    TrialRule,
    current_sample,
    run_trials,
    samples_for,
)


def _failing_at(numbers: set[int], message: str = "expected 703 in the answer, got '19'"):
    """A sample that fails (AssertionError) when its number is in `numbers`."""
    async def sample() -> int:
        number, _ = current_sample()
        await asyncio.sleep(0)
        assert number not in numbers, f"{message} (sample {number})"
        return number
    return sample


def test_rules_read_as_the_report_writes_them() -> None:
    assert str(TrialRule(5)) == "all 5"
    assert str(TrialRule(5, at_least=0.8)) == "at least 80% of 5"
    assert str(TrialRule(3, at_least=0.6)) == "at least 60% of 3"


@pytest.mark.parametrize(("rule", "required"), [
    (TrialRule(5), 5), (TrialRule(5, at_least=0.8), 4), (TrialRule(3, at_least=0.8), 3),
    (TrialRule(5, at_least=0.6), 3), (TrialRule(3, at_least=0.6), 2), (TrialRule(1, at_least=0.1), 1),
], ids=str)
def test_a_rate_is_rounded_up_to_whole_samples(rule: TrialRule, required: int) -> None:
    assert rule.required == required
    assert rule.met(required) and not rule.met(required - 1)


@pytest.mark.parametrize("bad", [{"samples": 0}, {"samples": 3, "at_least": 0}, {"samples": 3, "at_least": 1.5}])
def test_a_rule_without_samples_or_with_a_share_outside_0_1_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        TrialRule(**bad)


async def test_four_of_five_fail_the_all_rule_with_the_first_failing_samples_own_message() -> None:
    result = await run_trials(_failing_at({3}), TrialRule(5))
    assert [sample.passed for sample in result.samples] == [True, True, False, True, True]
    assert not result.met
    assert result.proportion.successes == 4 and result.proportion.total == 5
    assert result.summary() == "4/5 passed (rule: all 5; 95% Wilson lower bound 37.6%)"
    # pytest's assertion rewriting adds its explanation on the lines after.
    assert result.failure_message().splitlines()[0] == ("expected 703 in the answer, got '19' (sample 3) "
                                                        "[trials: 4/5 passed, rule: all 5]")
    assert [sample.value for sample in result.samples] == [1, 2, None, 4, 5]


async def test_the_same_count_meets_a_rate_rule() -> None:
    result = await run_trials(_failing_at({3}), TrialRule(5, at_least=0.8))
    assert result.met
    assert result.summary() == "4/5 passed (rule: at least 80% of 5; 95% Wilson lower bound 37.6%)"


async def test_the_lowest_numbered_failure_leads_whatever_finishes_first() -> None:
    async def sample() -> None:
        number, total = current_sample()
        # Sample 5 fails first in time, sample 2 later: sample 2's message leads.
        for _ in range(total - number):
            await asyncio.sleep(0)
        assert number not in (2, 5), f"wrong answer in sample {number}"

    result = await run_trials(sample, TrialRule(5))
    assert result.failure_message().startswith("wrong answer in sample 2 [trials: 3/5 passed, rule: all 5]")


async def test_the_figure_goes_at_the_end_of_the_first_line_and_the_rest_follows() -> None:
    async def sample() -> None:
        raise AssertionError("turn 2 should repeat the codename 'jade-628' from turn 1, got 'x'\nassert False")

    message = (await run_trials(sample, TrialRule(2))).failure_message()
    assert message == ("turn 2 should repeat the codename 'jade-628' from turn 1, got 'x' "
                       "[trials: 0/2 passed, rule: all 2]\nassert False")


async def test_a_lead_replaces_the_samples_words_and_keeps_the_figure() -> None:
    result = await run_trials(_failing_at({1, 2}), TrialRule(3))
    assert result.failure_message("thinking disabled: 1/3 correct answers") == \
        "thinking disabled: 1/3 correct answers [trials: 1/3 passed, rule: all 3]"


async def test_samples_run_concurrently_and_sequentially_when_asked() -> None:
    in_flight = 0
    most = 0

    async def sample() -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        in_flight -= 1

    await run_trials(sample, TrialRule(5))
    assert most == 5, "the five samples were not in flight together"
    most = 0
    await run_trials(sample, TrialRule(5), sequential=True)
    assert most == 1


@pytest.mark.parametrize("sequential", [False, True], ids=["concurrent", "sequential"])
async def test_each_sample_knows_its_number(sequential: bool) -> None:
    seen: list[tuple[int, int]] = []

    async def sample() -> None:
        await asyncio.sleep(0)
        seen.append(current_sample())

    await run_trials(sample, TrialRule(4), sequential=sequential)
    assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert current_sample() is None


@pytest.mark.parametrize("error", [ValueError("a bug in the check"), pytest.skip.Exception("no such mode")],
                         ids=["exception", "pytest-skip"])
async def test_other_exceptions_propagate_unchanged_after_every_sample_ended(error: BaseException) -> None:
    ended: list[int] = []

    async def sample() -> None:
        number, _ = current_sample()
        if number == 1:
            raise error
        await asyncio.sleep(0)
        ended.append(number)

    with pytest.raises(type(error)) as raised:
        await run_trials(sample, TrialRule(3))
    assert raised.value is error
    assert sorted(ended) == [2, 3], "a sample was left running"


async def test_the_table_has_a_row_per_sample_with_the_reason_shortened() -> None:
    long = "x" * 500
    result = await run_trials(_failing_at({2}, message=long), TrialRule(3))
    rows = list(csv.reader(io.StringIO(result.csv_table())))
    assert rows[0] == ["sample", "passed", "reason", "seconds"]
    assert [row[:2] for row in rows[1:]] == [["1", "yes"], ["2", "no"], ["3", "yes"]]
    assert rows[2][2].endswith("…") and len(rows[2][2]) < 200
    assert all(float(row[3]) >= 0 for row in rows[1:])


def test_the_profile_schema_knows_every_kind_of_trial() -> None:
    schema = json.loads(suite_path("fixtures", "schemas", "model-profile.schema.json").read_text(encoding="utf-8"))
    assert tuple(schema["properties"]["trials"]["properties"]) == TRIAL_KINDS


def test_k_comes_from_the_option_then_the_profile_then_the_default() -> None:
    assert DEFAULT_SAMPLES == {"answers": 3, "thinking": 5, "tools": 3, "image": 3, "recall": 1}
    assert samples_for("thinking") == 5
    assert samples_for("thinking", profile={"thinking": 2}) == 2
    assert samples_for("thinking", profile={"tools": 2}) == 5
    assert samples_for("thinking", override=1, profile={"thinking": 2}) == 1
    with pytest.raises(ValueError, match="unknown kind of trial 'vision'"):
        samples_for("vision")


@pytest.mark.parametrize(("check", "lead"), [
    ("test_text.py::test_arithmetic_answer_is_correct[*]",
     "expected 703 in the answer, got '计算 19×37，只输出结果。icional'\nassert 703 in []"),
    ("test_text.py::test_multi_turn_conversation_recalls_the_codename[*]",
     "turn 2 should repeat the codename 'jade-628' from turn 1, got '请记住本次对话的代号：jade-631。'"),
    ("test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn[*]",
     "expected parallel calls for 广州, 北京 in one turn, got no tool calls (content: '请在本轮')"),
    ("test_thinking.py::test_thinking_mode_answers_the_240_question[disabled]",
     "thinking disabled: 0/5 correct answers to the 240 question (answers: 264, 264, 264, 264, 264; contents: [])"),
], ids=lambda value: value.split("::")[-1][:40] if "::" in value else "")
async def test_shipped_records_still_match_a_trials_failure(check: str, lead: str) -> None:
    async def sample() -> None:
        raise AssertionError(lead)

    from engine_acceptance.pytest_plugin.records import judge

    result = await run_trials(sample, TrialRule(5))
    # As the check fails: every sample's failure a problem of its own (the 240 check words one from all).
    failure = result.failure(lead if '240' in check else None)
    message = f"{type(failure).__name__}: {failure}"
    records = [record for record in load_expectations() if record.check == check]
    assert records, check
    for record in records:
        assert judge([record], failure, message) == ([record], None), (check, record.origin, message)


# --- each failing sample is a problem of its own (issue 26, point 3) -----------------------

GEMMA_ARITHMETIC = "gemma3-270m-vllm-cpu.yaml#0"


def _judged(result, check_origin: str = GEMMA_ARITHMETIC):
    from engine_acceptance.pytest_plugin.records import judge

    records = [record for record in load_expectations() if record.origin == check_origin]
    failure = result.failure()
    message = f"{type(failure).__module__}.{type(failure).__name__}: {failure}" \
        if type(failure) is not AssertionError else f"AssertionError: {failure}"
    return failure, judge(records, failure, message)


async def test_a_second_failing_sample_with_another_failure_is_not_covered_by_the_first_ones_record() -> None:
    """Sample 1 gives the recorded wrong answer, sample 2 an HTTP 500: the record covers sample 1 only."""
    async def sample() -> None:
        number, _ = current_sample()
        if number == 1:
            raise AssertionError("expected 703 in the answer, got '计算 19×37' (sample 1)")
        if number == 2:
            raise AssertionError("streamed request to http://h/v1/chat/completions failed: HTTP 500: {}")

    result = await run_trials(sample, TrialRule(3))
    failure, (matched, line) = _judged(result)
    assert str(failure).splitlines() == [
        "failing samples [trials: 1/3 passed, rule: all 3] (2): sample 1: expected 703 in the answer, got "
        "'计算 19×37' (sample 1) | sample 2: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}",
        "  - sample 1: expected 703 in the answer, got '计算 19×37' (sample 1)",
        "  - sample 2: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]
    # The old reading: the first failing sample's words only, which the record describes.
    assert all(record.failure.matches(f"AssertionError: {result.failure_message()}") for record in matched)
    assert line is not None and line.endswith(
        "got: sample 2: streamed request to http://h/v1/chat/completions failed: HTTP 500: {} (1 of 2 problems "
        "described by no record)"), line
    assert f"record {GEMMA_ARITHMETIC} expects a message matching /expected 703 in the answer, got /" in line


async def test_every_failing_sample_with_the_recorded_failure_is_covered() -> None:
    result = await run_trials(_failing_at({1, 2, 3}), TrialRule(3))
    failure, (matched, line) = _judged(result)
    assert len(failure.problems) == 3 and line is None and [r.origin for r in matched] == [GEMMA_ARITHMETIC]
    # One failing sample alone is worded as before: its own message with the figure.
    one = await run_trials(_failing_at({2}), TrialRule(3))
    assert type(one.failure()) is AssertionError
    assert str(one.failure()) == one.failure_message()


async def test_a_sample_with_several_problems_gives_each_its_own_line() -> None:
    from engine_acceptance.assertions import SeveralProblems, problems_failure

    async def sample() -> None:
        raise problems_failure(["usage.total_tokens=3 but 1 + 1 = 2", "usage.prompt_tokens is 0"])

    failure = (await run_trials(sample, TrialRule(1))).failure()
    assert isinstance(failure, SeveralProblems)
    assert failure.problems == ("sample 1: usage.total_tokens=3 but 1 + 1 = 2", "sample 1: usage.prompt_tokens is 0")


# --- a check that words its failure from the whole result lists every problem (issue 39) ---------

MINIMAX_240 = "seed-minimax-m3.yaml#0"


async def test_a_lead_of_several_problems_keeps_each_failed_request_apart_from_the_count() -> None:
    """The 240 check's count is recorded; a request that failed beside it is not, and must not hide behind it."""
    from engine_acceptance.pytest_plugin.records import judge

    result = await run_trials(_failing_at({1, 2, 3, 4, 5}), TrialRule(5))
    count = "thinking disabled: 0/5 correct answers to the 240 question (answers: 264, 264, 264; contents: [])"
    failed = ["sample 4: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}",
              "sample 5: non-streamed request to http://h/v1/chat/completions failed: timeout: total timeout"]
    failure = result.failure([count, *failed])
    assert failure.problems == (count, *failed)
    records = [record for record in load_expectations() if record.origin == MINIMAX_240]
    matched, line = judge(records, failure, f"engine_acceptance.assertions.SeveralProblems: {failure}")
    assert matched == records and line is not None and "(2 of 3 problems described by no record)" in line, line
    # The count alone is one problem, worded as before with the figure; so is one failed request alone.
    assert str(result.failure([count])) == f"{count} [trials: 0/5 passed, rule: all 5]"
    assert str(result.failure(failed[:1])) == f"{failed[0]} [trials: 0/5 passed, rule: all 5]"
    # A lead that found nothing to say leaves the samples' own words.
    assert result.failure([]).problems == tuple(result.problems())
