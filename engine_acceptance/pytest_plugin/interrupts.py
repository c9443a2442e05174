"""A check that an interrupt (Ctrl-C, or SIGTERM through :mod:`engine_acceptance.sigterm`) cut off reads "broken".

An interrupt ends the run through pytest's own interrupt path: the tests that finished
keep their results, ``pytest_keyboard_interrupt`` marks the gate interrupted,
``pytest_sessionfinish`` writes it, and the engine is stopped. The SIGTERM handler
itself needs no pytest and lives in :mod:`engine_acceptance.sigterm` (``compare`` uses
it too).

The test that was running when the interrupt came gets no report from pytest, and
allure-pytest then writes its result with the status of its last finished phase:
"passed" for a check cut off mid-request. :class:`InterruptedTestReport` reports
that test to Allure as broken, "interrupted", so the report never shows a check
that did not finish as passed.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

__all__ = ["InterruptedTestReport"]

# The phase that follows the last one pytest finished (None: none finished yet).
_NEXT_PHASE = {None: "setup", "setup": "call", "call": "teardown", "teardown": "teardown"}


class InterruptedTestReport:
    """Makes the check an interrupt cut off read "broken: interrupted" in Allure, not "passed"."""

    def __init__(self) -> None:
        # nodeid -> the last phase (setup, call, teardown) pytest reported.
        self._phases: dict[str, str] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._phases[report.nodeid] = report.when

    # Not tryfirst: allure-pytest's wrapper is, so this one runs inside it and has
    # reported the interrupted phase before allure-pytest writes the result.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        try:
            return (yield)
        except KeyboardInterrupt as interrupt:
            when = _NEXT_PHASE[self._phases.get(item.nodeid)]

            def interrupted() -> None:
                raise interrupt

            call = pytest.CallInfo.from_call(interrupted, when=when)  # type: ignore[arg-type]
            # Only the report object is made (Allure reads it); it is not logged, so
            # the terminal and the gate count this check as neither passed nor failed.
            item.ihook.pytest_runtest_makereport(item=item, call=call)
            raise
