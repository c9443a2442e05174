"""Every option of the plugin, in the order ``pytest --help`` and docs/options.md show them.

The features declare their own options (:mod:`engine_acceptance.option_spec`): throughput in
``load/closed_loop/settings.py``, media load in ``load/media/cells.py``, the soak in
``load/soak/traffic.py``, the SLO check in ``load/open_loop/settings.py``, client processes in
``load/process_plan.py``, recall in ``recall/options.py``, tool accuracy in
``tool_accuracy/options.py``, trials in ``trials.py``.
The run's own options are declared here: which engine and model, the capabilities asked
for, the timeouts, the records and the verdict file, and the built-in reference engine (whose
package imports nothing of the suite, so its options cannot live there).

This module does not import pytest, so the compare driver reads it too: the options it sets
for each engine's run are the declarations marked ``driver_sets``.
"""

from __future__ import annotations

import argparse
import urllib.parse

from engine_acceptance.load import process_plan
from engine_acceptance.load.closed_loop import settings as throughput
from engine_acceptance.load.media import cells as media_load
from engine_acceptance.load.open_loop import settings as slo_settings
from engine_acceptance.load.soak import traffic as soak
from engine_acceptance.option_spec import OptionSpec, positive_seconds, seconds_or_zero
from engine_acceptance.recall import options as recall
from engine_acceptance.tool_accuracy import options as tool_accuracy
from engine_acceptance import trials

__all__ = ["CONVENTIONS", "OPTIONS", "REFERENCE_LIMITS", "REFERENCE_OPTIONS", "driver_set_options"]

CONVENTIONS = ("vllm", "sglang")
# --reference-serves values: what the built-in engine then does not serve (launcher keyword).
REFERENCE_LIMITS = {"text-only": ("text_only", True), "no-tool-parser": ("tool_parser", False),
                    "no-tokenize": ("tokenize", False), "no-reasoning": ("reasoning", False),
                    "no-structured-outputs": ("structured_outputs", False),
                    "no-responses": ("responses", False), "no-prefix-cache": ("prefix_cache", False),
                    "reasoning-on-request": ("reasoning_by_default", False)}


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


def known_defect(raw: str) -> str:
    # The defect registry names what the built-in engine can inject; reading it does not start the engine.
    from engine_acceptance.reference_engine.defect_names import DEFECTS

    if raw not in DEFECTS:
        raise argparse.ArgumentTypeError(f"unknown defect {raw!r}; known: {', '.join(sorted(DEFECTS))}")
    return raw


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


# The engine under test, the capabilities asked of it, and how long to wait for it.
ENGINE_OPTIONS = (
    OptionSpec("--engine-url", type=engine_url, default=None, driver_sets=True,
               help="Base URL of the engine under test, e.g. http://host:30000 (default: start the built-in "
                    "reference engine)"),
    # The driver hands each engine's key through the environment, never on a command line.
    OptionSpec("--api-key", default=None, driver_sets=True,
               help="API key sent as a Bearer token (default: the ENGINE_API_KEY environment variable)"),
    OptionSpec("--model", default=None, driver_sets=True,
               help="Served model name to test (default: the only listed model)"),
    OptionSpec("--engine", default="auto", metavar="KIND",
               help="Engine kind: auto, or an engine profile's name (vllm, sglang, generic, or one of "
                    "--profiles-dir) (default: auto)"),
    OptionSpec("--profile", default=None, driver_sets=True,
               help="Model profile name or YAML path (default: the profile whose match fits the model, else "
                    "generic)"),
    OptionSpec("--profiles-dir", action="append", default=[], metavar="DIR",
               help="A folder of your own profiles and records: models/, engines/, expectations/ (repeatable; adds "
                    "to the ini key profiles_dirs; a file named like a shipped one replaces it)"),
    OptionSpec("--expect", action="append", default=[], metavar="CAP[,CAP...]",
               help="Capabilities the deployment must serve, e.g. tools,image (repeatable; adds to the model "
                    "profile's expect). One that is not served, or whose checks all skip, fails the gate"),
    OptionSpec("--allow-untested", action="append", default=[], metavar="CAP[,CAP...]",
               help="Capabilities the deployment serves (or the profile declares) that may end the run with every "
                    "selected check skipped (repeatable); without it such a capability fails the gate, since a "
                    "pass must mean it was tested"),
    OptionSpec("--not-served", action="append", default=[], metavar="CAP[,CAP...]", driver_sets=True,
               help="Capabilities this deployment leaves off on purpose, e.g. tools,image (repeatable; adds to the "
                    "model profile's not_served): skipped as 'not served (stated)'. Without it, a 4xx the engine "
                    "profile does not list as a refusal is broken and fails the capability's checks"),
    OptionSpec("--probe-timeout", type=positive_seconds, default=60.0,
               help="Seconds one capability probe (a few dozen output tokens) may take before the capability "
                    "counts as broken (default: 60, at most --request-timeout)"),
    OptionSpec("--connect-timeout", type=positive_seconds, default=10.0,
               help="Seconds to open a connection (default: 10)"),
    OptionSpec("--idle-timeout", type=positive_seconds, default=60.0,
               help="Seconds of silence allowed between two chunks of a streamed reply (default: 60)"),
    OptionSpec("--request-timeout", type=positive_seconds, default=300.0,
               help="Seconds for one whole request (default: 300)"),
    OptionSpec("--readiness-timeout", type=positive_seconds, default=60.0,
               help="Seconds to wait for the engine to be ready before the run (default: 60)"),
    OptionSpec("--startup-timeout", type=seconds_or_zero, default=0.0,
               help="Seconds to keep retrying while nothing listens at the URL, for engines still starting "
                    "(default: 0, fail at once)"),
)

# The records the run is judged against, and where its verdict goes.
VERDICT_OPTIONS = (
    OptionSpec("--expectations", action="append", default=None, metavar="FILE",
               help="Expected-failure record file (repeatable; default: every shipped record file and those of "
                    "--profiles-dir)"),
    OptionSpec("--stale-records", default="fail", choices=("fail", "warn"),
               help="A known-defect record whose check now passes: fail the gate (default) or warn"),
    OptionSpec("--gate-json", default="gate.json", metavar="PATH", driver_sets=True,
               help="Where to write the machine-readable gate verdict (default: gate.json)"),
    OptionSpec("--run-bundle", default="run-bundle", metavar="DIR", driver_sets=True,
               help="Where to write this run's bundle, DIR/run.json: the verdict, every check and figure, every "
                    "load cell's per-request samples, for engine-acceptance diff BASE NEW (default: run-bundle)"),
)

# The built-in reference engine, started when no --engine-url is given.
REFERENCE_OPTIONS = (
    OptionSpec("--convention", default="vllm", choices=CONVENTIONS, driver_sets=True,
               help="Built-in reference engine only: imitate vllm or sglang (default: vllm)"),
    OptionSpec("--inject", type=known_defect, action="append", default=[], metavar="DEFECT", driver_sets=True,
               help="Built-in reference engine only: inject a defect (repeatable)"),
    OptionSpec("--reference-model", default=None, metavar="NAME",
               help="Built-in reference engine only: serve the model under this name (default: reference-model)"),
    OptionSpec("--reference-serves", action="append", default=[], choices=tuple(REFERENCE_LIMITS), metavar="LIMIT",
               help=f"Built-in reference engine only: serve less, like a deployment configured so: "
                    f"{', '.join(REFERENCE_LIMITS)} (repeatable)"),
    OptionSpec("--reference-latency", type=reference_latency, default=None, metavar="TTFT_MS,TPOT_MS",
               help="Built-in reference engine only: its time to a first token and per token in ms (default: 2,1); "
                    "0,0 answers as fast as it can, for runs whose point is not a timing"),
)

# Read by recall and the throughput prompts alike, so it belongs to the run.
TOKENIZER_OPTIONS = (
    OptionSpec("--tokenizer", default=None, metavar="PATH",
               help="The served model's tokenizer.json, to count prompt tokens locally (default: the engine's "
                    "/tokenize)"),
)

# Read by tests/test_cancellation.py alone (pytestconfig.getoption), which has no library below it.
CANCELLATION_OPTIONS = (
    OptionSpec("--cancellation-timeout", type=positive_seconds, default=60.0, metavar="S",
               help="Seconds the engine may take, after clients disconnect, to count no request running or waiting "
                    "and to free their KV cache (pytest -m cancellation; default: 60)"),
)

OPTIONS: tuple[OptionSpec, ...] = (
    *ENGINE_OPTIONS, *VERDICT_OPTIONS, *REFERENCE_OPTIONS, *recall.OPTIONS, *TOKENIZER_OPTIONS,
    *throughput.OPTIONS, *media_load.OPTIONS, *soak.OPTIONS, *CANCELLATION_OPTIONS, *tool_accuracy.OPTIONS,
    *trials.OPTIONS, *slo_settings.OPTIONS, *process_plan.OPTIONS,
)


def driver_set_options() -> tuple[str, ...]:
    """The plugin's options the compare driver gives each run itself, so a user may not give them after its --."""
    return tuple(spec.name for spec in OPTIONS if spec.driver_sets)
