"""``engine-acceptance``: run the shipped suite from any folder, as the checkout's ``pytest`` does.

    engine-acceptance --engine-url=http://host:30000 --api-key=... -n auto
    engine-acceptance                       # the built-in reference engine
    engine-acceptance diff BASE NEW         # what changed between two runs' bundles (docs/diff.md)

``diff`` as the first argument runs the diff of two stored runs
(:mod:`engine_acceptance.diff`) and nothing else. Otherwise every argument goes to pytest.
The command is pytest with the suite's checks as the paths to collect, the suite's folder
as rootdir (so reports name checks ``tests/test_text.py::...`` as in the checkout), the
same report defaults as the checkout's ``pytest.ini``, and no ini file or cache of the
current folder's project. ``pytest`` is
exec'd rather than imported, so signals and the exit code are pytest's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from engine_acceptance.resources import suite_root

__all__ = ["main", "suite_command"]

# What the checkout's pytest.ini adds; a given --alluredir wins (the last one counts).
REPORT_DEFAULTS = ("-ra", "--strict-markers", "--alluredir=allure-results", "--clean-alluredir")
# Settings the checkout's pytest.ini gives, here as overrides since there is no ini file.
INI_OVERRIDES = ("-o", "asyncio_default_fixture_loop_scope=function")


def suite_command(args: Sequence[str], *, report_defaults: bool = True) -> list[str]:
    """The pytest command line that runs the shipped suite with ``args`` added."""
    root = suite_root()
    return [sys.executable, "-m", "pytest",
            # No ini file: the current folder's project settings must not leak into the suite.
            "-c", os.devnull, f"--rootdir={root}", *INI_OVERRIDES, "-p", "engine_acceptance", "-p", "no:cacheprovider",
            *(REPORT_DEFAULTS if report_defaults else ()), str(root / "tests"), *args]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["diff"]:
        # Imported here: every other command execs pytest at once and needs none of the diff.
        from engine_acceptance.diff.command import main as diff_main

        return diff_main(arguments[1:])
    command = suite_command(arguments)
    os.execv(command[0], command)
    return 0  # not reached: execv replaces this process
