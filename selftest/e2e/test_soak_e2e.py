"""The mixed-traffic soak: its pacing and report, and the check against reference engines.

A short soak (0.2 minutes, faster than seed 001's 0.5 req/s so the windows hold
requests) passes on a clean engine and reports windows and the engine's /metrics
figures; ``degrading-503`` (every second request refused after the first 20) fails
it, naming the failures and the rising error rate; the soak is off without
``--soak-minutes`` and refuses to share the engine, each with its reason; a text-only
model gets text only, said in the report; Ctrl-C ends it early with the report and
the run ends as interrupted. The slow tier runs the issue's 2-minute soak at the
default 0.5 req/s once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from suite_runner import REPO, failed, run_suite

from engine_acceptance.load.soak.traffic import (
    SoakReport,
    SoakSample,
    SoakSettings,
    SoakSettingsError,
    is_image,
    parse_prometheus,
    pick_series,
    soak_settings_from_options,
    summarize_windows,
)

CHECK = "test_soak.py::test_mixed_traffic_soak_has_no_failed_request_and_no_rising_error_rate"
PROFILE = REPO / "fixtures" / "profiles" / "models" / "reference.yaml"


def _summary(pytester: pytest.Pytester) -> dict:
    for prop in ET.parse(pytester.path / "junit.xml").getroot().iter("property"):
        if prop.get("name") == "soak":
            return json.loads(prop.get("value", "{}"))
    raise AssertionError("no soak property in junit.xml")


# --- the pacing and the report, without an engine -------------------------------------------

def test_image_requests_are_spread_evenly_at_exactly_their_share() -> None:
    kinds = [is_image(i, 0.2) for i in range(100)]
    assert sum(kinds) == 20 and kinds[:10] == [False] * 4 + [True] + [False] * 4 + [True]
    assert not any(is_image(i, 0.0) for i in range(50)) and all(is_image(i, 1.0) for i in range(50))


def _sample(index: int, sent_s: float, e2e_s: float = 0.1, error: str | None = None) -> SoakSample:
    return SoakSample(index, "text", sent_s, sent_s, e2e_s if error is None else None, error)


def test_windows_split_the_soak_and_a_rising_error_rate_is_named() -> None:
    samples = [_sample(i, i * 2.0, error="HTTP 503: busy" if i >= 40 and i % 2 else None) for i in range(60)]
    windows = summarize_windows(samples, 120.0)
    assert [w.requests for w in windows] == [6] * 10 and [w.failures for w in windows][-1] == 3
    report = SoakReport(SoakSettings(2.0), 120.0, samples)
    problems = report.problems()
    assert problems[0].startswith("10/60 soak requests failed: HTTP 503 x10 (first: request 41, text, due at 82.0 s")
    assert problems[1] == ("the error rate rose from 0% (0/6) in the first window (0-12 s) to 50% (3/6) in the last "
                           "(108-120 s)")
    clean = SoakReport(SoakSettings(2.0), 120.0, [_sample(i, i * 2.0) for i in range(60)])
    assert clean.problems() == [] and clean.e2e_ms(50) == pytest.approx(100.0)


def test_prometheus_text_is_parsed_and_memory_and_queue_series_picked() -> None:
    text = ("# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="m"} 2.0\nvllm:num_requests_waiting{model_name="m"} 0\n'
            'vllm:prompt_tokens_total{model_name="m"} 1234\nprocess_resident_memory_bytes 4.9e+09\n'
            "sglang:num_queue_reqs 3\nmalformed line\n")
    series = parse_prometheus(text)
    assert series['vllm:prompt_tokens_total{model_name="m"}'] == 1234.0
    picked = pick_series(series, ["num_requests_(running|waiting)$", "num_(running|queue)_reqs$",
                                  "^process_resident_memory_bytes$"])
    assert picked == {'vllm:num_requests_running{model_name="m"}': 2.0, 'vllm:num_requests_waiting{model_name="m"}':
                      0.0, "process_resident_memory_bytes": 4.9e9, "sglang:num_queue_reqs": 3.0}


@pytest.mark.parametrize(("options", "message"), [
    ({"minutes": "x"}, "--soak-minutes: 'x' is not a number"),
    ({"minutes": "0"}, "--soak-minutes: '0' must be above 0"),
    ({"rate": "0"}, "--soak-rate: '0' must be above 0 requests per second"),
    ({"image_share": "1.5"}, "--soak-image-share: '1.5' must be between 0 and 1"),
    ({"workers": "2.5"}, "--soak-workers: '2.5' must be a whole number of at least 1"),
], ids=["minutes-text", "minutes-zero", "rate", "share", "workers"])
def test_bad_soak_options_name_the_option_and_value(options: dict[str, str], message: str) -> None:
    given = {"minutes": "1", "rate": "0.5", "workers": "4", "image_share": "0.2", **options}
    with pytest.raises(SoakSettingsError) as error:
        soak_settings_from_options(**given)
    assert str(error.value) == message
    assert soak_settings_from_options(minutes=None, rate="0.5", workers="4", image_share="0.2") is None


# --- end to end -----------------------------------------------------------------------------

@pytest.mark.e2e
def test_short_soak_passes_on_a_clean_engine_and_reports_windows_and_metrics(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "soak", "--soak-minutes", "0.2", "--soak-rate", "4")
    assert result.ret == 0 and outcomes == {CHECK: "passed"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "*soak 0.2 min at 4 req/s, 20% image, up to 4 workers*",
        "*soak 48 requests (9 with an image) in 0.20 min at 4 req/s, up to 4 workers: 0 failed, E2E median*",
        "*soak 0-10 * 40 * 0 * 0%*",
        "*soak   process_resident_memory_bytes: start * MB, end * MB*",
        "*soak   vllm:num_requests_waiting*: start 0, end 0*",
    ])
    summary = _summary(pytester)
    assert summary["requests"] == 48 and summary["failures"] == 0 and summary["p95_e2e_ms"] > 0
    assert len(summary["windows"]) == 2 and summary["metrics_note"] is None


@pytest.mark.e2e
def test_degrading_engine_fails_the_soak_naming_failures_and_the_rising_error_rate(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "soak", "--soak-minutes", "0.2", "--soak-rate", "5",
                                 "--inject", "degrading-503")
    assert failed(outcomes) == {CHECK}, result.stdout.str()[-3000:]
    # The capability probes before the run (16 chat requests on a healthy engine: image and video are
    # each asked with and without the media, the prefix cache's prompt twice, a thinking budget once)
    # count among the engine's first 20, so refusals start at the soak's 5th request.
    result.stdout.fnmatch_lines([
        "*28/60 soak requests failed: HTTP 503 x28 (first: request 5, text, due at 1.0 s*",
        "*the error rate rose from 46% (23/50) in the first window (0-10 s) to 50% (5/10) in the last (10-12 s)*",
    ])


@pytest.mark.e2e
def test_soak_is_off_by_default_and_a_run_of_it_alone_tests_nothing(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "soak")
    assert outcomes == {CHECK: "skipped"}
    result.stdout.fnmatch_lines(["*the soak is off by default: give --soak-minutes N*"])
    # Nothing ran, so the gate cannot pass.
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*GATE FAILURE: no check ran*"])


@pytest.mark.e2e
def test_text_only_model_gets_text_only_and_the_report_says_why(pytester: pytest.Pytester) -> None:
    profile = pytester.path / "text-only.yaml"
    profile.write_text(PROFILE.read_text().replace("reasoning, image, video,", "reasoning,"))
    # 12 requests in 3 s (was 6 s at 2 req/s): at the default 20% share the 5th and the 10th would carry an image.
    result, outcomes = run_suite(pytester, "-m", "soak", "--soak-minutes", "0.05", "--soak-rate", "4",
                                 "--profile", str(profile), "--reference-serves=text-only")
    assert outcomes == {CHECK: "passed"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*soak 12 requests (0 with an image)*",
                                 "*note: text only, no image requests: not served by the engine: *is not a multimodal "
                                 "model*"])


@pytest.mark.e2e
def test_ctrl_c_ends_the_soak_early_with_a_report_and_the_run_as_interrupted(tmp_path: Path) -> None:
    gate = tmp_path / "gate.json"
    # Without hypothesis's plugin, as suite_runner.run_suite: it imports hypothesis (a second) for nothing.
    command = [sys.executable, "-m", "pytest", "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO),
               str(REPO / "tests"), "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
               f"--alluredir={tmp_path / 'allure'}",
               f"--gate-json={gate}", "-m", "soak", "--soak-minutes", "2", "--soak-rate", "2"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if "Ctrl-C ends it early" in line:
            break
    # A second of the soak (its first requests sent), then Ctrl-C: 3 s proved nothing more (issue 27).
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    output = "".join(seen) + rest
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert "ENDED EARLY: SIGINT after 0.0" in output and "requests (" in output, output[-3000:]
    assert json.loads(gate.read_text())["interrupted"]


@pytest.mark.e2e
@pytest.mark.slow
def test_two_minute_soak_at_seed_001_rate_passes_on_the_reference_engine(pytester: pytest.Pytester) -> None:
    """Slow tier: the issue's 2-minute soak at the default 0.5 req/s, 20% image, 4 workers."""
    result, outcomes = run_suite(pytester, "-m", "soak", "--soak-minutes", "2")
    assert result.ret == 0 and outcomes == {CHECK: "passed"}, result.stdout.str()[-3000:]
    summary = _summary(pytester)
    assert summary["requests"] == 60 and summary["image_requests"] == 12 and summary["failures"] == 0
    assert len(summary["windows"]) == 10 and all(w["requests"] == 6 for w in summary["windows"])
    for line in result.stdout.lines:
        if "engine-acceptance: soak" in line:
            print(line)
