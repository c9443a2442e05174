"""End to end: the API-key checks (tests/test_auth.py) pass, skip and fail when they should.

With a key the reference engine refuses requests without it (401), so the checks
pass; an external engine given without a key gets the checks skipped with the reason;
the built-in engine always has a key (a random one when none is given), so the default
command tests authentication; and an engine that ignores the key (defect
``auth-ignored``) fails exactly the refusal checks, with or without ``--api-key``.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import failed, run_suite

from engine_acceptance.reference_engine.launcher import start_reference_engine

pytestmark = pytest.mark.e2e

SECRET = "sk-selftest-auth-7c1d9e"
AUTH = "test_auth.py::"
REFUSALS = {
    f"{AUTH}test_request_without_a_key_is_refused_with_401_or_403[chat-completions]",
    f"{AUTH}test_request_without_a_key_is_refused_with_401_or_403[models]",
    f"{AUTH}test_request_with_a_wrong_key_is_refused_with_401_or_403[chat-completions]",
    f"{AUTH}test_request_with_a_wrong_key_is_refused_with_401_or_403[models]",
}
RIGHT_KEY = {
    f"{AUTH}test_request_with_the_right_key_is_answered[chat-completions]",
    f"{AUTH}test_request_with_the_right_key_is_answered[models]",
}


def test_engine_that_requires_the_key_passes_and_the_key_stays_out_of_the_report(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "auth", "--api-key", SECRET)
    assert outcomes == {test_id: "passed" for test_id in REFUSALS | RIGHT_KEY}, result.stdout.str()[-3000:]
    assert result.ret == 0
    for path in (pytester.path / "allure-results").iterdir():
        assert SECRET not in path.read_text(errors="replace"), f"API key found in {path.name}"
    assert SECRET not in result.stdout.str() + result.stderr.str()
    gate = json.loads((pytester.path / "gate.json").read_text())
    assert gate["by_capability"]["auth"]["passed"] == 6


def test_external_engine_without_a_configured_key_gets_the_checks_skipped_with_the_reason(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_API_KEY", raising=False)
    # An engine started without a key may be open on purpose: nothing to refuse, nothing to test.
    with start_reference_engine() as engine:
        result, outcomes = run_suite(pytester, f"--engine-url={engine.url}", "-m", "auth", "-rs")
    assert outcomes == {test_id: "skipped" for test_id in REFUSALS | RIGHT_KEY}
    result.stdout.fnmatch_lines(["*no API key is configured (--api-key or $ENGINE_API_KEY)*"])
    # A run of nothing but skips tested nothing: the gate says so rather than pass.
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*GATE FAILURE: no check ran*"])


def test_engine_that_ignores_the_key_fails_the_refusal_checks(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "auth", "--api-key", SECRET, "--inject", "auth-ignored")
    assert failed(outcomes) == REFUSALS, result.stdout.str()[-3000:]
    assert {outcomes[test_id] for test_id in RIGHT_KEY} == {"passed"}
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*POST /v1/chat/completions without an API key was answered HTTP 200, not 401/403*",
        "*GET /v1/models with a wrong API key was answered HTTP 200, not 401/403*",
    ])
    assert SECRET not in result.stdout.str()


def test_built_in_engine_without_a_given_key_still_tests_authentication(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_API_KEY", raising=False)
    result, outcomes = run_suite(pytester, "-m", "auth")
    assert outcomes == {test_id: "passed" for test_id in REFUSALS | RIGHT_KEY}, result.stdout.str()[-3000:]
    assert result.ret == 0
    result, outcomes = run_suite(pytester, "-m", "auth", "--inject", "auth-ignored")
    assert failed(outcomes) == REFUSALS, result.stdout.str()[-3000:]
    assert result.ret == 1
