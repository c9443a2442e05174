"""A verdict that means what it says (issue 13), end to end against the built-in reference engine.

- an unknown model name gets every capability the deployment serves tested;
- a capability the engine refuses is *not served*, with the engine's words, and
  fails the gate when it is required;
- the measurements run in the same invocation as the functional checks, after
  them, also under ``-n``;
- a run that tested nothing never passes.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import failed, run_suite

pytestmark = pytest.mark.e2e

UNKNOWN_MODEL = "acme-chat-7b"
FUNCTIONAL = "not (throughput or recall or recall_1m or soak or auth)"


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


def _capabilities(gate: dict) -> dict[str, dict]:
    return {row["name"]: row for row in gate["capabilities"]}


def test_an_unknown_model_gets_every_capability_it_serves_tested(pytester: pytest.Pytester) -> None:
    # The tool-accuracy set at 40 of its cases (every shape): what is proven is that tools are tested.
    result, outcomes = run_suite(pytester, f"--reference-model={UNKNOWN_MODEL}", "-m", FUNCTIONAL, "-n", "2",
                                 "--tool-accuracy-cases=40")
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    gate = _gate(pytester)
    assert gate["engine"]["model.profile"] == "generic"
    rows = _capabilities(gate)
    for name in ("tools", "reasoning", "thinking_modes", "code", "image", "video", "structured_outputs", "responses"):
        assert rows[name]["declared"] is False and rows[name]["ran"] > 0, rows[name]
    assert {rows[name]["discovered"] for name in ("tools", "image", "structured_outputs", "responses")} == {"served"}
    assert gate["discovery"]["probes"]["thinking_modes"]["settings"]["modes"]
    result.stderr.fnmatch_lines(["*probed in * s: tools served, image served, video served*"])
    result.stdout.fnmatch_lines(["capability*declared*discovered*required*ran*skipped*result"])


def test_a_text_only_deployment_has_image_not_served_and_requiring_it_fails(pytester: pytest.Pytester) -> None:
    args = (f"--reference-model={UNKNOWN_MODEL}", "--reference-serves=text-only", "-m", "image or text",
            "-k", "not usage")
    result, outcomes = run_suite(pytester, *args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    image = _capabilities(_gate(pytester))["image"]
    assert image["discovered"] == "not_served" and "is not a multimodal model" in image["evidence"]
    result.stdout.fnmatch_lines(["*skipped: not served by the engine: *HTTP 400*acme-chat-7b is not a multimodal model*"])

    result, outcomes = run_suite(pytester, *args, "--expect=image")
    assert result.ret == 1
    gate = _gate(pytester)
    assert gate["gate"] == "fail"
    assert any(reason.startswith("required capability 'image' is not served: ") for reason in gate["gate_failures"])
    # The image checks are failures, not skips: a skip that hides a required capability fails.
    image_checks = {test_id for test_id in outcomes if test_id.startswith("test_image.py")}
    assert image_checks and image_checks <= failed(outcomes)
    result.stdout.fnmatch_lines(["*GATE FAILURE: required capability 'image' is not served*", "GATE: FAIL*"])


def test_measurements_under_xdist_run_in_the_same_invocation_and_are_not_skipped(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall", "-n", "2", "--recall-tokens=4096")
    recall = {test_id: outcome for test_id, outcome in outcomes.items() if test_id.startswith("test_recall.py")}
    assert recall and set(recall.values()) == {"passed"}, result.stdout.str()[-3000:]
    gate = _gate(pytester)
    assert gate["gate"] == "pass" and gate["totals"]["passed"] == len(recall)
    assert any("ttft_s" in figures for figures in gate["figures"].values())


@pytest.mark.parametrize("selection", [("-k", "no_such_check"), ("-m", "soak")], ids=["nothing-collected",
                                                                                       "everything-skipped"])
def test_a_run_that_tested_nothing_never_passes(pytester: pytest.Pytester, selection: tuple[str, str]) -> None:
    result, _ = run_suite(pytester, *selection)
    assert result.ret == 1, result.stdout.str()[-2000:]
    assert _gate(pytester)["gate"] == "fail"
    result.stdout.fnmatch_lines(["*GATE FAILURE: no check ran*a run that tested nothing is not a pass*",
                                 "GATE: FAIL*"])
    assert "GATE: PASS" not in result.stdout.str()


def test_an_unknown_capability_in_expect_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "--expect=tools,telepathy", "-m", "text")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--expect: unknown capability 'telepathy'; known: text, streaming*"])
