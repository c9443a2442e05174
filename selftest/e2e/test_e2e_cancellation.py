"""End to end: the cancellation checks (issue 15) run by pytest against the reference engine.

A clean engine passes both checks, streamed and not, on both conventions, and reports which
gauges it read and how long the return to idle took; each cancellation defect fails exactly
the checks that exist for it; an engine profile that names no metrics endpoint, an endpoint
that answers 404, and a profile that names no KV-cache gauge each say so in their words.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from suite_runner import failed, run_suite

pytestmark = pytest.mark.e2e

SELECTION = "cancellation"
IDLE = "test_cancellation.py::test_running_waiting_and_kv_cache_return_to_idle_after_clients_disconnect"
SERVING = "test_cancellation.py::test_engine_keeps_serving_after_clients_disconnect"


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


# Each defect with the options its run needs (short timeouts where the defect makes a check wait), the
# checks it must fail, and the lines its output must show.
EXPECTED_FAILURES: dict[str, tuple[tuple[str, ...], set[str], list[str]]] = {
    # A leaked request generates to max_tokens (4096 tokens at the engine's 1 ms each: over 3 s after the
    # cut, whatever the machine's load, since the engine paces by deadlines): past a 1 s timeout. The
    # engine still answers, so the serving check passes. The streamed idle check names the leaked
    # requests with the gauges that still hold them.
    "disconnect-keeps-generating": (("--cancellation-timeout", "1"), _both(IDLE), [
        "*4 streams cut mid-way: 1s later (--cancellation-timeout) the engine still holds them: "
        "vllm:num_requests_running 4, vllm:kv_cache_usage_perc *"]),
    # The wedge holds no request: the gauges return to idle, the idle check passes (it runs first in
    # the module). Every chat request after a mid-stream disconnect waits: the serving check fails
    # streamed and not, at the idle or the request timeout: both short, since they are waited for. The
    # request timeout also bounds the non-streamed requests the checks give up after 1 s (abandon_after_s):
    # at 3 s it still outlasts that cut by 2 s.
    "disconnect-wedge": (("--idle-timeout", "2", "--request-timeout", "3"), _both(SERVING), []),
}


def _figures(pytester: pytest.Pytester, stream: str) -> dict:
    for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase"):
        if case.get("name", "").endswith(f"[{stream}]") and "idle" in case.get("name", ""):
            for prop in case.iter("property"):
                if prop.get("name") == "cancellation":
                    return json.loads(prop.get("value", "{}"))
    raise AssertionError(f"no cancellation property for the [{stream}] idle check in junit.xml")


# The vLLM run is under xdist (-n 1): the checks run on the controller after the workers' functional phase.
# The SGLang run differs in the gauges' names only, so it runs without xdist (a worker's start, ~5 s, saved).
@pytest.mark.parametrize(("convention", "gauges", "xdist"), [
    ("vllm", {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
              "kv_cache_usage": "vllm:kv_cache_usage_perc"}, ("-n", "1")),
    ("sglang", {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
                "kv_cache_usage": "sglang:token_usage"}, ()),
])
def test_clean_engine_passes_and_reports_the_gauges_and_the_time_to_idle(
        pytester: pytest.Pytester, convention: str, gauges: dict[str, str], xdist: tuple[str, ...]) -> None:
    result, outcomes = run_suite(pytester, "-m", SELECTION, "--convention", convention, *xdist)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    assert outcomes == {test: "passed" for test in _both(IDLE) | _both(SERVING)}, outcomes
    for stream in ("non-streamed", "streamed"):
        figures = _figures(pytester, stream)
        assert figures["gauges"] == gauges, figures
        assert figures["seconds_to_idle"] is not None and figures["seconds_to_idle"] <= figures["timeout_s"]
        # The gauges were live: the four requests were counted while their clients were there.
        assert f"{gauges['running']} 4" in figures["while_open"], figures
    if xdist:
        # Alone on the engine: after the workers' functional checks, one at a time (said under xdist).
        result.stdout.fnmatch_lines(["*measurement(s) (cancellation) run one at a time, alone on the engine*"])


@pytest.mark.parametrize("defect", sorted(EXPECTED_FAILURES))
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str) -> None:
    options, expected, lines = EXPECTED_FAILURES[defect]
    result, outcomes = run_suite(pytester, "-m", SELECTION, "--inject", defect, *options)
    assert failed(outcomes) == expected, result.stdout.str()[-3000:]
    assert result.ret == 1
    if lines:
        result.stdout.fnmatch_lines(lines)


def test_an_engine_profile_without_metrics_skips_the_idle_check_with_the_reason(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", SELECTION, "--engine", "generic")
    # Generic takes no ignore_eos: the reference model's natural reply outlasts three streamed events, but
    # not the wait before a non-streamed request is given up, which then skips with that reason.
    assert outcomes == {**{test: "skipped" for test in _both(IDLE)}, f"{SERVING}[streamed]": "passed",
                        f"{SERVING}[non-streamed]": "skipped"}, outcomes
    result.stdout.fnmatch_lines(["*engine profile 'generic' names no metrics_endpoint*",
                                 "*answered all 4 non-streamed requests within 1s, before they could be given up*"])


def _engine_profile(pytester: pytest.Pytester, name: str, features: str) -> str:
    folder = pytester.path / "team" / "engines"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\ndescription: a vLLM deployment described by its team\n"
        "detect: {owned_by: [], version_endpoints: []}\nreasoning_field: reasoning\n"
        f"reasoning_effort_in: chat_template_kwargs\nfeatures:\n  ignore_eos: true\n  tokenize_endpoint: /tokenize\n"
        f"{features}", encoding="utf-8")
    return str(pytester.path / "team")


def test_a_metrics_endpoint_that_answers_404_skips_in_the_engines_words(pytester: pytest.Pytester) -> None:
    team = _engine_profile(pytester, "vllm-no-metrics", "  metrics_endpoint: /no-metrics-here\n  metric_names:\n"
                           "    running: ['vllm:num_requests_running']\n    waiting: ['vllm:num_requests_waiting']\n")
    result, outcomes = run_suite(pytester, "-m", SELECTION, "--profiles-dir", team, "--engine", "vllm-no-metrics")
    assert {test for test, outcome in outcomes.items() if outcome == "skipped"} == _both(IDLE), outcomes
    result.stdout.fnmatch_lines(["*the engine serves no metrics: GET /no-metrics-here: HTTP 404: *Not Found*"])


def test_a_profile_without_a_kv_gauge_checks_running_and_waiting_and_says_so(pytester: pytest.Pytester) -> None:
    team = _engine_profile(pytester, "vllm-no-kv", "  metrics_endpoint: /metrics\n  metric_names:\n"
                           "    running: ['vllm:num_requests_running']\n    waiting: ['vllm:num_requests_waiting']\n")
    result, outcomes = run_suite(pytester, "-m", SELECTION, "--profiles-dir", team, "--engine", "vllm-no-kv")
    assert result.ret == 0 and set(outcomes.values()) == {"passed"}, result.stdout.str()[-3000:]
    figures = _figures(pytester, "streamed")
    assert figures["notes"] == ["engine profile 'vllm-no-kv' names no KV-cache gauge: running and waiting are "
                                "checked, the KV cache is not"], figures
    assert "kv_cache_usage" not in figures["gauges"], figures
