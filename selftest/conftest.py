"""Fixtures shared by the self-tests."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference engine's tokenizer.json, exported the way a user would."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    subprocess.run([sys.executable, "-m", "engine_acceptance.reference_engine", "--export-tokenizer", str(path)],
                   check=True, timeout=60)
    return path


@pytest.fixture
def cpu_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Held by the self-tests that time the client against the truth, and by those that load every CPU.

    The self-tests run on two xdist workers on two cores: a test measuring the client's
    timing error to 2% (``test_loadgen_accuracy.py``) beside one that spawns client
    processes or drives an engine to its knee read 2.1-2.4% in two runs. An exclusive
    lock on a file in the run's shared temporary folder keeps those tests from
    overlapping; the others still run beside them.
    """
    # Under xdist each worker's base folder is popen-gwN inside the run's folder: its parent is shared.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base
    with open(shared / "cpu-alone.lock", "w", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
