"""The verdict's hooks, on the controller only: every report (xdist workers' too) reaches the
:class:`~engine_acceptance.pytest_plugin.verdict.GateCollector`; at the end the verdict is
written to ``gate.json`` and the terminal, and the exit code follows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.pytest_plugin import gate_json, gate_table
from engine_acceptance.pytest_plugin.bundle_writer import bundle_document, write_bundle
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.session import AcceptanceSession

__all__ = ["GateHooks"]


class GateHooks:
    """Registered on the controller only."""

    def __init__(self, gate: GateCollector, gate_json: str, run_bundle: str) -> None:
        self.gate = gate
        self.gate_json = gate_json
        self.run_bundle = run_bundle
        self.bundle_written: Path | None = None
        self.session: AcceptanceSession | None = None

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        longrepr = "" if report.longrepr is None else str(report.longrepr)
        self.gate.add(report.nodeid, report.keywords, report.when, report.outcome,
                      getattr(report, "wasxfail", None), longrepr, report.user_properties)

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.gate.interrupted = f"interrupted ({getattr(excinfo.value, 'signal_name', None) or excinfo.typename})"

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.session
        if state is None:
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED and not self.gate.interrupted:
            self.gate.interrupted = "interrupted"
        gate_json.write(self.gate, self.gate_json, {"engine": state.environment(), "discovery": (
            state.discovery.to_dict() if state.discovery is not None else None)})
        # What the next release is compared with (engine-acceptance diff, docs/diff.md).
        self.bundle_written = write_bundle(self.run_bundle, bundle_document(
            self.gate, state, list(session.config.invocation_params.args)))
        # The exit code follows the gate: a required capability untested or a run that tested
        # nothing fails although pytest itself saw no failed test.
        if not self.gate.passed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.session is None:
            return
        terminalreporter.section("engine-acceptance gate")
        for line in gate_table.lines(self.gate):
            terminalreporter.write_line(line, red=line.startswith("GATE: FAIL"), green=line.startswith("GATE: PASS"))
        terminalreporter.write_line(f"verdict written to {self.gate_json}")
        if self.bundle_written is not None:
            size = self.bundle_written.stat().st_size
            terminalreporter.write_line(f"run bundle written to {self.bundle_written} ({size / 1024:,.0f} KiB): "
                                        "engine-acceptance diff BASE NEW compares two runs (docs/diff.md)")
