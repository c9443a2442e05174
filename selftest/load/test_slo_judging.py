"""SLOs: which requests meet them, attainment with its Wilson bound, goodput, and the options.

Records are built by hand (no engine, no clock): every figure is known exactly.
"""

from __future__ import annotations

import math

import pytest

from engine_acceptance.load.metrics import RequestRecord
from engine_acceptance.load.closed_loop.settings import SettingsError
from engine_acceptance.load.open_loop.slo import SloSpec, evaluate_slo, meets_slo, missed_metrics, parse_slo_limits
from engine_acceptance.load.open_loop.report import slo_chart_png, slo_csv, slo_table_lines
from engine_acceptance.load.open_loop.settings import OpenLoopSettings, open_loop_settings_from_options
from engine_acceptance.profiles.profile import load_model_profile


def ok(ttft_ms: float, tpot_ms: float | None, e2e_ms: float) -> RequestRecord:
    return RequestRecord(0.0, ttft_s=ttft_ms / 1000, tpot_s=None if tpot_ms is None else tpot_ms / 1000,
                         e2e_s=e2e_ms / 1000, output_tokens=32)


FAILED = RequestRecord(0.0, "http_503", "overloaded")


def test_limits_parse_any_subset_in_milliseconds_and_bad_ones_are_named() -> None:
    assert parse_slo_limits("ttft=500,tpot=50,e2e=8000") == {"ttft": 500.0, "tpot": 50.0, "e2e": 8000.0}
    assert parse_slo_limits("TPOT_ms=12.5") == {"tpot": 12.5}
    for bad, words in (("itl=5", "METRIC=MS"), ("ttft", "METRIC=MS"), ("ttft=soon", "not a number"),
                       ("ttft=0", "above 0"), ("ttft=inf", "finite"), ("ttft=1,ttft=2", "twice")):
        with pytest.raises(ValueError, match=words):
            parse_slo_limits(bad)


def test_a_request_meets_the_slo_when_it_succeeded_and_every_limited_metric_is_within_its_limit() -> None:
    limits = {"ttft": 500.0, "tpot": 50.0}
    assert meets_slo(ok(500, 50, 99999), limits), "at the limit meets it; e2e is not limited"
    assert missed_metrics(ok(501, 60, 1), limits) == ["ttft", "tpot"]
    assert missed_metrics(FAILED, limits) == ["failed"]
    assert meets_slo(ok(100, None, 100), limits), "a one-token reply has no TPOT to miss"


def test_attainment_counts_every_request_sent_and_goodput_is_meeting_over_duration() -> None:
    records = [ok(100, 10, 500)] * 7 + [ok(900, 10, 500), ok(100, 90, 500), FAILED]
    outcome = evaluate_slo("128/32@4rps", 4.0, records, 2.5, {"ttft": 500.0, "tpot": 50.0}, late_sends=1,
                           max_in_flight=3)
    assert (outcome.attainment.successes, outcome.attainment.total) == (7, 10)
    assert outcome.attainment.lower < 0.7 < outcome.attainment.upper
    assert outcome.goodput_rps == pytest.approx(7 / 2.5)
    assert outcome.missed == {"ttft": 1, "tpot": 1, "failed": 1}
    # Percentiles over the nine successful requests: P50 TTFT 100 ms, P99 near the one at 900.
    assert outcome.percentiles_ms["p50_ttft_ms"] == pytest.approx(100.0)
    assert outcome.percentiles_ms["p99_ttft_ms"] > 800
    assert set(outcome.percentiles_ms) == {f"p{p}_{m}_ms" for p in (50, 90, 99) for m in ("ttft", "tpot", "e2e")}


def test_a_cell_below_target_or_minimum_goodput_fails_with_the_figures() -> None:
    records = [ok(100, 10, 500)] * 98 + [ok(900, 10, 500)] * 2
    outcome = evaluate_slo("128/32@4rps", 4.0, records, 25.0, {"ttft": 500.0})
    assert not outcome.problems(SloSpec({"ttft": 500.0}, target=0.98))
    [attainment] = outcome.problems(SloSpec({"ttft": 500.0}, target=0.99))
    assert "98/100 = 98.0% (95% Wilson" in attainment and "below the target 99%" in attainment
    assert "2 over the ttft limit" in attainment and "P99 TTFT" in attainment
    [goodput] = outcome.problems(SloSpec({"ttft": 500.0}, target=0.9, min_goodput_rps=5, source="model profile x"))
    assert "goodput 3.92 req/s" in goodput and "below the minimum 5 req/s (model profile x)" in goodput


def test_the_table_csv_and_chart_carry_every_cell() -> None:
    spec = SloSpec({"ttft": 500.0, "tpot": 50.0})
    outcomes = [evaluate_slo(f"128/32@{r}rps", r, [ok(900 if math.isinf(r) else 100 * r, 10, 500)] * 4, 2.0,
                             spec.limits_ms)
                for r in (1.0, 2.0, math.inf)]
    lines = slo_table_lines(outcomes)
    assert "P99 TTFT ms" in lines[0] and "95% Wilson" in lines[0] and len(lines) == 2 + 3
    csv_text = slo_csv(outcomes)
    assert csv_text.splitlines()[0].startswith("key,request_rate,sent,meeting,attainment")
    assert "128/32@infrps,inf,4,0," in csv_text, "at inf every TTFT was over the limit"
    assert slo_chart_png("t", spec, outcomes)[:8] == b"\x89PNG\r\n\x1a\n"


def options(**given: object) -> OpenLoopSettings:
    values: dict[str, object] = {"request_rate": None, "burstiness": "1", "load_seed": 0, "slo": None,
                                 "slo_target": None, "slo_min_goodput": None, "slo_requests": None,
                                 "slo_shape": "128/32", "slo_search": False}
    return open_loop_settings_from_options(**{**values, **given})  # type: ignore[arg-type]


@pytest.mark.parametrize("option,value,words", [
    ("request_rate", "2,,4", "--request-rate"), ("request_rate", "0", "--request-rate"),
    ("burstiness", "0", "--burstiness"), ("slo", "ttft=x", "--slo"), ("slo_target", "1.5", "--slo-target"),
    ("slo_min_goodput", "-1", "--slo-min-goodput"), ("slo_requests", 0, "--slo-requests"),
    ("slo_shape", "128", "--slo-shape")], ids=lambda v: str(v))
def test_a_bad_option_value_is_a_usage_error_naming_the_option(option: str, value: object, words: str) -> None:
    with pytest.raises(SettingsError, match=words):
        options(**{option: value})


def test_without_an_slo_anywhere_there_is_no_spec_and_the_check_will_skip() -> None:
    assert options().spec({}, "model profile p") is None


def test_the_command_line_overrides_the_profile_and_the_rest_comes_from_the_profile() -> None:
    profile = {"ttft_ms": 300, "tpot_ms": 40, "target": 0.95, "min_goodput_rps": 2, "request_rate": 3,
               "requests": 10}
    from_profile = options().spec(profile, "model profile p")
    assert from_profile is not None
    assert dict(from_profile.limits_ms) == {"ttft": 300.0, "tpot": 40.0}
    assert (from_profile.target, from_profile.min_goodput_rps, from_profile.source) == (0.95, 2.0, "model profile p")
    mixed = options(slo="e2e=900").spec(profile, "model profile p")
    assert mixed is not None and dict(mixed.limits_ms) == {"e2e": 900.0} and mixed.target == 0.95
    assert mixed.source == "--slo and model profile p"
    [cell] = options().cells(profile)
    assert (cell.rate, cell.requests, cell.key) == (3.0, 10, "128/32@3rps")
    cells = options(request_rate="1,inf", slo_requests=5, burstiness="inf", load_seed=9).cells(profile)
    assert [c.key for c in cells] == ["128/32@1rps", "128/32@infrps"]
    assert all(c.requests == 5 and math.isinf(c.burstiness) and c.seed == 9 for c in cells)


def test_a_model_profile_carries_an_slo_section(tmp_path) -> None:
    profile = tmp_path / "with-slo.yaml"
    profile.write_text("name: with-slo\ndescription: d\nmatch: ['^x$']\ncapabilities: [text]\n"
                       "reasoning: {markers: []}\nslo: {ttft_ms: 500, tpot_ms: 50, target: 0.99, "
                       "min_goodput_rps: 1.5}\n")
    assert load_model_profile(str(profile)).slo == {"ttft_ms": 500, "tpot_ms": 50, "target": 0.99,
                                                    "min_goodput_rps": 1.5}
    assert load_model_profile("reference").slo["ttft_ms"] == 500, "the built-in engine's default run has an SLO"
    assert load_model_profile("generic").slo == {}
