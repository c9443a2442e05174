"""An expected-failure record covers only the failure it describes.

pytest's xfail turns *any* failure of a marked check into an expected failure: a
check recorded for "HTTP 500 on corrupt media" that starts to hang, or gets HTTP
200 with an invented description, would still read "known defect". Each record
says what its failure looks like (``failure``: a message regex and/or a report
category, profiles/expectations.py). :class:`RecordHooks` looks at every report pytest
has just turned into an xfail and, when no record that applies to the check
describes the failure, turns it back into a failure whose first line names the
record and the real failure; the gate and the report then count it as failed.

Order of the ``pytest_runtest_makereport`` wrappers (pluggy calls the wrapper
registered last first, tryfirst ones before all): pytest's skipping plugin, which
sets ``wasxfail``, is registered before everything and so runs innermost, inside
this wrapper; allure-pytest registers its listener after this plugin (its
``pytest_configure`` runs after ours), so its wrapper runs around this one and
writes the corrected report. selftest/e2e/test_record_matching.py checks both ends.

Stale records are left as pytest reports them: a recorded check that passes is an
``XPASS(strict)`` failure with no exception, which this hook never touches.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from engine_acceptance.profiles.expectations import ExpectedFailure
from engine_acceptance.pytest_plugin.allure_report import allure_status, failure_category
from engine_acceptance.pytest_plugin.keys import item_records_key

__all__ = ["MISMATCH", "RecordHooks", "mismatch_line"]

MISMATCH = "failed differently from its expected-failure record"
# The real failure is cut to this many characters on the first line (the whole of it follows).
_GOT_LIMIT = 200


def mismatch_line(records: list[ExpectedFailure], message: str, status: str = "failed") -> str:
    """``failed differently ...: record R expects X; got: <first line of the failure>``."""
    expects = "; ".join(f"record {record.origin} expects {record.failure.describe()}" for record in records)
    got = (message.strip().splitlines() or [""])[0]
    if len(got) > _GOT_LIMIT:
        got = got[:_GOT_LIMIT] + "…"
    if any(record.failure.category is not None for record in records):
        got = f"[{failure_category(message, status) or 'no category'}] {got}"
    return f"{MISMATCH}: {expects}; got: {got}"


class RecordHooks:
    """Registered in every process that runs checks (xdist workers too): makereport runs there."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        records = item.stash.get(item_records_key, None)
        excinfo = call.excinfo
        if not records or excinfo is None or not report.skipped or not hasattr(report, "wasxfail"):
            return report
        if isinstance(excinfo.value, (pytest.skip.Exception, pytest.xfail.Exception)):
            return report  # an imperative skip or xfail inside the check: not the records' business
        message = excinfo.exconly()
        status = allure_status(excinfo.value)
        matched = [record for record in records if record.failure.matches(message, status)]
        if matched:
            # Name only the records that describe this failure.
            report.wasxfail = " | ".join(record.xfail_reason() for record in matched)
            return report
        line = mismatch_line(records, message, status)
        report.outcome = "failed"
        del report.wasxfail
        report.longrepr = _with_first_line(report.longrepr, line)
        return report


def _with_first_line(longrepr: Any, line: str) -> Any:
    """The original failure text, with `line` first (as an ``E`` line, which the gate reads first).

    A traceback repr keeps its shape (so it still serializes across xdist and colours
    the terminal) and its crash message becomes `line`, which pytest's short summary
    (``FAILED id - ...``) shows; anything else becomes text.
    """
    from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprFileLocation, ReprTraceback

    first = f"E   {line}\n"
    if isinstance(longrepr, ExceptionChainRepr) and longrepr.chain:
        head = (ReprTraceback([ReprEntryNative([first])], None, "native"), None, None)
        *earlier, (traceback, crash, description) = longrepr.chain
        if crash is not None:
            crash = ReprFileLocation(crash.path, crash.lineno, line)
        rebuilt = ExceptionChainRepr([head, *earlier, (traceback, crash, description)])
        for name, content, sep in longrepr.sections:
            rebuilt.addsection(name, content, sep)
        return rebuilt
    return first + ("" if longrepr is None else str(longrepr))
