"""A thinking switch that faults cannot read as "not served" (issue 39), end to end against the reference engine.

The reference engine runs under a model name no profile matches (``qwen3-8b``: the generic
model profile, reasoning and the switch discovered), the whole default selection under
``-n 2``, with a defect that breaks the switches:

- ``thinking-switch-template-400``: every request carrying a known switch is answered 400
  in vLLM's words for a chat template that crashes (``'thinking_budget' is undefined``);
  the model still reasons by default;
- ``thinking-on-500``: the model does not reason by default, turning thinking off works,
  and turning it on is answered 500 ``Internal server error``.

The suite before this issue read both as "not served" and passed the gate. Neither answer
is a refusal the engine profile lists, so thinking_modes is broken (and reasoning too, when
whether the model reasons cannot be told): the thinking checks fail leading with the
engine's words and the switch form that got them, and the gate fails naming them. ``--not-served thinking_modes`` states the intent.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import NO_LATENCY, SMALLER_MEASUREMENTS, failed, run_suite

pytestmark = pytest.mark.e2e

UNPROFILED = "--reference-model=qwen3-8b"
# The default selection, its measurements at the smaller size (recall at 4,096 tokens) and one sample per check:
# what is proven is how the switches are judged, not a rate. The latency model stays: the cancellation checks
# leave requests mid-way, which needs a reply that takes time.
WHOLE_RUN = ("-n", "2", "--trials=1",
             *(arg for arg in SMALLER_MEASUREMENTS if not arg.startswith("--recall-tokens=")), "--recall-tokens=4096")
TEMPLATE_CRASH = "chat_template_kwargs.enable_thinking=false: HTTP 400: 'thinking_budget' is undefined"
ON_FAILED = "chat_template_kwargs.enable_thinking=true: HTTP 500: Internal server error"


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("defect", "broken", "words"), [
    ("thinking-switch-template-400", ("thinking_modes",), TEMPLATE_CRASH),
    ("thinking-on-500", ("reasoning", "thinking_modes"), ON_FAILED),
], ids=["thinking-switch-template-400", "thinking-on-500"])
def test_a_thinking_switch_that_faults_is_broken_and_fails_the_gate_in_the_engines_words(
        pytester: pytest.Pytester, defect: str, broken: tuple[str, ...], words: str) -> None:
    result, outcomes = run_suite(pytester, UNPROFILED, "--inject", defect, *WHOLE_RUN)
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]
    gate = _gate(pytester)
    assert gate["gate"] == "fail"
    rows = {row["name"]: row for row in gate["capabilities"]}
    for name in broken:
        row = rows[name]
        assert row["discovered"] == "broken" and words in row["evidence"], row
        assert f"--not-served {name}" in row["evidence"], row
    # The thinking checks run and fail leading with the switch's fault (a broken capability is tested), and
    # nothing else failed: the switches' fault is what fails the gate.
    failing = failed(outcomes)
    assert failing and all(check.startswith("test_thinking.py::") for check in failing), failing
    for check in gate["failing_checks"]:
        assert check["reason"].startswith("thinking_modes found broken by capability discovery ("), check
        assert words in check["reason"], check
    assert rows["thinking_modes"]["failed"] == len(failing), rows["thinking_modes"]
    # A broken capability no check shows (reasoning, when the model does not reason by default) fails by itself.
    for name in set(broken) - {"thinking_modes"}:
        assert any(failure.startswith(f"capability '{name}' is broken (discovered: ") and words in failure
                   for failure in gate["gate_failures"]), gate["gate_failures"]
    result.stdout.fnmatch_lines([f"thinking_modes found broken by capability discovery ({words}*",
                                 "thinking_modes *broken *failed*", "GATE: FAIL*"])


def test_stating_thinking_modes_not_served_skips_the_crashing_switch_and_says_where_it_was_stated(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, UNPROFILED, "--inject", "thinking-switch-template-400", *NO_LATENCY,
                                 "--trials=1", "--not-served", "thinking_modes", "-m", "thinking or text",
                                 "-k", "mode or arithmetic")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    thinking = {test: outcome for test, outcome in outcomes.items() if test.startswith("test_thinking.py")}
    assert thinking and set(thinking.values()) == {"skipped"}, outcomes
    row = next(row for row in _gate(pytester)["capabilities"] if row["name"] == "thinking_modes")
    assert row["discovered"] == "not_served (stated)", row
    assert row["result"].startswith("not tested: not served (stated with --not-served); probe found it broken: "
                                    f"{TEMPLATE_CRASH}"), row
    result.stdout.fnmatch_lines(["thinking_modes *not served (stated)*", "GATE: PASS*"])
