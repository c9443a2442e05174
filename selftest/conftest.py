"""Fixtures shared by the self-tests."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_files import made_once_per_run, run_folder

# Loaded here, in every worker before any self-test, so that it is never loaded twice: pytester
# removes the modules a test imported when the test ends, and httpx imports httpcore lazily and
# keeps a map of httpcore's exception classes from its first import. A second import of httpcore
# (the next in-process suite run, or a self-test driving the client) would make a dropped
# connection escape the client as an unmapped httpcore error instead of its ``connection`` failure.
import httpcore2  # noqa: F401  (openai's transport: httpx2's httpcore)

# The same removal made every in-process suite run import openai again (1.4 s of CPU), and pyplot at
# its first chart (below). openai keeps no state the suite sets per run (the suite makes its own clients).
import openai  # noqa: F401

from engine_acceptance.reporting.charts import pyplot
from engine_acceptance.reference_engine.launcher import start_from_a_forkserver

# The end-to-end self-tests start some two hundred Python processes (pytest runs, reference
# engines), each importing the suite. With PYTHONDONTWRITEBYTECODE set (this machine sets it)
# every one of them compiled and assertion-rewrote the same 250 modules again: a few seconds
# each. Writing the caches (``__pycache__``, ignored by git) lets the processes after the first share them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Some four hundred reference engines start in a run, each importing the engine and, at the
# first image, the pixel libraries (about a second of CPU each, the cost of a whole small
# check). In this worker and the suite runs in it they are forked from one process that has
# imported both (imported here, before any test, so pytester keeps the switch between runs).
# The runs in a process of their own (``in_process=False``) start the command, as a user's do.
start_from_a_forkserver()

# Every in-process suite run that measures load draws a chart (SLO, throughput, media load), and
# pytester removes the modules a run imported when it ends, so each such run imported pyplot again:
# about a second of CPU (issue 27). Imported here, before any test, it stays loaded between runs.
pyplot()


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference engine's tokenizer.json, exported the way a user would."""
    def export(path: Path) -> None:
        subprocess.run([sys.executable, "-m", "engine_acceptance.reference_engine", "--export-tokenizer", str(path)],
                       check=True, timeout=60)

    return made_once_per_run(tmp_path_factory, "tokenizer.json", export)


def _cpu_lock_path(factory: pytest.TempPathFactory) -> Path:
    return run_folder(factory) / "cpu.lock"


@pytest.fixture(autouse=True)
def _cpu_shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every self-test holds the run's CPU lock shared, so a ``cpu_alone`` test can have the CPUs to itself."""
    if request.node.get_closest_marker("cpu_alone") is not None:
        # It holds the lock exclusively (cpu_alone); a shared hold from the same process would wait on itself.
        yield
        return
    with open(_cpu_lock_path(tmp_path_factory), "a", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield


@pytest.fixture(scope="module")
def cpu_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CPUs to this module alone: no other self-test runs meanwhile on any xdist worker.

    For the test that measures the client's timing error against the engine's own stamps
    to 2% (``test_loadgen_accuracy.py``): the engine and the client each need a core, and
    the self-tests run on two xdist workers on two cores. Beside a busy neighbour it read
    2.1-2.4% in three .ci/run self-test stages; alone, 0.07-0.4%. Every other self-test
    holds the same file lock shared (``_cpu_shared``), so this exclusive hold waits for the
    neighbour's current test to end and holds the next one back until the module is done.
    """
    with open(_cpu_lock_path(tmp_path_factory), "a", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
