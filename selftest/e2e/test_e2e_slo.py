"""End to end: the SLO check run by pytest against reference engines (issue 18).

It passes on a clean engine of either convention and reports its table (terminal,
HTML, CSV), chart and figures, the draft acceptance where the engine counts it and "not
reported by the engine" where it does not; ``slow-first-token`` (every first token 1 s late)
fails it with the attainment and the missed limit, also in the default run, whose
reference profile carries an SLO; without an SLO it is skipped,
saying so; an SLO in the model profile gates it like one on the command line; chat cells
(``--slo-endpoint chat``) report the reasoning and the answer apart; and a
bad value stops the run naming the option. Pass/fail rests on the defect's full
second against a 500 ms limit, never on this machine's timing.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import REPO, failed, run_suite

pytestmark = pytest.mark.e2e

CHECK = "test_slo.py::test_open_loop_load_meets_the_slo_attainment_and_goodput"
SEARCH = "test_slo.py::test_slo_search_reports_the_highest_rate_meeting_the_target"
PROFILE = REPO / "fixtures" / "profiles" / "models" / "reference.yaml"
# Two cells of 12 requests (the report's table has a row per cell); 8 and 32 req/s, not 4 and 16: the
# cells' arrivals are the run's waiting, 1.9 s instead of 3.75 s, and 32 req/s of 2 ms + 1 ms a token
# is still far inside a 500 ms TTFT and 50 ms TPOT (issue 27).
SMALL = ("-m", "slo", "--request-rate", "8,32", "--slo-requests", "12")
# One cell: the defect makes every request a second late at any rate, so a second cell proved nothing
# more, and 16 req/s sends its 12 requests in under a second (4 req/s took 3 s, each cell a second more).
ONE_CELL = ("-m", "slo", "--request-rate", "16", "--slo-requests", "12")


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_a_clean_engine_meets_the_slo_and_the_report_carries_every_cell(pytester: pytest.Pytester,
                                                                        convention: str) -> None:
    result, outcomes = run_suite(pytester, *SMALL, "--slo", "ttft=500,tpot=50", "--convention", convention)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert outcomes == {CHECK: "passed", SEARCH: "skipped"}
    result.stdout.fnmatch_lines(["*slo 128/32@8rps: 12/12 requests done, no errors*",
                                 "*128/32@32rps*32*12*12*100.0%*"])
    [case] = [json.loads(p.read_text()) for p in (pytester.path / "allure-results").glob("*-result.json")
              if json.loads(p.read_text())["name"].startswith("test_open_loop_load")]
    kinds = {a["type"] for a in case["attachments"] if a["name"].startswith("SLO open-loop")}
    assert {"text/html", "text/csv", "image/png", "application/json"} <= kinds
    # The output split (issue 41): the cells are completions, so no reasoning; the draft acceptance where the
    # engine counts it (the vLLM convention), and where it does not, said so with the reason, never a 0.
    [csv] = [(pytester.path / "allure-results" / a["source"]).read_text() for a in case["attachments"]
             if a["type"] == "text/csv"]
    header, *rows = [line.split(",") for line in csv.splitlines()]
    acceptance = [row[header.index("spec_decode_acceptance")] for row in rows]
    if convention == "vllm":
        result.stdout.fnmatch_lines(["*late sends*spec decode acceptance", "*128/32@32rps*[78]?.?%"])
        assert all(0.79 < float(value) < 0.81 for value in acceptance), acceptance
    else:
        result.stdout.fnmatch_lines(["*Speculative-decoding acceptance: not reported by the engine: engine profile "
                                     "'sglang' names no speculative-decoding counters*"])
        assert acceptance == ["not reported by the engine"] * 2
    result.stdout.fnmatch_lines(["*/v1/completions has no reasoning field*"])


def test_a_slow_first_token_fails_the_check_with_attainment_and_the_missed_limit(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *ONE_CELL, "--slo", "ttft=500,tpot=50", "--inject", "slow-first-token")
    assert failed(outcomes) == {CHECK}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*128/32@16rps: SLO attainment 0/12 = 0.0% (95% Wilson 0.0-24.2%) is below the target "
                                 "99%*missed: 12 over the ttft limit*P99 TTFT 1*"])


def without_slo(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("slo:")) + "\n"


def test_the_default_run_of_the_built_in_engine_has_an_slo_and_slow_first_token_fails_it(
        pytester: pytest.Pytester) -> None:
    # The reference profile's slo: the defect sweep's default command fails on the defect through this check.
    result, outcomes = run_suite(pytester, "-m", "slo", "--inject", "slow-first-token")
    assert failed(outcomes) == {CHECK}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*128/32@8rps: SLO attainment 0/16 = 0.0%*(model profile 'reference' (*"])


def test_without_an_slo_the_check_is_skipped_saying_how_to_give_one(pytester: pytest.Pytester) -> None:
    profile = pytester.path / "reference.yaml"
    profile.write_text(without_slo(PROFILE.read_text()))
    result, outcomes = run_suite(pytester, "-m", "slo", "-rs", "--profile", str(profile))
    assert outcomes == {CHECK: "skipped", SEARCH: "skipped"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*no SLO given: pass --slo ttft=MS,tpot=MS,e2e=MS*model profile 'reference' has none*"])


def test_an_slo_in_the_model_profile_gates_goodput_and_is_named(pytester: pytest.Pytester) -> None:
    profile = pytester.path / "reference-with-slo.yaml"
    profile.write_text(without_slo(PROFILE.read_text()) + "slo: {ttft_ms: 500, target: 0.99, min_goodput_rps: 1000, "
                                              "request_rate: 8, requests: 8}\n")
    result, outcomes = run_suite(pytester, "-m", "slo", "--profile", str(profile))
    assert failed(outcomes) == {CHECK}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"*128/32@8rps: goodput * req/s (8 requests meeting the SLO in * s) is below the "
                                 f"minimum 1000 req/s (model profile 'reference' ({profile}))*"])


def test_a_bad_slo_value_stops_the_run_naming_the_option(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "-m", "slo", "--slo", "ttft=soon")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--slo: 'ttft=soon': 'soon' is not a number of milliseconds*"])


def test_chat_cells_report_the_reasoning_and_the_answer_apart_and_keep_them_for_a_diff(
        pytester: pytest.Pytester) -> None:
    # Chat (--slo-endpoint chat): text prompts, one user message each; the built-in model reasons, then answers.
    bundle = pytester.path / "bundle"
    result, outcomes = run_suite(pytester, *ONE_CELL, "--slo", "ttft=500,tpot=50", "--slo-endpoint", "chat",
                                 "--slo-shape", "64/96", f"--run-bundle={bundle}")
    assert outcomes[CHECK] == "passed", result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*prompts from text cut to an estimated length (chat requests carry text, not token "
                                 "ids)*",
                                 "*P50 first reasoning ms*P50 first content ms*reasoning tok/req*content tok/req*",
                                 "*Reasoning tokens (64/96@16rps): usage.completion_tokens_details.reasoning_tokens, "
                                 "as the engine reported them*"])
    assert "/v1/completions has no reasoning field" not in result.stdout.str()
    [cell] = json.loads((bundle / "run.json").read_text())["cells"]
    assert cell["shape"]["endpoint"] == "chat"
    samples = cell["samples"]
    assert len(samples["first_content_ms"]) == 12 and min(samples["reasoning_tokens"]) > 0
    # The answer comes after the reasoning: its first token after the first output.
    assert sorted(samples["first_content_ms"])[6] > sorted(samples["ttft_ms"])[6]
