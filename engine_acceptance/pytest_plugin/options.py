"""The plugin's command line: every option registered, parsed once into one frozen :class:`AcceptanceOptions`.

Each option is declared as plain data by the feature that reads it, and listed in order by
:mod:`engine_acceptance.pytest_plugin.option_catalog`; :func:`add_options` registers that list
with pytest's parser. Single values are checked by the ``type=`` functions as argparse reads
them, so a bad value stops pytest with the option named (exit 4) before anything starts.
Values that depend on each other or on data files (throughput cells, expectation records,
the tokenizer file) are checked in :meth:`AcceptanceOptions.from_config` and the features'
``from_options``, which raise :class:`~engine_acceptance.errors.UsageError`; the plugin maps
that to exit 4 in one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.errors import UsageError
from engine_acceptance.load.closed_loop import settings as throughput
from engine_acceptance.load.closed_loop.settings import ThroughputSettings
from engine_acceptance.load.media import cells as media_load
from engine_acceptance.load.media.cells import MediaSettings
from engine_acceptance.load.open_loop import settings as slo_settings
from engine_acceptance.load.open_loop.settings import OpenLoopSettings
from engine_acceptance.load.soak import traffic as soak
from engine_acceptance.load.soak.traffic import SoakSettings
from engine_acceptance.capabilities.plan import validate_capability_names
from engine_acceptance.pytest_plugin.option_catalog import OPTIONS, REFERENCE_LIMITS
from engine_acceptance.tool_accuracy import options as tool_accuracy
from engine_acceptance.wire.types import ClientTimeouts

__all__ = ["AcceptanceOptions", "ReferenceOptions", "add_options"]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("engine-acceptance", "Engine acceptance")
    for spec in OPTIONS:
        group.addoption(spec.name, **spec.addoption_kwargs())
    parser.addini("profiles_dirs", type="paths", default=[],
                  help="Folders of your own profiles and records, like --profiles-dir")


@dataclass(frozen=True)
class ReferenceOptions:
    """How to start the built-in reference engine when no --engine-url is given."""

    convention: str
    defects: tuple[str, ...]
    model: str | None
    serves_less: tuple[str, ...]
    # --reference-latency: (TTFT ms, per-token ms); None: the engine's own latency model.
    latency: tuple[float, float] | None = None

    def launcher_limits(self) -> dict[str, Any]:
        limits: dict[str, Any] = dict(REFERENCE_LIMITS[name] for name in self.serves_less)
        if self.model:
            limits["model"] = self.model
        if self.latency is not None:
            from engine_acceptance.reference_engine.config import LatencyModel

            limits["latency"] = LatencyModel(ttft_ms=self.latency[0], tpot_ms=self.latency[1])
        return limits


@dataclass(frozen=True)
class AcceptanceOptions:
    """The whole command line of an acceptance run, validated; frozen, and never rewritten once parsed."""

    engine_url: str | None
    # The key given (--api-key, ENGINE_API_KEY). The key the run uses is the session's: for the
    # built-in engine without a key given, a random one (pytest_plugin/engine_setup.py).
    api_key: str | None
    model: str | None
    engine_kind: str
    profile: str | None
    profiles_dirs: tuple[Path, ...]
    expected: frozenset[str]
    # --allow-untested: served or declared capabilities whose checks may all be skipped.
    allow_untested: frozenset[str]
    # --not-served: capabilities the user states are off on purpose.
    not_served: frozenset[str]
    timeouts: ClientTimeouts
    probe_timeout: float
    readiness_timeout: float
    startup_timeout: float
    expectation_files: tuple[Path, ...] | None
    stale_records_fail: bool
    gate_json: str
    # --run-bundle: the folder of this run's run.json (pytest_plugin/bundle_writer.py).
    run_bundle: str
    reference: ReferenceOptions
    recall_tokens: int | None
    # Field-extraction prompts in flight at once (--recall-concurrency); 1: one after another.
    recall_concurrency: int
    # The --tokenizer file, loaded (a LocalTokenCounter), or None: count with the engine's /tokenize.
    tokenizer: Any
    throughput: ThroughputSettings
    throughput_seed: int | None
    media: MediaSettings
    soak: SoakSettings | None
    tool_baseline: Path | None = None
    record_tool_baseline: Path | None = None
    # --tool-accuracy-cases: send this many cases of the set; None sends all of them.
    tool_accuracy_cases: int | None = None
    # --trials: K for every model-behaviour check; None: the model profile's trials, else the defaults.
    trials: int | None = None
    # The open-loop load and SLO options (pytest -m slo); merged with the model profile's slo.
    open_loop: OpenLoopSettings = OpenLoopSettings()
    # --load-processes: client processes per throughput or SLO cell; None is auto (load/process_plan.py).
    load_processes: int | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> AcceptanceOptions:
        """Validate what depends on more than one option or on data files; UsageError names the option."""
        opt = config.option
        given = [a for a in config.invocation_params.args if a == "--engine-url" or a.startswith("--engine-url=")]
        if len(given) > 1:
            raise UsageError(f"--engine-url: given {len(given)} times; a run tests one engine. To compare engines "
                             "side by side: python -m engine_acceptance.compare --engine NAME=URL --engine "
                             "NAME2=URL2 -- [pytest args] (docs/comparison.md)")
        reference = ReferenceOptions(opt.convention, tuple(opt.inject), opt.reference_model,
                                     tuple(opt.reference_serves), opt.reference_latency)
        if opt.engine_url is not None and (reference.defects or reference.convention != "vllm" or reference.model
                                           or reference.serves_less or reference.latency is not None):
            raise UsageError("--inject, --convention, --reference-model, --reference-serves and --reference-latency "
                             "apply to the built-in reference engine only; drop them or drop --engine-url")
        try:
            expected = validate_capability_names(",".join(opt.expect).split(","), source="--expect")
            allow_untested = validate_capability_names(",".join(opt.allow_untested).split(","),
                                                       source="--allow-untested")
            not_served = validate_capability_names(",".join(opt.not_served).split(","), source="--not-served")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if expected & allow_untested:
            raise UsageError(f"--allow-untested {','.join(sorted(expected & allow_untested))}: also required with "
                             "--expect; a required capability must be tested, so drop one of the two")
        if expected & not_served:
            raise UsageError(f"--not-served and --expect both name {', '.join(sorted(expected & not_served))}: a "
                             "capability is either required or off on purpose")
        profiles_dirs = tuple(Path(p) for p in config.getini("profiles_dirs")) + tuple(
            Path(config.invocation_params.dir, p) for p in opt.profiles_dir)
        # In this order, so that of two bad values the same one is named as before the features owned them.
        tokenizer = _load_tokenizer(opt.tokenizer)
        throughput_settings = throughput.from_options(opt)
        media = media_load.from_options(opt)
        soak_settings = soak.from_options(opt)
        tools = tool_accuracy.from_options(opt, config.invocation_params.dir)
        open_loop = slo_settings.from_options(opt)
        return cls(
            engine_url=opt.engine_url,
            api_key=opt.api_key or os.environ.get("ENGINE_API_KEY") or None,
            model=opt.model,
            engine_kind=opt.engine,
            profile=opt.profile,
            profiles_dirs=profiles_dirs,
            expected=frozenset(expected),
            allow_untested=allow_untested,
            not_served=frozenset(not_served),
            timeouts=ClientTimeouts(connect=opt.connect_timeout, idle=opt.idle_timeout, total=opt.request_timeout),
            probe_timeout=opt.probe_timeout,
            readiness_timeout=opt.readiness_timeout,
            startup_timeout=opt.startup_timeout,
            expectation_files=tuple(Path(p) for p in opt.expectations) if opt.expectations else None,
            stale_records_fail=opt.stale_records == "fail",
            gate_json=opt.gate_json,
            run_bundle=opt.run_bundle,
            reference=reference,
            recall_tokens=opt.recall_tokens,
            recall_concurrency=opt.recall_concurrency,
            tokenizer=tokenizer,
            throughput=throughput_settings,
            throughput_seed=opt.throughput_seed,
            media=media,
            soak=soak_settings,
            tool_baseline=tools.baseline,
            record_tool_baseline=tools.record_baseline,
            tool_accuracy_cases=tools.cases,
            trials=opt.trials,
            open_loop=open_loop,
            load_processes=opt.load_processes,
        )


def _load_tokenizer(path: str | None) -> Any:
    from engine_acceptance.wire.token_count import LocalTokenCounter, TokenCountError

    if path is None:
        return None
    try:
        return LocalTokenCounter.from_file(path)
    except TokenCountError as exc:
        raise UsageError(f"--tokenizer: {path!r}: {exc}") from None
