"""Tool-call accuracy at scale (issue 17): the committed set of 300+ requests, streamed and not.

One run of the set (``fixtures/tool_accuracy.py``) is judged four ways, each its own
check so an expectation record can name exactly one: every request answered;
arguments that fit their schemas; ``finish_reason`` "tool_calls" exactly when tools
are called; streamed calls equal to non-streamed ones; and "did it call a tool?"
against a baseline recorded by this suite from a trusted deployment (K2-Vendor-
Verifier's trigger similarity; a baseline recorded from this same engine, version and
model is said to be a regression against itself, not accuracy). Thresholds come from
the model profile's ``tool_accuracy`` (defaults in
``engine_acceptance.tool_accuracy.policy``). The figures go to the report (tables, a
chart) and, as properties, to ``gate.json``; the baseline's provenance and what the
comparison is go to ``gate.json``'s ``baselines`` and the gate table.
"""

from __future__ import annotations

import json

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, short
from engine_acceptance.proportions import Proportion
from engine_acceptance.provenance import BASELINE_PROPERTY
from engine_acceptance.tool_accuracy.report import (
    comparison_text,
    confusion_csv,
    error_kinds,
    failure_examples,
    shape_chart_png,
    shape_csv,
)

# Not marked `tools`: `-m tools` selects the one-sample checks of tests/test_tools.py, not 600 requests.
pytestmark = [pytest.mark.tool_accuracy, pytest.mark.requires("tools")]


def _report(run, request, name: str, value: Proportion | dict) -> None:  # noqa: ANN001 (fixture objects)
    allure.attach(run.summary(), name="tool accuracy: summary", attachment_type=allure.attachment_type.TEXT)
    figure = value if isinstance(value, dict) else {"k": value.successes, "n": value.total, "rate": value.rate,
                                                    "wilson_lower": round(value.lower, 4)}
    request.node.user_properties.append((name, json.dumps(figure)))


def _below(what: str, value: Proportion, minimum: float, examples: list[str]) -> str:
    shown = "; ".join(examples)
    return (f"{what}: {value}, below the required {100 * minimum:.1f}%"
            + (f". For example: {shown}" if shown else ""))


def _at_least(what: str, value: Proportion, minimum: float, examples: list[str]) -> None:
    __tracebackhide__ = True
    rate = value.rate or 0.0
    assert rate >= minimum, _below(what, value, minimum, examples)


def test_every_tool_accuracy_request_is_answered(tool_accuracy_run, request) -> None:
    run = tool_accuracy_run
    answered = Proportion(run.score.replies - run.score.errors, run.score.replies)
    _report(run, request, "tool_requests_answered", answered)
    kinds = error_kinds(run.outcomes)
    # Each kind of error is a problem of its own: a record of the known kind (a chat template's 400)
    # leaves any other kind beside it failing the check.
    assert_no_problems(kinds, header=_below("tool-accuracy requests answered with 2xx", answered, 1.0, [])
                       + f". Errors by kind ({len(kinds)})")


def test_tool_call_arguments_fit_their_schemas_at_scale(tool_accuracy_run, request) -> None:
    run = tool_accuracy_run
    _report(run, request, "tool_schema_valid", run.score.schema_valid)
    allure.attach(shape_csv(run.score), name="tool accuracy by schema shape", attachment_type=allure.attachment_type.CSV)
    allure.attach(shape_chart_png(run.score, f"{run.score.cases} cases x 2 modes: calls and valid arguments by shape"),
                  name="tool accuracy by shape (chart)", attachment_type=allure.attachment_type.PNG)
    if not run.score.calls:
        pytest.fail(f"no tool call in {run.score.replies} replies, {sum(c.forced for c in run.cases)} cases of which "
                    "force a call (tool_choice required or named): nothing to validate")
    _at_least("tool-call arguments that are JSON fitting the tool's schema", run.score.schema_valid,
              run.policy.min_schema_valid, failure_examples(run.outcomes, kind="invalid"))


def test_finish_reason_is_tool_calls_exactly_when_tools_are_called(tool_accuracy_run, request) -> None:
    run = tool_accuracy_run
    _report(run, request, "tool_finish_reason_consistent", run.score.finish_consistent)
    judged, cut = run.score.finish_consistent.total, run.score.finish_cut
    if judged < run.policy.min_judged_replies:
        pytest.fail(f"only {judged} of {judged + cut} answered replies ended before max_tokens "
                    f"{run.policy.max_tokens} ({cut} cut, not judged: their finish_reason 'length' says nothing "
                    f"about their calls), fewer than the {run.policy.min_judged_replies} needed to judge "
                    "finish_reason against the calls")
    _at_least(f"replies whose finish_reason is 'tool_calls' exactly when they call tools ({cut} cut by max_tokens, "
              "not judged)", run.score.finish_consistent,
              run.policy.min_finish_reason_consistent, failure_examples(run.outcomes, kind="finish"))


def test_streamed_tool_calls_equal_non_streamed_at_scale(tool_accuracy_run, request) -> None:
    run = tool_accuracy_run
    _report(run, request, "tool_stream_agreement", run.score.stream_agreement)
    compared = run.score.stream_agreement.total
    if compared < run.policy.min_compared_cases:
        pytest.fail(f"only {compared} of {run.score.cases} cases had both replies run to their end "
                    f"({run.score.stream_left_out}: an HTTP error or a reply cut by max_tokens {run.policy.max_tokens} "
                    f"on one side), fewer than the {run.policy.min_compared_cases} needed to judge streamed = "
                    "non-streamed")
    by_key = {(o.case_id, o.stream): o for o in run.outcomes}
    finished = [case for case in run.cases
                if all(by_key[(case.id, stream)].finish_reason not in (None, "length") for stream in (False, True))]
    if not any(by_key[(case.id, stream)].calls for case in finished for stream in (False, True)):
        # Every compared pair is "no call" = "no call": agreement that shows nothing about streamed tool calls.
        said = next((by_key[(case.id, False)].content for case in finished if case.expect == "call"), "")
        pytest.skip(f"no tool call in any of the {compared} cases compared (streamed or not), so there are no calls to "
                    f"compare; e.g. a case that asks for one was answered {short(said)!r}")
    differing = [f"{case.id}: non-streamed {list(by_key[(case.id, False)].signature()) or 'no call'}, streamed "
                 f"{list(by_key[(case.id, True)].signature()) or 'no call'}"[:240]
                 for case in run.cases
                 if by_key[(case.id, False)].finish_reason not in (None, "length")
                 and by_key[(case.id, True)].finish_reason not in (None, "length")
                 and by_key[(case.id, False)].signature() != by_key[(case.id, True)].signature()][:3]
    _at_least(f"cases whose streamed tool calls equal the non-streamed ones ({run.score.stream_left_out} cases left "
              "out: an HTTP error or a reply cut by max_tokens)", run.score.stream_agreement,
              run.policy.min_stream_agreement, differing)


def test_tool_call_triggers_match_the_baseline(tool_accuracy_run, request) -> None:
    run = tool_accuracy_run
    if run.baseline is None:
        _report(run, request, "tool_trigger_vs_intended", run.score.intended.as_dict())
        recorded = f"; this run recorded one in {run.recorded}" if run.recorded else ""
        pytest.skip("no --tool-baseline given and the model profile names none: whether a deployment calls a tool "
                    "is judged against a trusted deployment's baseline (record one with --record-tool-baseline)"
                    f"{recorded}")
    trigger = run.trigger
    # Whose the baseline is: a baseline of this same engine measures a regression against itself, not accuracy.
    request.node.user_properties.append((BASELINE_PROPERTY, json.dumps(run.baseline_entry)))
    _report(run, request, "tool_trigger_vs_baseline", {**trigger.as_dict(), "baseline": run.baseline.label,
                                                       "comparison": run.baseline_entry["comparison"]})
    allure.attach(confusion_csv(trigger, "baseline"), name="tool-call trigger: confusion against the baseline",
                  attachment_type=allure.attachment_type.CSV)
    compared, replies = trigger.total, run.score.replies
    assert compared == replies, (
        f"the baseline {run.baseline.label} covers {compared} of this run's {run.score.replies} replies")
    # Neither side ever called: F1 is undefined, and agreement (all "no call") is the figure to gate on.
    judged, minimum = (trigger.f1 if trigger.f1 is not None else trigger.agreement.rate), run.policy.min_trigger_f1
    assert judged >= minimum, (
        f"tool-call trigger F1 against the baseline {run.baseline.label}: {100 * judged:.1f}%, below the required "
        f"{100 * run.policy.min_trigger_f1:.1f}% (called where the baseline did not: {trigger.only_candidate}; "
        f"did not call where it did: {trigger.only_reference}; agreement {trigger.agreement}) "
        f"[{comparison_text(run.baseline_entry['comparison'])}]")
