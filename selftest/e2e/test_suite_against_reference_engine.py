"""End to end: the acceptance suite run by pytest against the reference engine.

Each injected defect must fail exactly the checks that exist for it, and a clean
engine must fail none: this is what proves every check can fail, and fails for
the right reason. Runs go through ``pytester``: the whole-suite runs in a new process, as a
user runs them; the narrow ones in-process (suite_runner says why).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from suite_runner import NO_LATENCY, SMALLER_MEASUREMENTS, failed, run_suite

pytestmark = pytest.mark.e2e

# Later capabilities have their own self-tests; these runs stay on the checks of TEST-PLAN §1.
TEXT_AND_STREAMING = "text or streaming"
# The defect proofs below: the engine answers at once and every check sends one sample. Each of these
# defects is in every reply it touches, so one sample fails a check as three do; the latency model is a
# measurement's ground truth, not these checks' (issue 27).
AT_ONCE_ONE_SAMPLE = (*NO_LATENCY, "--trials=1")
# The whole run's measurements at suite_runner's smaller size, recall at 4,096 tokens instead of 65,536: its
# thirteen checks took 17 s of the run's 62 at 65,536, and a prompt's length is the subject of recall's own
# self-tests (test_e2e_recall.py, up to the million tokens), not of a convention's, a key's or the report's.
WHOLE_RUN_SIZES = (*(arg for arg in SMALLER_MEASUREMENTS if not arg.startswith("--recall-tokens=")),
                   "--recall-tokens=4096")
REASONING_SEPARATION_STREAMED = {
    "test_reasoning_separation.py::test_reasoning_arrives_in_the_reasoning_field_not_in_content[streamed]",
    "test_reasoning_separation.py::test_content_holds_no_reasoning_markers[streamed]",
}
STREAM_END = {"test_streaming.py::test_stream_ends_with_done_and_a_final_finish_reason"}
USAGE = {
    "test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[non-streamed]",
    "test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[streamed]",
}


@pytest.mark.parametrize(
    ("defect", "expected_failures"),
    [
        ("reasoning-leak", REASONING_SEPARATION_STREAMED),
        ("no-done", STREAM_END),
        ("bad-usage", USAGE),
    ],
    ids=["reasoning-leak", "no-done", "bad-usage"],
)
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str,
                                               expected_failures: set[str]) -> None:
    result, outcomes = run_suite(pytester, *AT_ONCE_ONE_SAMPLE, "-m", TEXT_AND_STREAMING, "--inject", defect)
    assert failed(outcomes) == expected_failures, result.stdout.str()[-3000:]
    assert result.ret == 1


def test_empty_content_fails_the_content_checks(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *AT_ONCE_ONE_SAMPLE, "-m", TEXT_AND_STREAMING, "--inject", "empty-content")
    assert {
        "test_text.py::test_reply_has_content_and_a_valid_finish_reason[non-streamed]",
        "test_text.py::test_reply_has_content_and_a_valid_finish_reason[streamed]",
    } <= failed(outcomes), result.stdout.str()[-3000:]


def test_reasoning_leak_failure_names_the_markers(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, *AT_ONCE_ONE_SAMPLE, "--inject", "reasoning-leak", "-k", "markers")
    result.stdout.fnmatch_lines(["*reasoning markers*<think>*in content*"])


def test_clean_parallel_run_on_sglang_with_an_api_key_passes_every_check_writes_the_report_and_never_the_key(
        pytester: pytest.Pytester) -> None:
    # One whole-suite run, as a user runs it (a new process, two xdist workers, an API key), on the
    # SGLang convention (reasoning in reasoning_content, its error bodies and /get_server_info), proves
    # it all, each whole run costing most of a minute of the self-tests: every check passes, the
    # report is complete, and the key reaches the engine from every worker yet never the report. The
    # whole suite runs on the vLLM convention, serially and at its full size, in CI's first stage (the
    # README's first command), and serially with a defect below (test_e2e_throughput.py, early EOS).
    secret = "sk-selftest-4f8a2c9e1b"
    result, outcomes = run_suite(pytester, "-n", "2", "--api-key", secret, "--convention", "sglang",
                                 *WHOLE_RUN_SIZES, in_process=False)
    assert result.ret == 0 and outcomes and not failed(outcomes), result.stdout.str()[-3000:]
    assert "passed" in outcomes.values()
    result.stdout.fnmatch_lines(["*TARGET: THE BUILT-IN REFERENCE ENGINE, NOT A REAL DEPLOYMENT*"])
    allure_dir = pytester.path / "allure-results"
    results = [json.loads(path.read_text()) for path in allure_dir.glob("*-result.json")]
    assert len(results) == len(outcomes), "one Allure result per test"
    environment = (allure_dir / "environment.properties").read_text()
    assert "target = BUILT-IN REFERENCE ENGINE" in environment
    assert "engine.kind = sglang" in environment and "model = reference-model" in environment
    long_base64 = re.compile(r"[A-Za-z0-9+/]{120,}={0,2}")
    for path in allure_dir.iterdir():
        text = path.read_text(errors="replace")
        assert secret not in text, f"API key found in {path.name}"
        # The run includes the image, video and corrupt-media checks: no payload may be copied whole.
        found = long_base64.search(text)
        assert found is None, f"a base64 run of {len(found.group(0))} chars in {path.name}"
    assert secret not in result.stdout.str()


def test_unreachable_engine_stops_the_run_at_once_with_one_message(pytester: pytest.Pytester) -> None:
    started = time.monotonic()
    result, outcomes = run_suite(pytester, "--engine-url=http://127.0.0.1:9")
    elapsed = time.monotonic() - started
    assert result.ret == 6
    assert elapsed < 15, f"took {elapsed:.1f}s"
    output = result.stdout.str() + result.stderr.str()
    assert output.count("engine unreachable") == 1, output
    assert not outcomes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine-url=ftp://x"], "--engine-url: 'ftp://x' is not an http(s) URL"),
        (["--engine", "tgi"], "--engine: 'tgi' is not one of"),
        (["--inject", "nonsense"], "--inject: unknown defect 'nonsense'"),
        (["--idle-timeout", "0"], "--idle-timeout: '0' must be a positive number"),
        (["--profile", "no-such-profile"], "no model profile named 'no-such-profile'"),
    ],
    ids=["bad-url", "bad-engine", "unknown-defect", "zero-timeout", "unknown-profile"],
)
def test_bad_option_is_a_usage_error_naming_option_and_value(pytester: pytest.Pytester, args: list[str],
                                                             message: str) -> None:
    result, _ = run_suite(pytester, *args)
    assert result.ret == 4
    assert message in result.stderr.str() + result.stdout.str()
