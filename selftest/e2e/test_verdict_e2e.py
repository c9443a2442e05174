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
from suite_runner import NO_LATENCY, failed, run_suite

pytestmark = pytest.mark.e2e

UNKNOWN_MODEL = "acme-chat-7b"
# Every functional check and the measurements that are quick at a small size (tool accuracy, cancellation,
# recall at --recall-tokens): the throughput cells and the million-token prompt have their own self-tests.
CHECKS = "not (throughput or recall_1m or soak or auth)"


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


def _capabilities(gate: dict) -> dict[str, dict]:
    return {row["name"]: row for row in gate["capabilities"]}


def test_an_unknown_model_gets_every_capability_it_serves_tested_and_the_measurements_run_after_under_xdist(
        pytester: pytest.Pytester) -> None:
    # The tool-accuracy set at 40 of its cases (every shape) and one sample per check: what is proven is that
    # each capability is tested, not a rate over samples. Recall at 4,096 tokens rides along: the run is
    # under -n already, and its measurements (tool accuracy, cancellation, recall) run in the same
    # invocation, after the workers' functional checks (issue 27: a second -n 2 run proved that alone).
    result, outcomes = run_suite(pytester, f"--reference-model={UNKNOWN_MODEL}", "-m", CHECKS,
                                 "-n", "2", "--tool-accuracy-cases=40", "--trials=1", "--recall-tokens=4096")
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
    # The measurements: run, not skipped, and counted in the same verdict as the workers' checks.
    recall = {test_id: outcome for test_id, outcome in outcomes.items() if test_id.startswith("test_recall.py")}
    assert recall and set(recall.values()) == {"passed"}, result.stdout.str()[-3000:]
    assert gate["gate"] == "pass"
    assert gate["totals"]["passed"] == list(outcomes.values()).count("passed")
    assert any("ttft_s" in figures for test_id, figures in gate["figures"].items() if "test_recall.py" in test_id)


def test_a_text_only_deployment_has_image_not_served_and_requiring_it_fails(pytester: pytest.Pytester) -> None:
    # The engine answering at once, one sample per check: what is proven is how a refusal reads (issue 27).
    args = (*NO_LATENCY, "--trials=1", f"--reference-model={UNKNOWN_MODEL}", "--reference-serves=text-only", "-m",
            "image or text", "-k", "not usage")
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
