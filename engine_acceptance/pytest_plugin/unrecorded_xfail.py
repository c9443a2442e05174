"""Only an expected-failure record makes a failure "known": any other xfail is reported as a failure.

pytest turns a failure into an expected one (xfail) for several reasons: the strict xfail mark
:mod:`~engine_acceptance.pytest_plugin.collection` puts on a check that a record describes,
but also a user's conftest ``xfail`` mark, or ``pytest.xfail(...)`` called inside a check. The
gate must not read the latter two as known defects: nothing says what failure they excuse, so
a check that now fails for any reason would pass the gate silently. :class:`UnrecordedXfailHooks`
turns each such report back into a failure whose first line says what it was
(:data:`~engine_acceptance.pytest_plugin.verdict.UNRECORDED_XFAIL`), and a strict xfail mark
no record put there that passes (``XPASS(strict)``) into a failure that says so rather than a
stale record. pytest's summary, JUnit, Allure and the gate then agree; the gate also counts
an xfail as known only on a check that carries the records' user property (``RECORDS_PROPERTY``).

A recorded check's own xfail is left to :class:`~engine_acceptance.pytest_plugin.records.RecordHooks`,
which judges it against its records; an imperative ``pytest.xfail`` inside a recorded check is
no record's verdict either, and is turned into a failure here. The two wrappers act on
disjoint reports, so their order does not matter.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from engine_acceptance.pytest_plugin.keys import item_records_key
from engine_acceptance.pytest_plugin.records import _with_first_line
from engine_acceptance.pytest_plugin.verdict import UNRECORDED_XFAIL

__all__ = ["UnrecordedXfailHooks", "unrecorded_line"]

_STRICT_XPASS = "[XPASS(strict)]"


def unrecorded_line(*, imperative: bool, reason: str, failure: str = "", passed: bool = False) -> str:
    """The first line of the failure an unrecorded xfail becomes: what expected the failure, and what happened."""
    if imperative:
        return f"{UNRECORDED_XFAIL}: pytest.xfail() was called in the check ({reason or 'no reason given'})"
    said = f"an xfail mark ({reason or 'no reason given'})"
    if passed:
        return f"{UNRECORDED_XFAIL} passed: {said} expected the check to fail (strict)"
    first = (failure.strip().splitlines() or [""])[0]
    return f"{UNRECORDED_XFAIL}: {said} covers this failure: {first}" if first else f"{UNRECORDED_XFAIL}: {said}"


class UnrecordedXfailHooks:
    """Registered in every process that runs checks (xdist workers too), before Allure's listener."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        recorded = bool(item.stash.get(item_records_key, None))
        excinfo = call.excinfo
        imperative = excinfo is not None and isinstance(excinfo.value, pytest.xfail.Exception)
        if report.skipped and hasattr(report, "wasxfail") and (imperative or not recorded):
            failure = "" if excinfo is None or imperative else excinfo.exconly()
            line = unrecorded_line(imperative=imperative, reason=str(report.wasxfail), failure=failure)
            report.outcome = "failed"
            del report.wasxfail
            report.longrepr = _with_first_line(report.longrepr, line)
        elif report.failed and not recorded and str(report.longrepr).startswith(_STRICT_XPASS):
            reason = str(report.longrepr)[len(_STRICT_XPASS):].strip()
            report.longrepr = _with_first_line(report.longrepr, unrecorded_line(imperative=False, reason=reason,
                                                                                passed=True))
        return report
