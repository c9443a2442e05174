"""End to end: a capability counts as tested only on a genuine pass (issue 26, point 2).

Two ways the old verdict passed a deployment whose capability was never shown to work:

- every executed check of a *required* capability failed as an expected-failure record
  describes (llama.cpp's server drops every image, and each image check is a record):
  the row read "passed (16 known defect(s))". Now it reads "known broken" and the gate fails.
- every selected check of a *declared* capability was skipped (the engine profile names
  no way to send a video): the row read "not tested: all 5 skipped" under a green
  gate. Now that fails too, unless ``--allow-untested video`` says it is intended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_runner import ENGINE_WITHOUT_VIDEO, engine_without_video, run_suite

e2e = pytest.mark.e2e

# Every image check, recorded as what the model answers about an image the engine dropped: each
# problem in the check's own words (a record is matched without the discovery lead every failure carries):
# (check, message pattern) pairs, one record each.
DROPPED_IMAGE_PROBLEMS = (
    ("test_chart_values_are_read_and_the_dropping_quarter_is_named",
     "expected the values Q1=120, Q2=90, Q3=150 in this order; the answer has the numbers \\[\\]"),
    ("test_chart_values_are_read_and_the_dropping_quarter_is_named",
     "expected Q2 named as the quarter that dropped from the one before"),
    ("test_color_of_the_largest_area_is_named",
     "expected the largest area of bordered-\\w+-\\d+\\.png named \\w+ .*; the answer names no colour"),
    ("test_pure_color_image_is_named_by_its_color",
     "pure-\\w+-512\\.png is one single colour, \\w+ .*; the answer names no colour"),
    ("test_two_images_in_one_request_are_read_in_order",
     "expected the images\\S* main colours in order, red then blue; the answer names no colour"),
    ("test_the_image_is_counted_in_prompt_tokens_and_the_reply_completes",
     "usage.prompt_tokens is \\d+ with bordered-red-512\\.png and \\d+ without: the engine did not count"),
)
DROPPED_IMAGE_RECORDS = "records:\n" + "".join(
    f'  - check: "test_image.py::{check}[*]"\n    engine: vllm\n    model: "^reference-model$"\n'
    "    reason: the engine answers images 200 but drops them (injected for the self-test)\n"
    f'    source: selftest\n    date: "2026-12-05"\n    failure:\n      message: \'{message}\'\n'
    for check, message in DROPPED_IMAGE_PROBLEMS)


def _rows(pytester: pytest.Pytester) -> tuple[dict, dict]:
    verdict = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    return verdict, {row["name"]: row for row in verdict["capabilities"]}


@e2e
def test_a_required_capability_whose_checks_are_all_known_defects_fails_the_gate(pytester: pytest.Pytester) -> None:
    records = pytester.path / "records.yaml"
    records.write_text(DROPPED_IMAGE_RECORDS, encoding="utf-8")
    result, _ = run_suite(pytester, "-m", "image", "--inject", "media-ignored", "--expect", "image",
                          f"--expectations={records}", f"--gate-json={pytester.path / 'gate.json'}")
    verdict, rows = _rows(pytester)
    assert verdict["totals"]["known_defect"] >= 10 and verdict["totals"]["failed"] == 0, verdict["failing_checks"]
    assert result.ret != 0 and verdict["gate"] == "fail"
    assert rows["image"]["result"].startswith("FAIL: required capability 'image' is known broken: no core check ")
    assert not rows["image"]["tested"]
    result.stdout.fnmatch_lines(["*GATE FAILURE: required capability 'image' is known broken*", "*GATE: FAIL*"])


@e2e
def test_a_declared_capability_whose_checks_all_skipped_fails_unless_allowed(pytester: pytest.Pytester) -> None:
    # An engine profile naming no video content type: each video check skips, saying so.
    common = ("-m", "video or text", "-k", "video or arithmetic", "--engine", ENGINE_WITHOUT_VIDEO,
              "--profiles-dir", engine_without_video(pytester.path / "team"),
              f"--gate-json={pytester.path / 'gate.json'}")
    result, outcomes = run_suite(pytester, *common)
    verdict, rows = _rows(pytester)
    assert {o for test, o in outcomes.items() if test.startswith("test_video.py")} == {"skipped"}
    assert result.ret != 0 and verdict["gate"] == "fail"
    assert rows["video"]["coverage_failure"].startswith(
        "capability 'video' is declared by the model profile but was not tested: all ")
    assert f"engine profile '{ENGINE_WITHOUT_VIDEO}' names no video content type" in rows["video"]["coverage_failure"]
    assert "--allow-untested video" in rows["video"]["coverage_failure"]

    result, _ = run_suite(pytester, *common, "--allow-untested", "video")
    verdict, rows = _rows(pytester)
    assert result.ret == 0 and verdict["gate"] == "pass", verdict["gate_failures"]
    assert rows["video"]["allowed_untested"]
    assert rows["video"]["result"].startswith("not tested (allowed with --allow-untested): all ")
