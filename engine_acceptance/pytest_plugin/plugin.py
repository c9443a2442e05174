"""The pytest plugin: options, readiness before the run, skips, report hooks.

Only wiring lives here; the work is in plain modules (readiness, profiles,
clients, reporting) that are tested without pytest.
"""

from __future__ import annotations

import os
import secrets
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.wire import health as engine_health

from engine_acceptance.pytest_plugin import interrupts

from engine_acceptance.pytest_plugin import allure_report as reporting
from engine_acceptance.pytest_plugin.phases import FUNCTIONAL, MeasurementPhase, phase_key, split_for_phase
from engine_acceptance.wire.client import ClientTimeouts
from engine_acceptance.profiles.expectations import ExpectedFailure, load_expectations, matching_records
from engine_acceptance.pytest_plugin.records import RecordHooks, records_key
from engine_acceptance.profiles.capabilities import MARKER_CAPABILITIES, validate_capability_names
from engine_acceptance.pytest_plugin.verdict import CAPABILITIES, COVERS_PROPERTY, GateCollector
from engine_acceptance.profiles.profile import (
    ProfileError,
    available_profiles,
    choose_model_profile,
    load_engine_profile,
    load_model_profile,
)
from engine_acceptance.wire.readiness import EngineUnavailable, detect_engine, wait_until_ready
from engine_acceptance.session import AcceptanceSession, ReferenceTarget

__all__ = ["ENGINE_UNAVAILABLE_EXIT_CODE", "recall_tokens_key", "session_key", "tokenizer_key"]

# Distinct from pytest's own codes (0-5) so a pipeline can tell "engine down" from "tests failed".
ENGINE_UNAVAILABLE_EXIT_CODE = 6
ENGINE_KINDS = ("auto", "vllm", "sglang", "generic")
CONVENTIONS = ("vllm", "sglang")
WORKER_INPUT_KEY = "engine_acceptance_session"
# The built-in reference engine serves the model of this profile.
REFERENCE_MODEL_PROFILE = "reference"
# --reference-serves values: what the built-in engine then does not serve (launcher keyword).
REFERENCE_LIMITS = {"text-only": ("text_only", True), "no-tool-parser": ("tool_parser", False),
                    "no-tokenize": ("tokenize", False), "no-reasoning": ("reasoning", False)}

session_key = pytest.StashKey[AcceptanceSession]()
_expectations_key = pytest.StashKey[list[ExpectedFailure]]()
_gate_key = pytest.StashKey[GateCollector]()
_reference_key = pytest.StashKey[Any]()
_sigterm_key = pytest.StashKey[Any]()
# Set on a check of a required capability that is not served: it fails instead of skipping.
_required_untested_key = pytest.StashKey[str]()
# --recall-tokens as a number, and the --tokenizer file loaded (None when not given).
recall_tokens_key = pytest.StashKey["int | None"]()
tokenizer_key = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("engine-acceptance", "Engine acceptance")
    group.addoption("--engine-url", default=None,
                    help="Base URL of the engine under test, e.g. http://host:30000 (default: start the built-in "
                         "reference engine)")
    group.addoption("--api-key", default=None,
                    help="API key sent as a Bearer token (default: the ENGINE_API_KEY environment variable)")
    group.addoption("--model", default=None, help="Served model name to test (default: the only listed model)")
    group.addoption("--engine", default="auto", help=f"Engine kind, one of {', '.join(ENGINE_KINDS)} (default: auto)")
    group.addoption("--profile", default=None,
                    help="Model profile name or YAML path (default: the profile whose match fits the model, "
                         "else generic)")
    group.addoption("--expect", action="append", default=[], metavar="CAP[,CAP...]",
                    help="Capabilities the deployment must serve, e.g. tools,image (repeatable; adds to the model "
                         "profile's expect). One that is not served, or whose checks all skip, fails the gate")
    group.addoption("--probe-timeout", type=float, default=60.0,
                    help="Seconds one capability probe (a few dozen output tokens) may take before the capability "
                         "counts as broken (default: 60, at most --request-timeout)")
    group.addoption("--connect-timeout", type=float, default=10.0, help="Seconds to open a connection (default: 10)")
    group.addoption("--idle-timeout", type=float, default=60.0,
                    help="Seconds of silence allowed between two chunks of a reply (default: 60)")
    group.addoption("--request-timeout", type=float, default=300.0,
                    help="Seconds for one whole request (default: 300)")
    group.addoption("--readiness-timeout", type=float, default=60.0,
                    help="Seconds to wait for /health to answer 200 before the run (default: 60)")
    group.addoption("--startup-timeout", type=float, default=0.0,
                    help="Seconds to keep retrying while nothing listens at the URL, for engines still "
                         "starting (default: 0, fail at once)")
    group.addoption("--expectations", action="append", default=None, metavar="FILE",
                    help="Expected-failure record file (repeatable; default: every file in fixtures/expectations)")
    group.addoption("--stale-records", default="fail", choices=("fail", "warn"),
                    help="A known-defect record whose check now passes: fail the gate (default) or warn")
    group.addoption("--gate-json", default="gate.json", metavar="PATH",
                    help="Where to write the machine-readable gate verdict (default: gate.json)")
    group.addoption("--convention", default="vllm",
                    help="Built-in reference engine only: imitate vllm or sglang (default: vllm)")
    group.addoption("--inject", action="append", default=[], metavar="DEFECT",
                    help="Built-in reference engine only: inject a defect (repeatable)")
    group.addoption("--reference-model", default=None, metavar="NAME",
                    help="Built-in reference engine only: serve the model under this name (default: reference-model)")
    group.addoption("--reference-serves", action="append", default=[], metavar="LIMIT",
                    help="Built-in reference engine only: serve less, like a deployment configured so: "
                         f"{', '.join(REFERENCE_LIMITS)} (repeatable)")
    group.addoption("--recall-tokens", default=None, metavar="N",
                    help="Recall prompt length in tokens (default: the model profile's context length, else the "
                         "engine's max_model_len, minus room for the answer; an engine advertising less than the "
                         "profile declares fails the long-context checks unless this asks for less)")
    group.addoption("--tokenizer", default=None, metavar="PATH",
                    help="The served model's tokenizer.json, to count prompt tokens locally (default: the "
                         "engine's /tokenize)")
    group.addoption("--throughput-shapes", default="smoke", metavar="SPEC",
                    help="Throughput cells: smoke, full (the seeds' matrix), or a comma list of IN/OUT, "
                         "IN/OUT@C, IN/OUT@CxR (default: smoke)")
    group.addoption("--throughput-rounds", type=int, default=3, metavar="N",
                    help="Measured rounds per throughput cell; tables show the median of rounds (default: 3)")
    group.addoption("--throughput-threshold", action="append", default=[], metavar="[CELL:]METRIC<=|>=VALUE",
                    help="Throughput gate on a cell's median, e.g. p95_ttft_ms<=500 or "
                         "128/128@4:output_tok_s>=100 (repeatable; adds to the model profile's)")
    group.addoption("--throughput-tolerance", action="append", default=[], metavar="METRIC=PCT",
                    help="Allowed regression against the baseline, e.g. p95_ttft_ms=20%% (repeatable; overrides "
                         "the baseline file's)")
    group.addoption("--throughput-baseline", default=None, metavar="PATH",
                    help="Compare throughput with this saved baseline")
    group.addoption("--throughput-save", default=None, metavar="PATH",
                    help="Save this run's throughput medians as a baseline")
    group.addoption("--throughput-out", default=None, metavar="PATH",
                    help="Write every throughput round's figures to this JSON file")
    group.addoption("--throughput-seed", type=int, default=None, metavar="N",
                    help="Seed of the throughput prompts' text and offsets, so runs send the same prompts "
                         "(default: random)")
    group.addoption("--media-shapes", default="full", metavar="SPEC",
                    help="Media throughput cells: full (seed 001's), or a comma list of NAME, NAME@C, NAME@CxR "
                         "(fixtures/media_throughput.yaml; default: full)")
    group.addoption("--soak-minutes", default=None, metavar="N",
                    help="Run the mixed-traffic soak (pytest -m soak) for N minutes (default: the soak is off)")
    group.addoption("--soak-rate", default="0.5", metavar="R", help="Soak requests per second (default: 0.5)")
    group.addoption("--soak-image-share", default="0.2", metavar="F",
                    help="Share of soak requests carrying an image (default: 0.2)")
    group.addoption("--soak-workers", default="4", metavar="N",
                    help="Soak requests in flight at most (default: 4)")


def pytest_configure(config: pytest.Config) -> None:
    if config.option.help or config.option.version:
        return
    try:
        paths = [Path(p) for p in config.option.expectations] if config.option.expectations else None
        config.stash[_expectations_key] = load_expectations(paths)
    except ProfileError as exc:
        raise pytest.UsageError(f"--expectations: {exc}") from exc
    _validate_throughput_options(config)
    _validate_media_and_soak_options(config)
    # In every process that runs tests (xdist workers too): Allure must not call a check cut off by Ctrl-C passed.
    config.pluginmanager.register(interrupts.InterruptedTestReport(), "engine-acceptance-interrupted-test")
    # In every process that runs tests too: a recorded check failing otherwise than its record says fails.
    config.pluginmanager.register(RecordHooks(), "engine-acceptance-records")
    # A CI kill (SIGTERM) must leave a verdict and stop the engine, as Ctrl-C does; in
    # xdist workers too, when the whole process group gets it.
    config.stash[_sigterm_key] = interrupts.install_sigterm_handler()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        gate = GateCollector(stale_records_fail=config.option.stale_records == "fail")
        config.stash[_gate_key] = gate
        config.pluginmanager.register(_GateHooks(gate), "engine-acceptance-gate")
    if workerinput is not None:
        # Workers run the functional phase; the controller runs the measurements after them.
        config.stash[phase_key] = FUNCTIONAL
        if WORKER_INPUT_KEY in workerinput:
            config.stash[session_key] = AcceptanceSession.from_dict(workerinput[WORKER_INPUT_KEY])
        return
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "engine-acceptance-xdist")
        # The condition under which pytest-xdist itself starts workers (its DSession).
        if getattr(config.option, "dist", "no") != "no" and not config.option.collectonly:
            config.pluginmanager.register(MeasurementPhase(config), "engine-acceptance-measurement-phase")
    options = _validated_options(config)
    if config.option.collectonly:
        return
    try:
        config.stash[session_key] = _prepare_session(config, options)
    except EngineUnavailable as exc:
        gate = config.stash[_gate_key]
        gate.engine_unavailable = str(exc)
        gate.write(config.option.gate_json)
        pytest.exit(f"engine-acceptance: {exc}", returncode=ENGINE_UNAVAILABLE_EXIT_CODE)
    config.stash[_gate_key].plans = config.stash[session_key].plans
    config.stash[_gate_key].engine_facts = config.stash[session_key].engine_facts()
    _check_recall_tokens_fit(config, config.stash[session_key])


def _validate_throughput_options(config: pytest.Config) -> None:
    from engine_acceptance.load.settings import SettingsError, settings_from_options, settings_key

    opt = config.option
    try:
        config.stash[settings_key] = settings_from_options(
            shapes=opt.throughput_shapes, rounds=opt.throughput_rounds, thresholds=opt.throughput_threshold,
            tolerances=opt.throughput_tolerance, baseline=opt.throughput_baseline, save=opt.throughput_save,
            out=opt.throughput_out)
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


def _validate_media_and_soak_options(config: pytest.Config) -> None:
    from engine_acceptance.load.media_load import MediaSettings, MediaSettingsError, media_settings_key, select_media_cells
    from engine_acceptance.load.soak import SoakSettingsError, soak_settings_from_options, soak_settings_key

    opt = config.option
    try:
        config.stash[media_settings_key] = MediaSettings(tuple(select_media_cells(opt.media_shapes)), opt.media_shapes)
        config.stash[soak_settings_key] = soak_settings_from_options(
            minutes=opt.soak_minutes, rate=opt.soak_rate, workers=opt.soak_workers, image_share=opt.soak_image_share)
    except (MediaSettingsError, SoakSettingsError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _validate_recall_options(config: pytest.Config) -> None:
    from engine_acceptance.recall.haystack import MIN_RECALL_TOKENS
    from engine_acceptance.wire.token_count import LocalTokenCounter, TokenCountError

    raw = config.option.recall_tokens
    tokens = None
    if raw is not None:
        try:
            tokens = int(str(raw).replace("_", ""))
        except ValueError:
            raise pytest.UsageError(f"--recall-tokens: {raw!r} is not a whole number of tokens") from None
        if tokens < MIN_RECALL_TOKENS:
            raise pytest.UsageError(f"--recall-tokens: {raw!r} is below the minimum of {MIN_RECALL_TOKENS} tokens")
    config.stash[recall_tokens_key] = tokens
    path = config.option.tokenizer
    try:
        config.stash[tokenizer_key] = LocalTokenCounter.from_file(path) if path is not None else None
    except TokenCountError as exc:
        raise pytest.UsageError(f"--tokenizer: {path!r}: {exc}") from None


def _check_recall_tokens_fit(config: pytest.Config, session: AcceptanceSession) -> None:
    """An explicit --recall-tokens the engine cannot take is a usage error, not a failed check."""
    from engine_acceptance.recall.haystack import recall_budget

    requested = config.stash.get(recall_tokens_key, None)
    if requested is None:
        return
    try:
        recall_budget(requested=requested, profile_context=session.model_profile.context_length,
                      max_model_len=session.engine.max_model_len)
    except ValueError as exc:
        raise pytest.UsageError(f"--recall-tokens: {config.option.recall_tokens!r}: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    reference = config.stash.get(_reference_key, None)
    if reference is not None:
        reference.stop()
    interrupts.restore_sigterm_handler(config.stash.get(_sigterm_key, None))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Fail at once: once this process has found the engine gone, or when a required capability is not served."""
    session = item.config.stash.get(session_key, None)
    loss = engine_health.lost(session.engine.url) if session is not None else None
    if loss is not None:
        pytest.fail(loss.message(), pytrace=False)
    untested = item.stash.get(_required_untested_key, None)
    if untested is not None:
        pytest.fail(untested, pytrace=False)


def _validated_options(config: pytest.Config) -> dict[str, Any]:
    opt = config.option
    url = opt.engine_url
    given = [a for a in config.invocation_params.args if a == "--engine-url" or a.startswith("--engine-url=")]
    if len(given) > 1:
        raise pytest.UsageError(f"--engine-url: given {len(given)} times; a run tests one engine. To compare engines "
                                "side by side: python -m engine_acceptance.compare --engine NAME=URL --engine "
                                "NAME2=URL2 -- [pytest args] (README, Comparing engines)")
    if url is not None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise pytest.UsageError(f"--engine-url: {url!r} is not an http(s) URL like http://host:30000")
        try:
            parsed.port
        except ValueError:
            raise pytest.UsageError(f"--engine-url: {url!r} has an invalid port") from None
        if parsed.username or parsed.password:
            raise pytest.UsageError("--engine-url: put credentials in --api-key, not in the URL")
        if opt.inject or opt.convention != "vllm" or opt.reference_model or opt.reference_serves:
            raise pytest.UsageError("--inject, --convention, --reference-model and --reference-serves apply to the "
                                    "built-in reference engine only; drop them or drop --engine-url")
        url = url.rstrip("/")
        if url.endswith("/v1"):
            url = url[: -len("/v1")]
    if opt.engine not in ENGINE_KINDS:
        raise pytest.UsageError(f"--engine: {opt.engine!r} is not one of {', '.join(ENGINE_KINDS)}")
    if opt.convention not in CONVENTIONS:
        raise pytest.UsageError(f"--convention: {opt.convention!r} is not one of {', '.join(CONVENTIONS)}")
    from engine_acceptance.reference_engine.defects import DEFECTS

    for limit in opt.reference_serves:
        if limit not in REFERENCE_LIMITS:
            raise pytest.UsageError(f"--reference-serves: unknown {limit!r}; known: {', '.join(REFERENCE_LIMITS)}")
    for defect in opt.inject:
        if defect not in DEFECTS:
            raise pytest.UsageError(f"--inject: unknown defect {defect!r}; known: {', '.join(sorted(DEFECTS))}")
    for name in ("connect_timeout", "idle_timeout", "request_timeout", "readiness_timeout", "probe_timeout"):
        if getattr(opt, name) <= 0:
            raise pytest.UsageError(f"--{name.replace('_', '-')}: {getattr(opt, name)!r} must be a positive number")
    if opt.startup_timeout < 0:
        raise pytest.UsageError(f"--startup-timeout: {opt.startup_timeout!r} must be zero or positive")
    _validate_recall_options(config)
    try:
        expected = validate_capability_names(",".join(opt.expect).split(","), source="--expect")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        engine_profiles = [load_engine_profile(name) for name in available_profiles("engines")]
        if opt.profile:
            choose_model_profile("", opt.profile)
    except ProfileError as exc:
        raise pytest.UsageError(f"--profile: {exc}" if opt.profile else str(exc)) from exc
    return {
        "url": url,
        "api_key": opt.api_key or os.environ.get("ENGINE_API_KEY") or None,
        "engine_profiles": engine_profiles,
        "expected": expected,
        "timeouts": ClientTimeouts(connect=opt.connect_timeout, idle=opt.idle_timeout, total=opt.request_timeout),
    }


def _prepare_session(config: pytest.Config, options: dict[str, Any]) -> AcceptanceSession:
    opt = config.option
    reference: ReferenceTarget | None = None
    url = options["url"]
    if url is None:
        from engine_acceptance.reference_engine.launcher import start_reference_engine

        if options["api_key"] is None:
            # The built-in engine always requires a key, so the authentication checks run on
            # it (and `--inject auth-ignored` fails the default command) instead of skipping
            # for want of a key. It is random, lives only as long as the run, and is redacted
            # from reports like any key.
            options["api_key"] = secrets.token_urlsafe(24)
        try:
            limits = dict(REFERENCE_LIMITS[name] for name in opt.reference_serves)
            if opt.reference_model:
                limits["model"] = opt.reference_model
            running = start_reference_engine(
                convention=opt.convention, api_key=options["api_key"], defects=tuple(opt.inject), **limits,
                # As long a context as its profile promises (1M: the recall_1m check runs on it).
                max_model_len=load_model_profile(REFERENCE_MODEL_PROFILE).context_length,
            )
        except RuntimeError as exc:
            raise EngineUnavailable(f"the built-in reference engine did not start: {exc}") from exc
        config.stash[_reference_key] = running
        url = running.url
        reference = ReferenceTarget(opt.convention, tuple(opt.inject), str(getattr(running, "log_path", "")) or None)

    def progress(message: str) -> None:
        sys.stderr.write(f"engine-acceptance: {message}\n")
        sys.stderr.flush()

    ready_after = wait_until_ready(
        url,
        readiness_timeout=opt.readiness_timeout,
        startup_timeout=opt.startup_timeout,
        probe_timeout=opt.connect_timeout,
        progress=progress,
    )
    engine = detect_engine(
        url,
        api_key=options["api_key"],
        requested_kind=opt.engine,
        requested_model=opt.model,
        engine_profiles=options["engine_profiles"],
        probe_timeout=max(opt.connect_timeout, 10.0),
    )
    engine.ready_after_s = ready_after
    engine_profile = next(p for p in options["engine_profiles"] if p.name == engine.kind)
    try:
        model_profile = choose_model_profile(engine.model, opt.profile)
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from exc
    discovery = _discover_capabilities(engine, engine_profile, options, progress, opt.probe_timeout)
    return AcceptanceSession(
        engine=engine,
        engine_profile=engine_profile,
        declared_profile=model_profile,
        required=options["expected"] | model_profile.expect,
        discovery=discovery,
        api_key=options["api_key"],
        timeouts=options["timeouts"],
        reference=reference,
    )


class _XdistHooks:
    """Registered only when pytest-xdist is present: hands the session to workers."""

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        session = node.config.stash.get(session_key, None)
        if session is not None:
            node.workerinput[WORKER_INPUT_KEY] = session.to_dict()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(session_key, None)
    if session is None:
        return []
    lines = [f"engine-acceptance: {session.describe()}"]
    if session.reference:
        lines = reporting.reference_banner(session) + lines
    return lines


# trylast: after -m/-k have deselected, so "what else runs" means what really runs.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip checks whose capability the model profile lacks; mark known defects as strict xfails."""
    session = config.stash.get(session_key, None)
    if session is None:
        return
    records = config.stash.get(_expectations_key, [])
    split_for_phase(config, items)
    for item in items:
        covers = _capabilities_tested_by(item)
        # Read back by the gate from every report (xdist workers' too): what this check covers.
        item.user_properties.append((COVERS_PROPERTY, ",".join(sorted(covers))))
        for marker in item.iter_markers("requires"):
            for capability in marker.args:
                if session.model_profile.has(capability):
                    continue
                if capability in session.required:
                    # A skip that hides a required capability is a failure, not a skip.
                    item.stash[_required_untested_key] = (f"required capability {capability!r}: "
                                                          f"{session.skip_reason(capability)}")
                else:
                    item.add_marker(pytest.mark.skip(reason=session.skip_reason(capability)))
        known = matching_records(records, item.nodeid, engine=session.engine.kind,
                                 version=session.engine.version, model=session.engine.model)
        if known:
            item.stash[records_key] = known
            item.add_marker(pytest.mark.xfail(strict=config.option.stale_records == "fail",
                                              reason=" | ".join(r.xfail_reason() for r in known)))
        _label_for_allure(item, session)


def _discover_capabilities(engine: Any, engine_profile: Any, options: dict[str, Any],
                           progress: Any, probe_timeout: float) -> Any:
    """Probe what the deployment serves, once, before any check (in the controller only)."""
    import asyncio

    from engine_acceptance.wire.client import EngineTarget
    from engine_acceptance.wire.discovery import discover
    from engine_acceptance.media.library import MEDIA_DIR

    timeouts: ClientTimeouts = options["timeouts"]
    # A probe asks for a few dozen tokens: a hang is a finding (broken), not a reason to
    # hold the run for the whole request timeout.
    probe_timeouts = ClientTimeouts(connect=timeouts.connect, idle=min(timeouts.idle, probe_timeout),
                                    total=min(timeouts.total, probe_timeout))
    target = EngineTarget(base_url=engine.url, model=engine.model, api_key=options["api_key"], timeouts=probe_timeouts)
    progress("probing what the deployment serves (tools, image, video, reasoning and its switch, /tokenize)")
    found = asyncio.run(discover(target, engine_profile, advertised_context=engine.max_model_len,
                                 media_dir=MEDIA_DIR, timeouts=probe_timeouts))
    progress(f"probed in {found.elapsed_s:.1f} s: {found.summary()}")
    return found


def _capabilities_tested_by(item: pytest.Item) -> set[str]:
    covers = {name for marker in item.iter_markers("requires") for name in marker.args}
    covers |= {capability for marker, capability in MARKER_CAPABILITIES.items() if item.get_closest_marker(marker)}
    return covers


def _label_for_allure(item: pytest.Item, session: AcceptanceSession) -> None:
    """Epic = engine, feature = capability, story = check: how a release manager reads the dashboard."""
    capability = next((name for name in CAPABILITIES if item.get_closest_marker(name)), "other")
    engine = f"{session.engine.kind} {session.engine.version or ''}".strip()
    if session.reference:
        engine += " (built-in reference engine)"
    for label_type, value in (("epic", engine), ("feature", capability),
                              ("story", getattr(item, "originalname", item.name))):
        item.add_marker(pytest.mark.allure_label(value, label_type=label_type))


class _GateHooks:
    """Registered on the controller only: every report, from xdist workers too, reaches it."""

    def __init__(self, gate: GateCollector) -> None:
        self.gate = gate

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        longrepr = "" if report.longrepr is None else str(report.longrepr)
        self.gate.add(report.nodeid, report.keywords, report.when, report.outcome,
                      getattr(report, "wasxfail", None), longrepr, report.user_properties)

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.gate.interrupted = f"interrupted ({getattr(excinfo.value, 'signal_name', None) or excinfo.typename})"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(session_key, None)
    if hasattr(config, "workerinput"):
        return
    gate = config.stash.get(_gate_key, None)
    if gate is not None and state is not None:
        if exitstatus == pytest.ExitCode.INTERRUPTED and not gate.interrupted:
            gate.interrupted = "interrupted"
        gate.write(config.option.gate_json, {"engine": state.environment(), "discovery": (
            state.discovery.to_dict() if state.discovery is not None else None)})
        # The exit code follows the gate: a required capability untested or a run that tested
        # nothing fails although pytest itself saw no failed test.
        if not gate.passed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir and state is not None:
        reporting.write_environment(alluredir, state.environment())
        reporting.write_categories(alluredir)
        reporting.write_executor(alluredir, state)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(session_key, None)
    gate = config.stash.get(_gate_key, None)
    if gate is not None and state is not None:
        terminalreporter.section("engine-acceptance gate")
        for line in gate.table_lines():
            terminalreporter.write_line(line, red=line.startswith("GATE: FAIL"), green=line.startswith("GATE: PASS"))
        terminalreporter.write_line(f"verdict written to {config.option.gate_json}")
    if state is not None and state.reference:
        for line in reporting.reference_banner(state):
            terminalreporter.write_line(line, yellow=True, bold=True)
