"""A CI kill (SIGTERM) ends the run like Ctrl-C: results kept, verdict "interrupted".

Python's default for SIGTERM is to die on the spot: no ``gate.json``, the built-in
reference engine left running in its own process group, the Allure results of
the test in progress missing without a word. Pipelines stop jobs with SIGTERM
(a cancelled job, a timeout, ``docker stop``), so the controller turns it into a
KeyboardInterrupt subclass and pytest's own interrupt path runs: the tests that
finished keep their results, ``pytest_keyboard_interrupt`` marks the gate
interrupted, ``pytest_sessionfinish`` writes it, and the engine is stopped.

The test that was running when the interrupt came gets no report from pytest, and
allure-pytest then writes its result with the status of its last finished phase:
"passed" for a check cut off mid-request. :class:`InterruptedTestReport` reports
that test to Allure as broken, "interrupted", so the report never shows a check
that did not finish as passed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest

__all__ = ["InterruptedTestReport", "Terminated", "install_sigterm_handler", "restore_sigterm_handler"]

# The phase that follows the last one pytest finished (None: none finished yet).
_NEXT_PHASE = {None: "setup", "setup": "call", "call": "teardown", "teardown": "teardown"}


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; pytest handles it as an interrupt."""

    signal_name = "SIGTERM"


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM while the run is winding down is ignored: the first one is
    # already being handled, and raising again would cut the writing of the verdict.
    # A CI that will not wait sends SIGKILL, which nothing can hold up.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated("SIGTERM received: the run was stopped from outside")


def install_sigterm_handler() -> Any:
    """Route SIGTERM into pytest's interrupt handling; returns the handler it replaced.

    Only the main thread may set signal handlers; elsewhere (pytest run in a thread
    by an embedding tool) nothing is changed and None is returned.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def restore_sigterm_handler(previous: Any) -> None:
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, previous)


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
