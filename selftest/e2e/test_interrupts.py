"""End to end: Ctrl-C or a CI kill in the middle of a run.

The suite is started in its own process group against a reference engine that
never answers chat requests (``never-answer``, with timeouts far beyond the test),
so a check is certainly in flight when the signal comes. Afterwards: exit code 2,
``gate.json`` says interrupted (not passed), the check that finished has a
complete Allure result, the checks cut off are "broken", never "passed", and
the built-in engine has been stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from allure_results import read_results
from suite_runner import REPO

pytestmark = pytest.mark.e2e

FINISHED = "test_models_endpoint_lists_the_served_model"
INTERRUPTED_EXIT_CODE = 2

CASES = [
    # (signal, sent to the whole process group, extra arguments)
    (signal.SIGINT, False, ()),
    (signal.SIGTERM, False, ()),
    (signal.SIGINT, True, ("-n", "2")),
    (signal.SIGTERM, True, ("-n", "2")),
]
IDS = ["sigint", "sigterm", "sigint-group-xdist", "sigterm-group-xdist"]


def _reference_engines_of(parent: int) -> list[int]:
    """Pids of the reference engines started by process `parent` (its direct children)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"engine_acceptance.reference_engine" in cmdline:
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(predicate, what: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize(("signum", "group", "extra"), CASES, ids=IDS)
def test_interrupt_leaves_finished_results_and_an_interrupted_verdict(tmp_path: Path, signum: int, group: bool,
                                                                      extra: tuple[str, ...]) -> None:
    alluredir, gate_path = tmp_path / "allure-results", tmp_path / "gate.json"
    command = [sys.executable, "-m", "pytest", "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO),
               # Hypothesis's plugin imports hypothesis (a second in each process) for nothing, as in run_suite.
               str(REPO / "tests"), "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest",
               f"--alluredir={alluredir}", f"--gate-json={gate_path}", "-m", "text",
               "-k", "models_endpoint or reply_has_content",
               "--inject", "never-answer", "--idle-timeout", "600", "--request-timeout", "600",
               # The capability probes meet the same silence: found broken after half a second, not 60.
               "--probe-timeout", "0.5",
               # The report of a check cut off, formatted natively: pytest's long format parses the source
               # of every file in its traceback (asyncio, httpx, openai: seconds in each process on a busy
               # machine). What the interrupt leaves (exit code, verdict, results, engine) is the same.
               "--tb=native", *extra]
    with open(tmp_path / "out.txt", "wb") as out:
        # SIGINT back to its default: a self-test run started in the background by a
        # non-interactive shell has SIGINT ignored, and the suite would inherit that.
        suite = subprocess.Popen(command, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for(lambda: FINISHED in read_results(alluredir), "the models check to finish")
        engines = _reference_engines_of(suite.pid)
        assert len(engines) == 1
        # The other checks hang on the engine (idle timeout 600 s): one is in flight now.
        time.sleep(0.5)
        if group:
            os.killpg(suite.pid, signum)
        else:
            suite.send_signal(signum)
        try:
            returncode = suite.wait(timeout=120)
        except subprocess.TimeoutExpired:
            # pytest's faulthandler dumps every thread's stack on SIGABRT: where the run hung.
            suite.send_signal(signal.SIGABRT)
            time.sleep(3)
            output = (tmp_path / "out.txt").read_text(errors="replace")
            raise AssertionError(f"the suite did not end within 120 s of the signal:\n{output[-8000:]}") from None
    finally:
        if suite.poll() is None:
            os.killpg(suite.pid, signal.SIGKILL)
    output = (tmp_path / "out.txt").read_text(errors="replace")
    assert returncode == INTERRUPTED_EXIT_CODE, output[-3000:]

    gate = json.loads(gate_path.read_text())
    assert gate["gate"] == "fail", gate
    expected = "SIGTERM" if signum == signal.SIGTERM else "KeyboardInterrupt"
    assert gate["interrupted"] == f"interrupted ({expected})"
    assert gate["totals"]["passed"] == 1 and gate["totals"]["failed"] == 0
    assert f"GATE: FAIL (interrupted ({expected}))" in output

    reports = read_results(alluredir)
    # The finished check: a complete result.
    finished = reports[FINISHED].raw
    assert finished["status"] == "passed" and finished["stop"] >= finished["start"]
    # A check cut off is never reported as passed.
    cut_off = {name: report for name, report in reports.items() if name != FINISHED}
    assert all(report.status == "broken" for report in cut_off.values()), \
        {name: report.status for name, report in cut_off.items()}
    assert cut_off, "the check in flight has no result"
    for report in cut_off.values():
        assert "Interrupt" in report.message or "SIGTERM" in report.message, report.message

    # The built-in engine was stopped, not orphaned.
    assert not any(_alive(pid) for pid in engines), "the reference engine outlived the run"
