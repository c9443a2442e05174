"""Before the first check: the engine under test, up, identified, and probed for what it serves.

Starts the built-in reference engine when no ``--engine-url`` is given, waits until the
engine is ready, detects its kind and model, chooses the profiles, and runs capability
discovery, once, in the controller; then works out which measurements the options make smaller
than declared (:func:`shortfalls_of`). Raises :class:`~engine_acceptance.errors.EngineUnavailable`
(exit 6) when the engine cannot be used, :class:`~engine_acceptance.errors.UsageError`
(exit 4) for what the user must fix.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from typing import Any, Callable

from engine_acceptance.errors import EngineUnavailable, UsageError
from engine_acceptance.load.closed_loop.gate import GateError, parse_threshold
from engine_acceptance.media.library import MEDIA_DIR
from engine_acceptance.profiles.profile import (
    EngineProfile,
    available_profiles,
    choose_model_profile,
    load_engine_profile,
    load_model_profile,
)
from engine_acceptance.capabilities.plan import stated_not_served
from engine_acceptance.pytest_plugin.options import AcceptanceOptions
from engine_acceptance.session import AcceptanceSession, ReferenceTarget
from engine_acceptance.shortfalls import (Shortfall, media_shortfalls, recall_shortfalls, throughput_shortfalls,
                                          tool_accuracy_shortfalls, trials_shortfalls)
from engine_acceptance.capabilities.discovery import Discovery, discover
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget
from engine_acceptance.wire.readiness import EngineInfo, detect_engine, wait_until_ready

__all__ = ["REFERENCE_MODEL_PROFILE", "check_profiles", "prepare_session", "progress", "shortfalls_of"]

# The built-in reference engine serves the model of this profile.
REFERENCE_MODEL_PROFILE = "reference"


def progress(message: str) -> None:
    """One line on stderr: the run is slow to start for a reason the user should see."""
    sys.stderr.write(f"engine-acceptance: {message}\n")
    sys.stderr.flush()


def check_profiles(options: AcceptanceOptions) -> list[EngineProfile]:
    """Load every engine profile and the requested model profile now, so a bad file stops the run at once."""
    engine_profiles = [load_engine_profile(name) for name in available_profiles("engines")]
    names = [profile.name for profile in engine_profiles]
    if options.engine_kind not in ("auto", *names):
        raise UsageError(f"--engine: {options.engine_kind!r} is not one of auto, {', '.join(names)} (the engine "
                         f"profiles, those of --profiles-dir included)")
    if options.profile:
        try:
            choose_model_profile("", options.profile)
        except UsageError as exc:
            raise UsageError(f"--profile: {exc}") from exc
    return engine_profiles


def prepare_session(options: AcceptanceOptions, engine_profiles: list[EngineProfile],
                    keep_reference: Callable[[Any], None]) -> AcceptanceSession:
    """Bring up (or reach) the engine and build the session every check reads: the run's engine handle.

    The options are only read. The key the run uses is the session's (``api_key``): the
    one given, or, for the built-in engine when none was given, a random one, since the
    built-in engine always requires a key. ``keep_reference`` receives the started
    built-in engine at once, so it is stopped at the end even when a later step fails.
    """
    reference: ReferenceTarget | None = None
    url, api_key = options.engine_url, options.api_key
    if url is None:
        api_key, url, reference = _start_reference_engine(options, keep_reference)
    # Before detection the kind is known only from --engine; its profile may name another readiness route.
    named = next((p for p in engine_profiles if p.name == options.engine_kind), None)
    ready_after = wait_until_ready(url, readiness_timeout=options.readiness_timeout,
                                   startup_timeout=options.startup_timeout,
                                   probe_timeout=options.timeouts.connect, progress=progress,
                                   path=named.readiness_path if named else "/health", api_key=api_key)
    engine = detect_engine(url, api_key=api_key, requested_kind=options.engine_kind,
                           requested_model=options.model, engine_profiles=engine_profiles,
                           probe_timeout=max(options.timeouts.connect, 10.0))
    engine.ready_after_s = ready_after
    engine_profile = next(p for p in engine_profiles if p.name == engine.kind)
    model_profile = choose_model_profile(engine.model, options.profile)
    required = set(options.expected) | model_profile.expect
    try:
        stated = stated_not_served(model_profile, options.not_served)
    except ValueError as exc:
        raise UsageError(f"--not-served: {exc}") from None
    if set(stated) & required:
        clash = sorted(set(stated) & required)
        raise UsageError(f"{', '.join(map(repr, clash))} stated not served ({stated[clash[0]]}) and required "
                         f"(--expect or model profile {model_profile.name!r} expect): drop one")
    if options.tokenizer is not None:
        # Counting locally is how a deployment without a working /tokenize is stated (registry.stated_intent).
        stated["tokenize"] = f"--tokenizer {options.tokenizer.source}"
    discovery = _discover_capabilities(engine, engine_profile, options, api_key)
    session = AcceptanceSession(
        engine=engine,
        engine_profile=engine_profile,
        declared_profile=model_profile,
        required=required,
        stated_not_served=stated,
        discovery=discovery,
        api_key=api_key,
        timeouts=options.timeouts,
        reference=reference,
    )
    _check_recall_tokens_fit(options, session)
    return session


def _start_reference_engine(options: AcceptanceOptions, keep: Callable[[Any], None]
                            ) -> tuple[str, str, ReferenceTarget]:
    """Start the built-in engine; returns the key it requires, its URL, and what the report says of it."""
    from engine_acceptance.reference_engine.launcher import start_reference_engine

    # The built-in engine always requires a key, so the authentication checks run on
    # it (and `--inject auth-ignored` fails the default command) instead of skipping
    # for want of a key. When none was given it is random, lives only as long as the
    # run, and is redacted from reports like any key.
    api_key = options.api_key if options.api_key is not None else secrets.token_urlsafe(24)
    try:
        running = start_reference_engine(
            convention=options.reference.convention, api_key=api_key, defects=options.reference.defects,
            **options.reference.launcher_limits(),
            # As long a context as its profile promises (1M: the recall_1m check runs on it).
            max_model_len=load_model_profile(REFERENCE_MODEL_PROFILE).context_length,
        )
    except RuntimeError as exc:
        raise EngineUnavailable(f"the built-in reference engine did not start: {exc}") from exc
    keep(running)
    target = ReferenceTarget(options.reference.convention, options.reference.defects,
                             str(getattr(running, "log_path", "")) or None)
    return api_key, running.url, target


def _discover_capabilities(engine: EngineInfo, engine_profile: EngineProfile, options: AcceptanceOptions,
                           api_key: str | None) -> Discovery:
    """Probe what the deployment serves, once, before any check (in the controller only)."""
    timeouts = options.timeouts
    # A probe asks for a few dozen tokens: a hang is a finding (broken), not a reason to
    # hold the run for the whole request timeout.
    probe_timeouts = ClientTimeouts(connect=timeouts.connect, idle=min(timeouts.idle, options.probe_timeout),
                                    total=min(timeouts.total, options.probe_timeout))
    target = EngineTarget(base_url=engine.url, model=engine.model, api_key=api_key, timeouts=probe_timeouts)
    progress("probing what the deployment serves (tools, image, video, reasoning and its switch, /tokenize, "
             "structured outputs, Responses, the prefix cache, a thinking budget)")
    found = asyncio.run(discover(target, engine_profile, advertised_context=engine.max_model_len,
                                 media_dir=MEDIA_DIR, timeouts=probe_timeouts))
    progress(f"probed in {found.elapsed_s:.1f} s: {found.summary()}")
    return found


def _check_recall_tokens_fit(options: AcceptanceOptions, session: AcceptanceSession) -> None:
    """An explicit --recall-tokens the engine cannot take is a usage error, not a failed check."""
    from engine_acceptance.recall.haystack import recall_budget

    if options.recall_tokens is None:
        return
    try:
        recall_budget(requested=options.recall_tokens, profile_context=session.model_profile.context_length,
                      max_model_len=session.engine.max_model_len)
    except ValueError as exc:
        raise UsageError(f"--recall-tokens: '{options.recall_tokens}': {exc}") from None


def shortfalls_of(options: AcceptanceOptions, session: AcceptanceSession) -> list[Shortfall]:
    """The measurements these options and this model profile make smaller than declared, known before any runs."""
    from engine_acceptance.recall.cases import RECALL_PROMPTS

    profile = session.model_profile
    found = recall_shortfalls(requested=options.recall_tokens, profile_context=profile.context_length,
                              max_model_len=session.engine.max_model_len, profile_name=profile.name,
                              field_tokens=RECALL_PROMPTS["field_extraction"]["target_tokens"])
    throughput = options.throughput
    threshold_cells = [t.cell for t in throughput.thresholds if t.cell]
    for text in profile.throughput_thresholds:
        try:
            threshold = parse_threshold(text, source=f"model profile {profile.source}")
        except GateError:
            continue  # the throughput check fails on this threshold itself, naming the file
        if threshold.cell:
            threshold_cells.append(threshold.cell)
    found += throughput_shortfalls(shapes=throughput.shapes_spec, rounds=throughput.rounds, cells=throughput.cells,
                                   threshold_cells=threshold_cells)
    found += media_shortfalls(shapes=options.media.spec, rounds=throughput.rounds, cells=options.media.cells)
    if options.tool_accuracy_cases is not None:
        from engine_acceptance.tool_accuracy.dataset import case_count

        found += tool_accuracy_shortfalls(requested=options.tool_accuracy_cases, set_size=case_count())
    found += trials_shortfalls(requested=options.trials, profile_trials=profile.trials, profile_name=profile.name)
    return found
