"""An expected-failure record covers only the failure it describes.

pytest's xfail turns *any* failure of a marked check into an expected failure: a
check recorded for "HTTP 500 on corrupt media" that starts to hang, or gets HTTP
200 with an invented description, would still read "known defect". Each record
says what its failure looks like (``failure``: a message regex, required, and optionally
a report category, profiles/expectations.py). :class:`RecordHooks` looks at every report pytest
has just turned into an xfail and, when no record that applies to the check
describes the failure, turns it back into a failure whose first line names the
record and the real failure; the gate and the report then count it as failed.

A record's pattern and category are read from the problem's own words: the failure
without the exception type pytest puts first (``AssertionError: ``) and without the
discovery lead of a capability found broken (profiles/problem_text.py), which every
failure of such a check carries whatever its problem. A failure that holds several
problems (assertions.SeveralProblems: several throughput cells, several failing samples
of a trial) is judged problem by problem: each must be described by some record that
applies (its message regex searched in that problem, its category read from that
problem), or the check fails as new, naming the problems no record describes. A record
excuses only its own problem, never a second one that happens to share its message.

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

from engine_acceptance.assertions import SeveralProblems
from engine_acceptance.profiles.expectations import ExpectedFailure
from engine_acceptance.pytest_plugin.allure_report import allure_status, failure_category
from engine_acceptance.pytest_plugin.keys import item_records_key

__all__ = ["MISMATCH", "RecordHooks", "judge", "mismatch_line"]

MISMATCH = "failed differently from its expected-failure record"
# The real failure is cut to this many characters on the first line (the whole of it follows).
_GOT_LIMIT = 200


def mismatch_line(records: list[ExpectedFailure], message: str, status: str = "failed",
                  unmatched: list[str] | None = None, problems: int = 1) -> str:
    """``failed differently ...: record R expects X; got: <first line of the failure>``.

    For a failure of several problems, ``unmatched`` holds the ones no record describes
    (of ``problems`` in all): they are what the line shows, `` | `` between them.
    """
    expects = "; ".join(f"record {record.origin} expects {record.failure.describe()}" for record in records)
    with_category = any(record.failure.category is not None for record in records)
    shown = [_got(problem, status, with_category) for problem in (unmatched if unmatched else [message])]
    got = " | ".join(shown)
    if unmatched:
        got = f"{got} ({len(unmatched)} of {problems} problems described by no record)"
    return f"{MISMATCH}: {expects}; got: {got}"


def _got(message: str, status: str, with_category: bool) -> str:
    got = (message.strip().splitlines() or [""])[0]
    if len(got) > _GOT_LIMIT:
        got = got[:_GOT_LIMIT] + "…"
    if with_category:
        got = f"[{failure_category(message, status) or 'no category'}] {got}"
    return got


def judge(records: list[ExpectedFailure], failure: BaseException, message: str,
          status: str = "failed") -> tuple[list[ExpectedFailure], str | None]:
    """The records that describe this failure, and the mismatch line when some problem is described by none.

    ``message`` is the failure as pytest prints it (``exconly()``). A single problem is
    matched in the whole message, each problem of a :class:`SeveralProblems` in its own
    words; either without the exception type and discovery leads (FailureDescription.matches).
    """
    if not isinstance(failure, SeveralProblems):
        matched = [record for record in records if record.failure.matches(message, status)]
        return matched, None if matched else mismatch_line(records, message, status)
    matched, unmatched = [], []
    for problem in failure.problems:
        describing = [record for record in records if record.failure.matches(problem, status)]
        if not describing:
            unmatched.append(problem)
        matched += [record for record in describing if record not in matched]
    if unmatched:
        return matched, mismatch_line(records, message, status, unmatched, len(failure.problems))
    return matched, None


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
        matched, line = judge(records, excinfo.value, message, status)
        if line is None:
            # Name only the records that describe this failure.
            report.wasxfail = " | ".join(record.xfail_reason() for record in matched)
            return report
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
