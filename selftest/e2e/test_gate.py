"""The release gate: known defects keep it green, stale records and failures turn it red."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_runner import run_suite

from engine_acceptance.capabilities.plan import plan_capabilities
from engine_acceptance.profiles.profile import load_model_profile
from engine_acceptance.pytest_plugin import gate_json, gate_table
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY, RECORDS_PROPERTY, UNRECORDED_XFAIL, GateCollector

# What collection adds to a check an expected-failure record describes: only its xfail is a known defect.
RECORDED = [(RECORDS_PROPERTY, "records.yaml#0")]

USAGE_CHECK = "tests/test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[*]"
RECORD = f"""
records:
  - check: "{USAGE_CHECK}"
    engine: vllm
    model: "^reference-model$"
    reason: the engine adds one to total_tokens (injected for the self-test)
    source: selftest
    date: "2026-11-29"
    failure:
      message: 'usage\\.total_tokens=\\d+ but prompt_tokens \\+ completion_tokens'
"""


def test_collector_counts_by_capability_and_fails_on_a_failure() -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "passed", None, "")
    gate.add("t::b", ["text"], "call", "skipped", "known defect (seed 001): 264", "", RECORDED)
    gate.add("t::c", ["image"], "setup", "skipped", None, "('x', 1, 'Skipped: model profile lacks image')")
    assert gate.passed
    gate.add("t::d", ["streaming"], "call", "failed", None, "E   AssertionError: no [DONE]\nmore")
    assert not gate.passed
    verdict = gate_json.document(gate)
    assert verdict["totals"] == {"passed": 1, "failed": 1, "known_defect": 1, "stale_record": 0, "skipped": 1}
    assert verdict["failing_checks"] == [{"id": "t::d", "reason": "AssertionError: no [DONE]"}]
    assert verdict["skipped"][0]["reason"] == "model profile lacks image"


def test_teardown_pass_does_not_hide_a_call_failure() -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "failed", None, "E boom")
    gate.add("t::a", ["text"], "teardown", "passed", None, "")
    assert not gate.passed


def test_stale_record_fails_in_strict_mode_and_warns_in_warn_mode() -> None:
    strict = GateCollector(stale_records_fail=True)
    strict.add("t::a", ["text"], "call", "failed", None, "[XPASS(strict)] known defect", RECORDED)
    assert not strict.passed and gate_json.document(strict)["stale_records"]
    warn = GateCollector(stale_records_fail=False)
    warn.add("t::a", ["text"], "call", "passed", "known defect", "", RECORDED)
    assert warn.passed and gate_json.document(warn)["stale_records"]


# --- known never overwrites failed; only a record's xfail is known (issue 39, part 5) ---------------

@pytest.mark.parametrize("later", ["known", "skipped", "passed"])
def test_no_later_phase_replaces_a_failure(later: str) -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "failed", None, "E   AssertionError: not what the record says")
    if later == "known":  # a teardown error that fits the check's record
        gate.add("t::a", ["text"], "teardown", "skipped", "known defect (x): y", "", RECORDED)
    elif later == "skipped":
        gate.add("t::a", ["text"], "teardown", "skipped", None, "('x', 1, 'Skipped: later')")
    else:
        gate.add("t::a", ["text"], "teardown", "passed", None, "")
    assert not gate.passed
    assert [item.reason for item in gate.by_outcome("failed")] == ["AssertionError: not what the record says"]
    assert not gate.by_outcome("known_defect")


def test_a_later_failure_still_replaces_a_known_defect() -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "skipped", "known defect (x): y", "", RECORDED)
    gate.add("t::a", ["text"], "teardown", "failed", None, "E   RuntimeError: teardown broke")
    assert [item.reason for item in gate.by_outcome("failed")] == ["RuntimeError: teardown broke"]


def test_an_xfail_no_record_produced_is_a_failure_and_its_pass_is_no_stale_record() -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "skipped", "flaky upstream", "E   AssertionError: boom")
    assert gate.by_outcome("failed")[0].reason == f"{UNRECORDED_XFAIL}: flaky upstream"
    assert not gate.passed and not gate.by_outcome("known_defect")
    # A conftest's strict xfail mark that passes fails as itself, not as a stale record of ours.
    strict = GateCollector()
    strict.add("t::b", ["text"], "call", "failed", None, "[XPASS(strict)] flaky upstream")
    assert strict.by_outcome("failed") and not strict.by_outcome("stale_record")
    # Its non-strict pass is a pass: no record expected anything of it.
    lenient = GateCollector()
    lenient.add("t::c", ["text"], "call", "passed", "flaky upstream", "")
    assert lenient.by_outcome("passed") and lenient.passed


# Two of text's core checks (the registry's): only a core check's pass makes text tested.
CORE_A = "tests/test_text.py::test_reply_has_content_and_a_valid_finish_reason[streamed]"
CORE_B = "tests/test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[streamed]"


def _stale_gate(*, fail: bool) -> GateCollector:
    gate = GateCollector(stale_records_fail=fail,
                         plans=plan_capabilities(load_model_profile("reference"), None, frozenset()))
    covers = [(COVERS_PROPERTY, "text")]
    gate.add(CORE_A, ["text"], "call", "passed", None, "", covers)
    if fail:
        gate.add(CORE_B, ["text"], "call", "failed", None, "[XPASS(strict)] known defect", covers + RECORDED)
    else:
        gate.add(CORE_B, ["text"], "call", "passed", "known defect", "", covers + RECORDED)
    return gate


def test_a_warned_stale_record_is_said_as_warned_not_as_a_failure_where_the_gate_passes() -> None:
    warn = _stale_gate(fail=False)
    assert warn.passed
    [text] = [row for row in warn.capability_rows() if row.name == "text"]
    assert (text.failed, text.passed, text.stale, text.tested) == (0, 2, 1, True)
    assert text.result == "passed; 1 stale record warned (the check passed: --stale-records=warn)"
    lines = gate_table.lines(warn)
    assert lines[0].split() == ["capability", "passed", "failed", "known", "stale", "(warned)", "skipped"]
    assert lines[2].split() == ["text", "1", "0", "0", "1", "0"]
    assert ("  STALE RECORD, warned (the defect seems fixed; --stale-records=warn: the gate does not fail on it): "
            f"{CORE_B}") in lines
    verdict = gate_json.document(warn)
    assert verdict["totals"]["failed"] == 0 and verdict["totals"]["stale_record"] == 1
    assert verdict["stale_records_policy"] == "warn"
    # Strict: the stale record fails the gate, and the row counts it with the failures.
    strict = _stale_gate(fail=True)
    assert not strict.passed
    [text] = [row for row in strict.capability_rows() if row.name == "text"]
    assert (text.failed, text.passed, text.stale, text.result) == (1, 1, 1, "1 failed, 1 passed")
    assert f"  STALE RECORD (the defect seems fixed): {CORE_B}" in gate_table.lines(strict)
    assert gate_table.lines(strict)[0].split()[4] == "stale"


def test_interrupted_run_never_passes(tmp_path: Path) -> None:
    gate = GateCollector()
    gate.add("t::a", ["text"], "call", "passed", None, "")
    gate.interrupted = "interrupted (KeyboardInterrupt)"
    data = json.loads(gate_json.write(gate, tmp_path / "gate.json").read_text())
    assert data["gate"] == "fail" and data["interrupted"]


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text())


@pytest.mark.e2e
def test_known_defect_keeps_the_gate_green_and_a_fixed_one_goes_stale(pytester: pytest.Pytester) -> None:
    records = pytester.path / "records.yaml"
    records.write_text(RECORD, encoding="utf-8")
    common = ("-m", "text", f"--expectations={records}", f"--gate-json={pytester.path / 'gate.json'}")

    result, _ = run_suite(pytester, *common, "--inject", "bad-usage")
    assert result.ret == 0, result.stdout.str()[-3000:]
    verdict = _gate(pytester)
    assert verdict["gate"] == "pass" and len(verdict["known_defects"]) == 2
    result.stdout.fnmatch_lines(["*GATE: PASS*"])

    result, _ = run_suite(pytester, *common)
    assert result.ret == 1
    verdict = _gate(pytester)
    assert verdict["gate"] == "fail" and len(verdict["stale_records"]) == 2
    result.stdout.fnmatch_lines(["*STALE RECORD*", "*GATE: FAIL*"])

    result, _ = run_suite(pytester, *common, "--stale-records=warn")
    assert result.ret == 0
    verdict = _gate(pytester)
    assert verdict["gate"] == "pass" and len(verdict["stale_records"]) == 2
    # Said as warned, as the gate judged them, never as "2 failed" beside GATE: PASS.
    assert verdict["totals"]["failed"] == 0 and verdict["totals"]["stale_record"] == 2
    [text] = [row for row in verdict["capabilities"] if row["name"] == "text"]
    assert text["failed"] == 0 and text["stale"] == 2, text
    assert text["result"] == "passed; 2 stale records warned (the checks passed: --stale-records=warn)"
    result.stdout.fnmatch_lines(["capability * passed * failed * known * stale (warned) * skipped",
                                 "text * 0 * 0 * 2 * 0",
                                 "*STALE RECORD, warned (the defect seems fixed; --stale-records=warn: the gate does "
                                 "not fail on it): *test_usage_is_present*",
                                 "text * passed; 2 stale records warned*", "GATE: PASS"])
    assert "2 failed" not in result.stdout.str()


@pytest.mark.e2e
def test_unreachable_engine_writes_a_failing_verdict(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "--engine-url=http://127.0.0.1:9", f"--gate-json={pytester.path / 'gate.json'}")
    assert result.ret == 6
    verdict = _gate(pytester)
    assert verdict["gate"] == "fail" and "unreachable" in verdict["engine_unavailable"]


@pytest.mark.e2e
def test_shipped_sglang_media_records_gate_an_sglang_like_engine(pytester: pytest.Pytester) -> None:
    """The seed's SGLang 500-on-corrupt-media records, pointed at the reference engine imitating SGLang."""
    import yaml

    from engine_acceptance.profiles.expectations import EXPECTATIONS_DIR

    shipped = yaml.safe_load((EXPECTATIONS_DIR / "seed-001-media.yaml").read_text(encoding="utf-8"))
    sglang = [dict(record, model="^reference-model$") for record in shipped["records"] if record["engine"] == "sglang"]
    for record in sglang:
        record.pop("versions", None)  # the reference engine's version is not the seed's build
    records = pytester.path / "sglang-records.yaml"
    records.write_text(yaml.safe_dump({"records": sglang}, allow_unicode=True), encoding="utf-8")
    common = ("-m", "corrupt_media", "--convention", "sglang", f"--expectations={records}",
              f"--gate-json={pytester.path / 'gate.json'}")

    result, _ = run_suite(pytester, *common, "--inject", "media-500")
    verdict = _gate(pytester)
    assert result.ret == 0 and verdict["gate"] == "pass", result.stdout.str()[-3000:]
    # Seven corrupt samples and the two mislabelled ones (PNG bytes as a video, a PNG declared text/plain), which
    # the imitated SGLang's decoders fail on too.
    assert len(verdict["known_defects"]) == 9 and not verdict["failing_checks"]

    result, _ = run_suite(pytester, *common)
    verdict = _gate(pytester)
    assert result.ret == 1 and verdict["gate"] == "fail"
    assert len(verdict["stale_records"]) == 9

    result, _ = run_suite(pytester, *common, "--stale-records=warn")
    assert result.ret == 0 and _gate(pytester)["gate"] == "pass"
