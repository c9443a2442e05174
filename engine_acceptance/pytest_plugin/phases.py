"""One invocation, two phases: the functional checks, then the measurements alone.

Throughput and recall figures are only true when nothing else loads the engine
(DESIGN "Scale"), yet the acceptance of a deployment is one command with one
verdict. So a run is split in two phases instead of skipping the measurements:

- in one process, the measurements are moved to the end of the run; one test runs
  at a time, so nothing else is in flight while they measure;
- under pytest-xdist, the workers run only the functional checks; when every worker
  has finished, the controller collects the measurements itself and runs them one
  after another in its own process, with the workers idle.

Both phases report to the same terminal, ``gate.json``, Allure results and exit
code, because in both cases the reports reach the controller's hooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine_acceptance.pytest_plugin.keys import phase_key, session_key

__all__ = ["MEASUREMENT_MARKERS", "WORKER_INPUT_KEY", "MeasurementPhase", "XdistHooks", "measurement_marker",
           "split_for_phase"]

# Measurements that must have the engine to themselves, in the order they run. The cancellation
# checks read the engine's gauges of running requests and KV cache, which count every client's.
# The tool-accuracy set is hundreds of requests at its own concurrency: run alone, it neither
# slows the functional checks nor shares the engine with a timed measurement, and its progress
# reaches the terminal (the controller runs this phase). The SLO check's open-loop load is timed.
# The prefix-cache checks read the engine's cache counters (which count every client's hits), send a
# unique prefix cold and then warm (another client's traffic could evict it between), and time the
# first token cold and warm: first, since they take seconds.
MEASUREMENT_MARKERS = ("prefix_cache", "tool_accuracy", "throughput", "recall", "recall_1m", "soak", "cancellation",
                       "slo")

# Where the controller hands the session to each xdist worker.
WORKER_INPUT_KEY = "engine_acceptance_session"
FUNCTIONAL = "functional"
MEASUREMENTS = "measurements"


def measurement_marker(item: pytest.Item) -> str | None:
    return next((name for name in MEASUREMENT_MARKERS if item.get_closest_marker(name)), None)


def _order(item: pytest.Item) -> int:
    marker = measurement_marker(item)
    return -1 if marker is None else MEASUREMENT_MARKERS.index(marker)


def split_for_phase(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the items of this process's phase, functional checks first, measurements in order.

    Items of the other phase are not "deselected": they run in the other phase, so
    they are dropped silently rather than counted as deselected by the user.
    """
    phase = config.stash.get(phase_key, None)
    if phase == FUNCTIONAL:
        items[:] = [item for item in items if measurement_marker(item) is None]
    elif phase == MEASUREMENTS:
        items[:] = [item for item in items if measurement_marker(item) is not None]
    # sorted() is stable: within a phase the collection order stays.
    items[:] = sorted(items, key=_order)


class XdistHooks:
    """Registered on the controller when pytest-xdist is present: hands the session to each worker."""

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        session = node.config.stash.get(session_key, None)
        if session is not None:
            node.workerinput[WORKER_INPUT_KEY] = session.to_dict()


class MeasurementPhase:
    """Registered on the pytest-xdist controller: runs the measurements after the workers' phase."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[Any]:
        result = yield  # pytest-xdist's loop: the workers run the functional checks
        if session.shouldfail or session.shouldstop or self.config.option.collectonly:
            return result
        self.config.stash[phase_key] = MEASUREMENTS
        functional = session.testscollected  # what the workers collected (set by xdist)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
        # xdist keeps the controller from collecting (its pytest_collection hook); this phase
        # needs the items here, so collect directly.
        session.perform_collect()
        items = session.items
        # The terminal's progress counts both phases' checks.
        session.testscollected = functional + len(items)
        if items:
            _announce(self.config, items)
        for index, item in enumerate(items):
            following = items[index + 1] if index + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return result


def _announce(config: pytest.Config, items: list[pytest.Item]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    kinds = sorted({measurement_marker(item) or "" for item in items}, key=MEASUREMENT_MARKERS.index)
    reporter.write_line("")
    reporter.write_line(f"engine-acceptance: functional checks done; now {len(items)} measurement(s) "
                        f"({', '.join(kinds)}) run one at a time, alone on the engine", bold=True)
