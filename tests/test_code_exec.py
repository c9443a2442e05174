"""Model-written code, checked and run in a sandbox (TEST-PLAN §4; seed 001's code prompt).

The reply's code is extracted, checked against the allow-list first (code that fails
it is a failure with every reason, and is never run), then run in the sandbox
(:mod:`engine_acceptance.sandbox.runner`: separate ``python -I``, no credentials, rlimits,
private temp dir, Landlock where the kernel has it) on hidden cases. The verdict
comes from the sandbox's structured result: every case must return the expected new
list and leave its input unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, reply_of, short
from engine_acceptance.sandbox.code_extraction import check_function_source, extract_code
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.sandbox.runner import CaseRun, run_function

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.code_exec, pytest.mark.requires("code")]


def _case_problems(case: dict[str, Any], run: CaseRun | None) -> list[str]:
    name = case["name"]
    if run is None:
        return [f"{name}: no result"]
    if run.error:
        return [f"{name}: raised {run.error['type']}: {run.error['message']}"]
    problems = []
    returned = run.returned if run.returned_repr is None else run.returned_repr
    if run.returned_type != "list" or run.returned != case["expected"]:
        problems.append(f"{name}: unique_sorted({case['input']}) returned {returned!r} ({run.returned_type}), "
                        f"expected {case['expected']}")
    if run.input_after != case["input"]:
        after = run.input_after if run.input_after_repr is None else run.input_after_repr
        problems.append(f"{name}: the input list was modified: {case['input']} became {after!r}")
    if run.returned_is_input:
        problems.append(f"{name}: returned the input list itself, not a new list")
    return problems


async def test_unique_sorted_passes_the_hidden_cases_in_the_sandbox(chat, prompts, model_profile,
                                                                    acceptance) -> None:
    spec = prompts["code"]["unique_sorted"]
    reply = reply_of(await chat({"messages": [{"role": "user", "content": spec["prompt"]}], "temperature": 0,
                                 "max_tokens": model_profile.output_budget(spec["max_tokens"])}, stream=False))
    code = extract_code(reply.content, function=spec["function"], reasoning_markers=model_profile.reasoning_markers)
    assert code is not None, f"no Python code defining {spec['function']} in the reply: {short(reply.content, 400)!r}"
    allure.attach(code.source, name=f"extracted code ({code.found_as})", attachment_type=allure.attachment_type.TEXT)
    refused = check_function_source(code.source, function=spec["function"])
    # One problem, the code refused; the reasons say why (a record for it covers any reason).
    assert not refused, "the code fails the allow-list and was not run: " + "; ".join(refused)
    cases = spec["cases"]
    # The sandbox blocks on its child: off the event loop.
    result = await asyncio.to_thread(run_function, code.source, function=spec["function"],
                                     inputs=[case["input"] for case in cases])
    attach_json("sandbox result", result.to_report(), acceptance.redactor)
    assert result.ok, f"the sandbox gave no verdict: {result.failure()}"
    runs = {run.index: run for run in result.cases}
    problems = [problem for index, case in enumerate(cases) for problem in _case_problems(case, runs.get(index))]
    assert_no_problems(problems, header=f"{len(problems)} hidden case problem(s)")
