"""Every piece of state the plugin keeps on pytest's config and items: typed stash keys, in one place.

Plain modules never hold pytest state; the hooks, the fixture modules and the checks
read it through these keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from engine_acceptance.profiles.expectations import ExpectedFailure
    from engine_acceptance.pytest_plugin.options import AcceptanceOptions
    from engine_acceptance.pytest_plugin.verdict import GateCollector
    from engine_acceptance.session import AcceptanceSession

__all__ = ["options_key", "session_key", "records_key", "item_records_key", "gate_key", "reference_key",
           "sigterm_key", "required_untested_key", "phase_key"]

# config: the parsed command line, one frozen object (options.AcceptanceOptions).
options_key = pytest.StashKey["AcceptanceOptions"]()
# config: the engine under test, what it serves, and the profiles chosen (controller and workers).
session_key = pytest.StashKey["AcceptanceSession"]()
# config: every expected-failure record loaded for this run.
records_key = pytest.StashKey["list[ExpectedFailure]"]()
# item: the records that match this check (it runs as a strict xfail that must fail as recorded).
item_records_key = pytest.StashKey["list[ExpectedFailure]"]()
# config (controller only): the verdict being gathered from every report.
gate_key = pytest.StashKey["GateCollector"]()
# config: the built-in reference engine this run started, stopped at the end.
reference_key = pytest.StashKey[Any]()
# config: the SIGTERM handler that was in place before ours, restored at the end.
sigterm_key = pytest.StashKey[Any]()
# item: why a check of a required capability cannot run; it fails with this instead of skipping.
required_untested_key = pytest.StashKey[str]()
# config: which part of the run this process collects for (absent: everything).
phase_key = pytest.StashKey[str]()
