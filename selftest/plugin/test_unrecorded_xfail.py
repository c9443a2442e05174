"""Only an expected-failure record makes a failure known; a failure stays a failure (issue 39, part 5).

The plugin runs a small test file of its own against the built-in engine (``-p
engine_acceptance``), with a conftest that marks a check ``xfail`` as a team's conftest might,
a check that calls ``pytest.xfail(...)``, and checks a record names: one whose call fails
otherwise than its record says and whose teardown then fails as the record says (the old
verdict let the teardown's "known defect" replace the call's failure and passed the gate),
one that fails as recorded (the control: known), and one that calls ``pytest.xfail`` although
a record names it (no record's verdict either).
"""

from __future__ import annotations

import json

import pytest
import yaml

from engine_acceptance.pytest_plugin.verdict import UNRECORDED_XFAIL

pytestmark = pytest.mark.e2e

CONFTEST = '''
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_marked_by_conftest":
            item.add_marker(pytest.mark.xfail(reason="flaky upstream"))
        if item.name == "test_marked_strict_and_passes":
            item.add_marker(pytest.mark.xfail(reason="fixed upstream?", strict=True))
'''

CHECKS = '''
import pytest

pytestmark = pytest.mark.text


@pytest.fixture
def teardown_fails_as_recorded():
    yield
    raise AssertionError("the recorded defect, at teardown")


def test_answers():
    pass


def test_marked_by_conftest():
    assert False, "boom"


def test_marked_strict_and_passes():
    pass


def test_calls_pytest_xfail():
    pytest.xfail("not today")


def test_fails_otherwise_then_teardown_as_recorded(teardown_fails_as_recorded):
    assert False, "a new failure, not the recorded one"


def test_fails_as_recorded():
    assert False, "the recorded defect"


def test_recorded_but_calls_pytest_xfail():
    pytest.xfail("skipping the hard part")
'''


def _record(check: str) -> dict:
    return {"check": f"test_checks.py::{check}", "engine": "*", "model": "^reference-model$",
            "reason": "a defect recorded for the self-test", "source": "selftest", "date": "2026-12-05",
            "failure": {"message": "the recorded defect"}}


def test_only_a_records_xfail_is_known_and_no_later_phase_hides_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_checks=CHECKS)
    records = pytester.path / "records.yaml"
    records.write_text(yaml.safe_dump({"records": [
        _record("test_fails_otherwise_then_teardown_as_recorded"), _record("test_fails_as_recorded"),
        _record("test_recorded_but_calls_pytest_xfail")]}), encoding="utf-8")
    gate_path = pytester.path / "gate.json"
    result = pytester.runpytest_inprocess(
        "-p", "engine_acceptance", "-p", "no:cacheprovider", "--reference-latency=0,0",
        f"--expectations={records}", f"--gate-json={gate_path}", f"--run-bundle={pytester.path / 'bundle'}",
        "test_checks.py")
    gate = json.loads(gate_path.read_text(encoding="utf-8"))
    failing = {check["id"].split("::")[-1]: check["reason"] for check in gate["failing_checks"]}

    assert gate["gate"] == "fail" and result.ret == 1
    # Only the check that failed as its record says is a known defect.
    assert [entry["id"].split("::")[-1] for entry in gate["known_defects"]] == ["test_fails_as_recorded"]
    assert not gate["stale_records"]
    assert failing["test_marked_by_conftest"] == (
        f"{UNRECORDED_XFAIL}: an xfail mark (flaky upstream) covers this failure: AssertionError: boom")
    assert failing["test_marked_strict_and_passes"] == (
        f"{UNRECORDED_XFAIL} passed: an xfail mark (fixed upstream?) expected the check to fail (strict)")
    assert failing["test_calls_pytest_xfail"] == (
        f"{UNRECORDED_XFAIL}: pytest.xfail() was called in the check (not today)")
    assert failing["test_recorded_but_calls_pytest_xfail"] == (
        f"{UNRECORDED_XFAIL}: pytest.xfail() was called in the check (skipping the hard part)")
    # The call's failure stands, although the teardown then failed as the record describes.
    assert failing["test_fails_otherwise_then_teardown_as_recorded"].startswith(
        "failed differently from its expected-failure record"), failing
    assert "test_answers" not in failing
    # pytest's own report says the same: five failed, and xfailed only the recorded failure and the teardown.
    result.assert_outcomes(passed=1, failed=5, xfailed=2)
    result.stdout.fnmatch_lines([f"E   {UNRECORDED_XFAIL}: an xfail mark (flaky upstream) covers this failure*",
                                 f"E   {UNRECORDED_XFAIL}: pytest.xfail() was called in the check (not today)",
                                 "*GATE: FAIL*"])
