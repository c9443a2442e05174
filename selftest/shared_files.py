"""Files the self-tests' xdist workers share: one folder per run, and files made once in it.

Under xdist each worker's temporary folder is ``popen-gwN`` inside the run's own folder, so
that parent is where the workers meet: the CPU lock (``conftest.py``) and the files that
:func:`made_once_per_run` makes for whichever worker asks first.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["made_once_per_run", "run_folder"]


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder every xdist worker of this run shares (each worker's own is popen-gwN inside it)."""
    base = factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def made_once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The file ``name``, made by ``make(path)`` once for the whole run, whichever worker asks first.

    A module-scoped fixture runs once per xdist worker that got one of the module's tests: the
    clean tool-accuracy baseline (the whole set recorded, ~20 s) was recorded twice in every run.
    The other worker waits on the lock and reads the same file. A ``make`` that fails leaves no
    file, and the next to ask tries again (and fails the same way, with its own message).
    """
    path = run_folder(factory) / "made-once" / name
    path.parent.mkdir(exist_ok=True)
    with open(path.with_name(f"{name}.lock"), "a", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            make(path)
    return path
