"""A failing check of a capability discovery found broken leads with what discovery found.

A broken capability's checks run and fail on what the engine answers; that answer alone
may hide the cause (a tool request refused with a 400 that is no known refusal reads
as one more failed request). So every failing check of such a capability starts its
message with the capability and the engine's words from the probe
(:meth:`AcceptanceSession.broken_reason`), as the image and video checks already do in
their own assertions: the same text, added here once for every other check.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from engine_acceptance.pytest_plugin.keys import session_key
from engine_acceptance.pytest_plugin.records import _with_first_line
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY

__all__ = ["BrokenLeadHooks"]


class BrokenLeadHooks:
    """Registered in every process that runs checks (xdist workers too): makereport runs there."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        session = item.config.stash.get(session_key, None)
        if session is None or report.when != "call" or not report.failed or call.excinfo is None:
            return report
        covers = dict(item.user_properties).get(COVERS_PROPERTY, "")
        reasons = [reason for name in sorted(filter(None, str(covers).split(",")))
                   if (reason := session.broken_reason(name))]
        message = call.excinfo.exconly()
        # Checks that say it in their own words already (tests/test_image.py's `why`) keep them.
        reasons = [reason for reason in reasons if reason.rstrip("; ") not in message]
        if reasons:
            first = (str(call.excinfo.value).strip().splitlines() or [""])[0]
            report.longrepr = _with_first_line(report.longrepr, "".join(reasons) + first)
        return report
