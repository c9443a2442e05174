"""The pytest plugin's hooks, and only hooks: each one hands its work to a module of this package.

Loaded through the ``pytest11`` entry point named ``engine_acceptance`` (so also by
``-p engine_acceptance``). Options are parsed in :mod:`.options`, the engine is brought up
in :mod:`.engine_setup`, checks are planned in :mod:`.collection`, the two phases are
scheduled in :mod:`.phases`, the verdict is gathered in :mod:`.gate_hooks`, Allure output
is in :mod:`.allure_report`, a check cut off by an interrupt in :mod:`.interrupts`. Our own errors are mapped
to pytest's exit codes here, in one place: a usage error exits 4, an unavailable engine 6.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.errors import ENGINE_UNAVAILABLE_EXIT_CODE, EngineUnavailable, UsageError
from engine_acceptance.profiles.expectations import load_expectations
from engine_acceptance.profiles.sources import ProfileError, describe_sources, use_profile_dirs
from engine_acceptance.pytest_plugin import allure_report, gate_json, interrupts, suite
from engine_acceptance.pytest_plugin.broken_lead import BrokenLeadHooks
from engine_acceptance.pytest_plugin.collection import plan_items
from engine_acceptance.pytest_plugin.engine_setup import check_profiles, prepare_session, shortfalls_of
from engine_acceptance.pytest_plugin.gate_hooks import GateHooks
from engine_acceptance.pytest_plugin.keys import (
    gate_key,
    options_key,
    phase_key,
    records_key,
    reference_key,
    required_untested_key,
    session_key,
    sigterm_key,
)
from engine_acceptance.pytest_plugin.options import AcceptanceOptions, add_options
from engine_acceptance.pytest_plugin.phases import (
    FUNCTIONAL,
    WORKER_INPUT_KEY,
    MeasurementPhase,
    XdistHooks,
    split_for_phase,
)
from engine_acceptance.pytest_plugin.records import RecordHooks
from engine_acceptance.pytest_plugin.unrecorded_xfail import UnrecordedXfailHooks
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.reporting import allure_files
from engine_acceptance.session import AcceptanceSession
from engine_acceptance.shortfalls import SIZE_PROPERTY
from engine_acceptance.sigterm import install_sigterm_handler, restore_sigterm_handler
from engine_acceptance.wire import health

__all__ = ["ENGINE_UNAVAILABLE_EXIT_CODE"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


# tryfirst: RecordHooks must be registered before allure-pytest's listener (registered in
# allure's pytest_configure), so that Allure's makereport wrapper runs around ours and
# writes the report as RecordHooks corrected it.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The one place where our errors become pytest's exit codes."""
    try:
        _configure(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    except EngineUnavailable as exc:
        gate = config.stash.get(gate_key, None)
        if gate is not None:
            gate.engine_unavailable = str(exc)
            gate_json.write(gate, config.stash[options_key].gate_json)
        pytest.exit(f"engine-acceptance: {exc}", returncode=ENGINE_UNAVAILABLE_EXIT_CODE)


def _configure(config: pytest.Config) -> None:
    suite.register_markers(config)
    if config.option.help or config.option.version or not suite.is_acceptance_run(config):
        return
    suite.collect_shipped_suite_if_nothing_named(config)
    suite.register_fixture_modules(config)
    options = AcceptanceOptions.from_config(config)
    config.stash[options_key] = options
    # In every process (xdist workers run this hook with the controller's options), before
    # any profile or record is read: the user's folders come first in every lookup.
    try:
        use_profile_dirs(options.profiles_dirs)
    except ProfileError as exc:
        raise UsageError(f"--profiles-dir: {exc}") from None
    try:
        config.stash[records_key] = load_expectations(list(options.expectation_files)
                                                      if options.expectation_files else None)
    except ProfileError as exc:
        raise UsageError(f"--expectations: {exc}" if options.expectation_files else str(exc)) from None
    # In every process that runs checks (xdist workers too): Allure must not call a check cut
    # off by Ctrl-C passed, and a recorded check failing otherwise than its record says fails.
    config.pluginmanager.register(interrupts.InterruptedTestReport(), "engine-acceptance-interrupted-test")
    config.pluginmanager.register(RecordHooks(), "engine-acceptance-records")
    # Only a record makes an xfail known: a conftest's xfail mark or pytest.xfail() in a check fails.
    config.pluginmanager.register(UnrecordedXfailHooks(), "engine-acceptance-unrecorded-xfail")
    # A failing check of a capability found broken leads with the probe's finding (the engine's words).
    config.pluginmanager.register(BrokenLeadHooks(), "engine-acceptance-broken-lead")
    # A CI kill (SIGTERM) must leave a verdict and stop the engine, as Ctrl-C does.
    config.stash[sigterm_key] = install_sigterm_handler()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # Workers run the functional phase; the controller runs the measurements after them.
        config.stash[phase_key] = FUNCTIONAL
        if WORKER_INPUT_KEY in workerinput:
            config.stash[session_key] = AcceptanceSession.from_dict(workerinput[WORKER_INPUT_KEY])
        return
    gate = GateCollector(stale_records_fail=options.stale_records_fail, allow_untested=options.allow_untested)
    config.stash[gate_key] = gate
    gate_hooks = GateHooks(gate, options.gate_json, options.run_bundle)
    config.pluginmanager.register(gate_hooks, "engine-acceptance-gate")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "engine-acceptance-xdist")
        # The condition under which pytest-xdist itself starts workers (its DSession).
        if getattr(config.option, "dist", "no") != "no" and not config.option.collectonly:
            config.pluginmanager.register(MeasurementPhase(config), "engine-acceptance-measurement-phase")
    engine_profiles = check_profiles(options)
    if config.option.collectonly:
        return
    session = prepare_session(options, engine_profiles,
                              keep_reference=lambda running: config.stash.__setitem__(reference_key, running))
    config.stash[session_key] = session
    gate_hooks.session = session
    gate.plans = session.plans
    gate.engine_facts = session.engine_facts()
    gate.shortfalls = shortfalls_of(options, session)


def pytest_unconfigure(config: pytest.Config) -> None:
    reference = config.stash.get(reference_key, None)
    if reference is not None:
        reference.stop()
    restore_sigterm_handler(config.stash.get(sigterm_key, None))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Fail at once: once this process has found the engine gone, or when a required capability is not served."""
    session = item.config.stash.get(session_key, None)
    loss = health.lost(session.engine.url) if session is not None else None
    if loss is not None:
        pytest.fail(loss.message(), pytrace=False)
    untested = item.stash.get(required_untested_key, None)
    if untested is not None:
        pytest.fail(untested, pytrace=False)


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(session_key, None)
    if session is None:
        return []
    lines = [f"engine-acceptance: {session.describe()}"]
    # Where profiles and records came from, and every shipped file a user's file replaced.
    lines += [f"engine-acceptance: {line}" for line in describe_sources()]
    return allure_report.reference_banner(session) + lines if session.reference else lines


# trylast: after -m/-k have deselected, so "what else runs" means what really runs.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = config.stash.get(session_key, None)
    if session is None:
        return
    split_for_phase(config, items)
    plan_items(items, session, config.stash.get(records_key, []),
               stale_records_fail=config.stash[options_key].stale_records_fail)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(session_key, None)
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir and state is not None and not hasattr(config, "workerinput"):
        gate = config.stash.get(gate_key, None)
        shortfalls = allure_report.shortfall_facts(gate.shortfall_entries()) if gate is not None else {}
        allure_files.write_environment(alluredir, {**state.environment(), **shortfalls})
        allure_files.write_categories(alluredir)
        allure_files.write_executor(alluredir, allure_report.executor_build_name(state))


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A check that passed smaller than its name says reads so: "PASSED (ran at 7,000 tokens, not 1,048,576)"."""
    if report.when != "call" or not report.passed or hasattr(report, "wasxfail"):
        return None  # an XPASS keeps pytest's own word
    note = dict(report.user_properties).get(SIZE_PROPERTY)
    return ("passed", ".", f"PASSED ({note})") if note else None


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(session_key, None)
    if state is not None and state.reference:
        for line in allure_report.reference_banner(state):
            terminalreporter.write_line(line, yellow=True, bold=True)
