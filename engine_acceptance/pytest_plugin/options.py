"""The plugin's command line: every option, parsed once into one frozen :class:`AcceptanceOptions`.

Single values are checked by the ``type=`` functions as argparse reads them, so a bad
value stops pytest with the option named (exit 4) before anything starts. Values that
depend on each other or on data files (throughput cells, expectation records, the
tokenizer file) are checked in :meth:`AcceptanceOptions.from_config`, which raises
:class:`~engine_acceptance.errors.UsageError`; the plugin maps that to exit 4 in one place.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.errors import UsageError
from engine_acceptance.load.media.cells import MediaSettings, select_media_cells
from engine_acceptance.load.process_plan import parse_load_processes
from engine_acceptance.load.closed_loop.settings import DEFAULT_ROUNDS, DEFAULT_SHAPES, ThroughputSettings, settings_from_options
from engine_acceptance.load.soak.traffic import SoakSettings, soak_settings_from_options
from engine_acceptance.load.open_loop.settings import OpenLoopSettings, open_loop_settings_from_options
from engine_acceptance.capabilities.plan import validate_capability_names
from engine_acceptance.trials import DEFAULT_SAMPLES
from engine_acceptance.wire.types import ClientTimeouts

__all__ = ["AcceptanceOptions", "ReferenceOptions", "add_options", "CONVENTIONS",
           "REFERENCE_LIMITS"]

CONVENTIONS = ("vllm", "sglang")
# --reference-serves values: what the built-in engine then does not serve (launcher keyword).
REFERENCE_LIMITS = {"text-only": ("text_only", True), "no-tool-parser": ("tool_parser", False),
                    "no-tokenize": ("tokenize", False), "no-reasoning": ("reasoning", False),
                    "no-structured-outputs": ("structured_outputs", False),
                    "no-responses": ("responses", False)}


def engine_url(raw: str) -> str:
    """An http(s) base URL, without a trailing slash or ``/v1``."""
    parsed = urllib.parse.urlsplit(raw)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an http(s) URL like http://host:30000")
    try:
        parsed.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} has an invalid port") from None
    if parsed.username or parsed.password:
        raise argparse.ArgumentTypeError("put credentials in --api-key, not in the URL")
    url = raw.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def positive_seconds(raw: str) -> float:
    value = _number(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be a positive number of seconds")
    return value


def seconds_or_zero(raw: str) -> float:
    value = _number(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be zero or a positive number of seconds")
    return value


def whole_tokens(raw: str) -> int:
    """A token count; ``1_000_000`` is accepted as written."""
    from engine_acceptance.recall.haystack import MIN_RECALL_TOKENS

    try:
        tokens = int(raw.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of tokens") from None
    if tokens < MIN_RECALL_TOKENS:
        raise argparse.ArgumentTypeError(f"{raw!r} is below the minimum of {MIN_RECALL_TOKENS} tokens")
    return tokens


def known_defect(raw: str) -> str:
    # The defect registry names what the built-in engine can inject; reading it does not start the engine.
    from engine_acceptance.reference_engine.defect_names import DEFECTS

    if raw not in DEFECTS:
        raise argparse.ArgumentTypeError(f"unknown defect {raw!r}; known: {', '.join(sorted(DEFECTS))}")
    return raw


def _whole_number_at_least_one(raw: str, unit: str, what: str) -> int:
    try:
        count = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of {unit}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{raw!r}: {what} needs at least 1 {unit[:-1]}")
    return count


def prompts_at_once(raw: str) -> int:
    """N, the recall prompts in flight at once: a whole number, at least 1."""
    return _whole_number_at_least_one(raw, "prompts", "sending")


def case_count(raw: str) -> int:
    """N, the tool-accuracy cases to send: a whole number, at least 1."""
    return _whole_number_at_least_one(raw, "cases", "a sample")


def reference_latency(raw: str) -> tuple[float, float]:
    """``TTFT_MS,TPOT_MS``: the built-in engine's time to a first token and per token, in ms (0 or more)."""
    parts = raw.split(",")
    try:
        ttft_ms, tpot_ms = (float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not TTFT_MS,TPOT_MS (two numbers of milliseconds)") from None
    if not (0 <= ttft_ms < float("inf") and 0 <= tpot_ms < float("inf")):
        raise argparse.ArgumentTypeError(f"{raw!r}: each time must be 0 ms or more")
    return ttft_ms, tpot_ms


def trial_count(raw: str) -> int:
    """K, the samples of each model-behaviour check: a whole number, at least 1."""
    return _whole_number_at_least_one(raw, "samples", "a check")


def load_processes(raw: str) -> int | None:
    """``auto`` (None) or a whole number of client processes, at least 1."""
    try:
        return parse_load_processes(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("engine-acceptance", "Engine acceptance")
    add = group.addoption
    add("--engine-url", type=engine_url, default=None,
        help="Base URL of the engine under test, e.g. http://host:30000 (default: start the built-in "
             "reference engine)")
    add("--api-key", default=None, help="API key sent as a Bearer token (default: the ENGINE_API_KEY environment "
                                        "variable)")
    add("--model", default=None, help="Served model name to test (default: the only listed model)")
    add("--engine", default="auto", metavar="KIND",
        help="Engine kind: auto, or an engine profile's name (vllm, sglang, generic, or one of --profiles-dir) "
             "(default: auto)")
    add("--profile", default=None,
        help="Model profile name or YAML path (default: the profile whose match fits the model, else generic)")
    add("--profiles-dir", action="append", default=[], metavar="DIR",
        help="A folder of your own profiles and records: models/, engines/, expectations/ (repeatable; adds to "
             "the ini key profiles_dirs; a file named like a shipped one replaces it)")
    parser.addini("profiles_dirs", type="paths", default=[],
                  help="Folders of your own profiles and records, like --profiles-dir")
    add("--expect", action="append", default=[], metavar="CAP[,CAP...]",
        help="Capabilities the deployment must serve, e.g. tools,image (repeatable; adds to the model "
             "profile's expect). One that is not served, or whose checks all skip, fails the gate")
    add("--allow-untested", action="append", default=[], metavar="CAP[,CAP...]",
        help="Capabilities the deployment serves (or the profile declares) that may end the run with every "
             "selected check skipped (repeatable); without it such a capability fails the gate, since a pass "
             "must mean it was tested")
    add("--not-served", action="append", default=[], metavar="CAP[,CAP...]",
        help="Capabilities this deployment leaves off on purpose, e.g. tools,image (repeatable; adds to the model "
             "profile's not_served): skipped as 'not served (stated)'. Without it, a 4xx the engine profile does "
             "not list as a refusal is broken and fails the capability's checks")
    add("--probe-timeout", type=positive_seconds, default=60.0,
        help="Seconds one capability probe (a few dozen output tokens) may take before the capability "
             "counts as broken (default: 60, at most --request-timeout)")
    add("--connect-timeout", type=positive_seconds, default=10.0, help="Seconds to open a connection (default: 10)")
    add("--idle-timeout", type=positive_seconds, default=60.0,
        help="Seconds of silence allowed between two chunks of a streamed reply (default: 60)")
    add("--request-timeout", type=positive_seconds, default=300.0,
        help="Seconds for one whole request (default: 300)")
    add("--readiness-timeout", type=positive_seconds, default=60.0,
        help="Seconds to wait for the engine to be ready before the run (default: 60)")
    add("--startup-timeout", type=seconds_or_zero, default=0.0,
        help="Seconds to keep retrying while nothing listens at the URL, for engines still starting "
             "(default: 0, fail at once)")
    add("--expectations", action="append", default=None, metavar="FILE",
        help="Expected-failure record file (repeatable; default: every shipped record file and those of "
             "--profiles-dir)")
    add("--stale-records", default="fail", choices=("fail", "warn"),
        help="A known-defect record whose check now passes: fail the gate (default) or warn")
    add("--gate-json", default="gate.json", metavar="PATH",
        help="Where to write the machine-readable gate verdict (default: gate.json)")
    add("--convention", default="vllm", choices=CONVENTIONS,
        help="Built-in reference engine only: imitate vllm or sglang (default: vllm)")
    add("--inject", type=known_defect, action="append", default=[], metavar="DEFECT",
        help="Built-in reference engine only: inject a defect (repeatable)")
    add("--reference-model", default=None, metavar="NAME",
        help="Built-in reference engine only: serve the model under this name (default: reference-model)")
    add("--reference-serves", action="append", default=[], choices=tuple(REFERENCE_LIMITS), metavar="LIMIT",
        help=f"Built-in reference engine only: serve less, like a deployment configured so: "
             f"{', '.join(REFERENCE_LIMITS)} (repeatable)")
    add("--reference-latency", type=reference_latency, default=None, metavar="TTFT_MS,TPOT_MS",
        help="Built-in reference engine only: its time to a first token and per token in ms (default: 2,1); "
             "0,0 answers as fast as it can, for runs whose point is not a timing")
    add("--recall-tokens", type=whole_tokens, default=None, metavar="N",
        help="Recall prompt length in tokens (default: the model profile's context length, else the engine's "
             "max_model_len, minus room for the answer; an engine advertising less than the profile declares "
             "fails the long-context checks unless this asks for less)")
    add("--recall-concurrency", type=prompts_at_once, default=1, metavar="N",
        help="The field-extraction prompts (one document, ten questions) sent N at a time instead of one after "
             "another, for an engine that batches its decoding; their TTFT and E2E are then not alone (default: 1)")
    add("--tokenizer", default=None, metavar="PATH",
        help="The served model's tokenizer.json, to count prompt tokens locally (default: the engine's /tokenize)")
    add("--throughput-shapes", default=DEFAULT_SHAPES, metavar="SPEC",
        help="Throughput cells: smoke, full (the seeds' matrix), or a comma list of IN/OUT, IN/OUT@C, IN/OUT@CxR "
             f"(default: {DEFAULT_SHAPES})")
    add("--throughput-rounds", type=int, default=DEFAULT_ROUNDS, metavar="N",
        help=f"Measured rounds per throughput cell; tables show the median of rounds (default: {DEFAULT_ROUNDS})")
    add("--throughput-threshold", action="append", default=[], metavar="[CELL:]METRIC<=|>=VALUE",
        help="Throughput gate on a cell's median, e.g. p95_ttft_ms<=500 or 128/128@4:output_tok_s>=100 "
             "(repeatable; adds to the model profile's)")
    add("--throughput-tolerance", action="append", default=[], metavar="METRIC=PCT",
        help="Allowed regression against the baseline, e.g. p95_ttft_ms=20%% (repeatable; overrides the "
             "baseline file's)")
    add("--throughput-baseline", default=None, metavar="PATH", help="Compare throughput with this saved baseline")
    add("--throughput-save", default=None, metavar="PATH", help="Save this run's throughput medians as a baseline")
    add("--throughput-out", default=None, metavar="PATH",
        help="Write every throughput round's figures to this JSON file")
    add("--throughput-seed", type=int, default=None, metavar="N",
        help="Seed of the throughput prompts' text and offsets, so runs send the same prompts (default: random)")
    add("--media-shapes", default="full", metavar="SPEC",
        help="Media throughput cells: full (seed 001's), or a comma list of NAME, NAME@C, NAME@CxR "
             "(fixtures/media_throughput.yaml; default: full)")
    add("--soak-minutes", default=None, metavar="N",
        help="Run the mixed-traffic soak (pytest -m soak) for N minutes (default: the soak is off)")
    add("--soak-rate", default="0.5", metavar="R", help="Soak requests per second (default: 0.5)")
    add("--soak-image-share", default="0.2", metavar="F",
        help="Share of soak requests carrying an image (default: 0.2)")
    add("--soak-workers", default="4", metavar="N", help="Soak requests in flight at most (default: 4)")
    add("--cancellation-timeout", type=positive_seconds, default=60.0, metavar="S",
        help="Seconds the engine may take, after clients disconnect, to count no request running or waiting "
             "and to free their KV cache (pytest -m cancellation; default: 60)")
    add("--tool-baseline", default=None, metavar="FILE",
        help="Gate tool-call triggers on this baseline, recorded from a trusted deployment with "
             "--record-tool-baseline (default: the trigger check skips, saying so)")
    add("--record-tool-baseline", default=None, metavar="FILE",
        help="Record this deployment's tool-accuracy run as a baseline for others (run it on the trusted one)")
    add("--tool-accuracy-cases", type=case_count, default=None, metavar="N",
        help="Send N cases of the tool-accuracy set, picked evenly from each of its shapes, instead of all of "
             "them; said in the verdict as a shortfall (default: the whole set)")
    add("--trials", type=trial_count, default=None, metavar="K",
        help="Samples of every model-behaviour check, sent together and judged by the check's rule; overrides "
             "the model profile's trials (default: the profile's, else "
             + ", ".join(f"{kind} {count}" for kind, count in DEFAULT_SAMPLES.items()) + ")")
    add("--request-rate", default=None, metavar="R[,R...]",
        help="Open-loop arrivals for the SLO check (pytest -m slo): requests per second, one cell per rate, inf "
             "sends all at once (default: the model profile's slo.request_rate, else 1)")
    add("--burstiness", default="1", metavar="B",
        help="Gamma shape of the open-loop gaps as vllm bench serve's: 1 Poisson, below 1 burstier, inf a "
             "constant gap (default: 1)")
    add("--load-seed", type=int, default=0, metavar="N",
        help="Seed of the open-loop arrival schedule, so runs send at the same times (default: 0)")
    add("--slo", default=None, metavar="ttft=MS,tpot=MS,e2e=MS",
        help="Service-level objective, any subset of the three limits in milliseconds; with it the SLO check runs "
             "(default: the model profile's slo, else the check skips)")
    add("--slo-target", default=None, metavar="F",
        help="Share of requests that must meet the SLO, e.g. 0.99 (default: the model profile's, else 0.99)")
    add("--slo-min-goodput", default=None, metavar="RPS",
        help="Lowest goodput, requests per second meeting the SLO (default: the model profile's, else none)")
    add("--slo-requests", type=int, default=None, metavar="N",
        help="Requests per open-loop cell (default: the model profile's slo.requests, else 32)")
    add("--slo-shape", default="128/32", metavar="IN/OUT",
        help="Input and output tokens of the open-loop requests (default: 128/32)")
    add("--slo-search", action="store_true",
        help="Also search the highest rate whose attainment stays at the target (doubling, then bisecting)")
    add("--load-processes", type=load_processes, default=None, metavar="N|auto",
        help="Client processes that send each throughput and SLO cell, sharing one schedule and one clock; auto "
             "spreads a cell only when its expected SSE events per second pass what one process times accurately "
             "(benchmarks/README.md), at most one per CPU (default: auto)")


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
            reference=reference,
            recall_tokens=opt.recall_tokens,
            recall_concurrency=opt.recall_concurrency,
            tokenizer=_load_tokenizer(opt.tokenizer),
            throughput=settings_from_options(
                shapes=opt.throughput_shapes, rounds=opt.throughput_rounds, thresholds=opt.throughput_threshold,
                tolerances=opt.throughput_tolerance, baseline=opt.throughput_baseline, save=opt.throughput_save,
                out=opt.throughput_out),
            throughput_seed=opt.throughput_seed,
            media=MediaSettings(tuple(select_media_cells(opt.media_shapes)), opt.media_shapes),
            soak=soak_settings_from_options(minutes=opt.soak_minutes, rate=opt.soak_rate, workers=opt.soak_workers,
                                            image_share=opt.soak_image_share),
            **_tool_baseline_paths(config),
            tool_accuracy_cases=opt.tool_accuracy_cases,
            trials=opt.trials,
            open_loop=open_loop_settings_from_options(
                request_rate=opt.request_rate, burstiness=opt.burstiness, load_seed=opt.load_seed, slo=opt.slo,
                slo_target=opt.slo_target, slo_min_goodput=opt.slo_min_goodput, slo_requests=opt.slo_requests,
                slo_shape=opt.slo_shape, slo_search=opt.slo_search),
            load_processes=opt.load_processes,
        )


def _tool_baseline_paths(config: pytest.Config) -> dict[str, Path | None]:
    """--tool-baseline must exist and differ from --record-tool-baseline; both relative to the invocation dir."""
    here = config.invocation_params.dir
    use, record = (Path(here, value) if value else None
                   for value in (config.option.tool_baseline, config.option.record_tool_baseline))
    if use is not None and not use.is_file():
        raise UsageError(f"--tool-baseline: {use} is not a file (record one with --record-tool-baseline on the "
                         "trusted deployment)")
    if use is not None and record is not None and use.resolve() == record.resolve():
        raise UsageError("--tool-baseline and --record-tool-baseline name the same file: a run cannot gate on the "
                         "baseline it overwrites")
    if record is not None and record.is_dir():
        raise UsageError(f"--record-tool-baseline: {record} is a folder; name the baseline file")
    if record is not None and config.option.tool_accuracy_cases is not None:
        raise UsageError(f"--record-tool-baseline with --tool-accuracy-cases={config.option.tool_accuracy_cases}: a "
                         "baseline is recorded from the whole set, so that any sample compares with it case by case")
    return {"tool_baseline": use, "record_tool_baseline": record}


def _load_tokenizer(path: str | None) -> Any:
    from engine_acceptance.wire.token_count import LocalTokenCounter, TokenCountError

    if path is None:
        return None
    try:
        return LocalTokenCounter.from_file(path)
    except TokenCountError as exc:
        raise UsageError(f"--tokenizer: {path!r}: {exc}") from None
