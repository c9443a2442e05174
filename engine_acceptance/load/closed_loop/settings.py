"""The throughput options, parsed once: which cells, how many rounds, the gate, the files.

The options are declared in :data:`OPTIONS` below; :func:`from_options` (through
:func:`settings_from_options`) is called once per run (``pytest_plugin/options.py``); a bad
value is a :class:`SettingsError` (a usage error, exit 4) naming the option and the value.

Shape selection (``--throughput-shapes``), comma-separated, any mix of:
``smoke`` (the default), ``full`` (the seeds' matrix), ``IN/OUT`` (every cell of
that workload in the matrix), ``IN/OUT@C`` (one cell; requests per round from the
matrix, else two waves) and ``IN/OUT@CxR`` (R requests per round).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence


from engine_acceptance.load.generator import Cell
from engine_acceptance.profiles.profile import DATA_ROOT
from engine_acceptance.errors import UsageError
from engine_acceptance.option_spec import OptionSpec
from engine_acceptance.resources import read_yaml
from engine_acceptance.load.closed_loop.gate import (
    DEFAULT_TOLERANCES,
    Baseline,
    GateError,
    Threshold,
    parse_threshold,
    parse_tolerance,
)

__all__ = [
    "DEFAULT_ROUNDS",
    "DEFAULT_SHAPES",
    "OPTIONS",
    "SHAPES_FILE",
    "SettingsError",
    "ThroughputSettings",
    "from_options",
    "full_matrix",
    "select_cells",
    "settings_from_options",
    ]

SHAPES_FILE = DATA_ROOT / "throughput_shapes.yaml"
# What a run measures unless told otherwise (--throughput-rounds, --throughput-shapes): fewer is a
# shortfall the verdict states (engine_acceptance/shortfalls.py).
DEFAULT_ROUNDS = 3
DEFAULT_SHAPES = "smoke"
_CELL = re.compile(r"^(?P<input>\d+)/(?P<output>\d+)(?:@(?P<concurrency>\d+)(?:x(?P<requests>\d+))?)?$")


class SettingsError(UsageError):
    """A throughput option value that cannot be used: (option, message)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class ThroughputSettings:
    cells: tuple[Cell, ...]
    rounds: int = DEFAULT_ROUNDS
    thresholds: tuple[Threshold, ...] = ()
    tolerances: dict[str, float] = field(default_factory=dict)
    baseline: Baseline | None = None
    save_path: Path | None = None
    out_path: Path | None = None
    shapes_spec: str = DEFAULT_SHAPES

    def tolerances_for_save(self) -> dict[str, float]:
        """What a saved baseline declares: the defaults, overridden on the command line."""
        return {**DEFAULT_TOLERANCES, **self.tolerances}




@lru_cache(maxsize=None)
def _shapes_data(path: Path = SHAPES_FILE) -> dict[str, Any]:
    return read_yaml(path)


def _cell(input_tokens: int, output_tokens: int, concurrency: int, requests: int) -> Cell:
    return Cell(input_tokens, output_tokens, concurrency, requests, warmup_requests=concurrency)


def full_matrix() -> list[Cell]:
    """Every cell of the seeds' matrix, in file order."""
    cells = []
    for entry in _shapes_data()["full"]:
        for concurrency, requests in entry["requests"].items():
            cells.append(_cell(entry["input"], entry["output"], int(concurrency), int(requests)))
    return cells


def select_cells(spec: str) -> list[Cell]:
    """The cells a ``--throughput-shapes`` value names, in order, without repeats."""
    matrix = full_matrix()
    by_key = {cell.key: cell for cell in matrix}
    chosen: dict[str, Cell] = {}

    def add(cell: Cell) -> None:
        previous = chosen.get(cell.key)
        if previous is not None and previous.requests != cell.requests:
            raise SettingsError("--throughput-shapes", f"{cell.key} is named twice with different requests per "
                                                       f"round ({previous.requests} and {cell.requests})")
        chosen.setdefault(cell.key, cell)

    tokens = [token.strip() for token in spec.split(",")]
    if not spec.strip() or not all(tokens):
        raise SettingsError("--throughput-shapes", f"{spec!r} has an empty entry")
    for token in tokens:
        if token == "full":
            for cell in matrix:
                add(cell)
            continue
        if token == "smoke":
            for item in _shapes_data()["smoke"]:
                for cell in _parse_token(item, by_key):
                    add(cell)
            continue
        for cell in _parse_token(token, by_key):
            add(cell)
    return list(chosen.values())


def _parse_token(token: str, by_key: dict[str, Cell]) -> list[Cell]:
    match = _CELL.match(token)
    if not match:
        raise SettingsError("--throughput-shapes", f"{token!r} is not smoke, full, IN/OUT, IN/OUT@C or IN/OUT@CxR "
                                                   f"(e.g. 128/128@4x16)")
    numbers = {name: int(value) for name, value in match.groupdict().items() if value is not None}
    if any(value < 1 for value in numbers.values()):
        raise SettingsError("--throughput-shapes", f"{token!r}: every number must be at least 1")
    workload = f"{numbers['input']}/{numbers['output']}"
    if "concurrency" not in numbers:
        cells = [cell for cell in by_key.values() if cell.workload == workload]
        if not cells:
            known = sorted({cell.workload for cell in by_key.values()})
            raise SettingsError("--throughput-shapes", f"{token!r} is not a workload of the full matrix "
                                                       f"({', '.join(known)}); name a cell as {token}@C")
        return cells
    key = f"{workload}@{numbers['concurrency']}"
    requests = numbers.get("requests")
    if requests is None:
        requests = by_key[key].requests if key in by_key else 2 * numbers["concurrency"]
    return [_cell(numbers["input"], numbers["output"], numbers["concurrency"], requests)]


def settings_from_options(*, shapes: str, rounds: int, thresholds: Sequence[str], tolerances: Sequence[str],
                          baseline: str | None, save: str | None, out: str | None) -> ThroughputSettings:
    """Validate every throughput option; SettingsError names the option and the value."""
    cells = select_cells(shapes)
    if rounds < 1:
        raise SettingsError("--throughput-rounds", f"{rounds!r} must be at least 1")
    try:
        parsed_thresholds = tuple(parse_threshold(text) for text in thresholds)
    except GateError as exc:
        raise SettingsError("--throughput-threshold", str(exc)) from None
    try:
        parsed_tolerances = dict(parse_tolerance(text) for text in tolerances)
    except GateError as exc:
        raise SettingsError("--throughput-tolerance", str(exc)) from None
    loaded = None
    if baseline is not None:
        try:
            loaded = Baseline.load(baseline)
        except GateError as exc:
            raise SettingsError("--throughput-baseline", str(exc)) from None
    return ThroughputSettings(
        cells=tuple(cells),
        rounds=rounds,
        thresholds=parsed_thresholds,
        tolerances=parsed_tolerances,
        baseline=loaded,
        save_path=_writable("--throughput-save", save),
        out_path=_writable("--throughput-out", out),
        shapes_spec=shapes,
    )


def _writable(option: str, value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise SettingsError(option, f"{value!r} is a directory; give a file path")
    if not path.parent.is_dir():
        raise SettingsError(option, f"{value!r}: directory {str(path.parent)!r} does not exist")
    return path


# The throughput options, in the order pytest --help shows them (docs/options.md).
OPTIONS = (
    OptionSpec("--throughput-shapes", default=DEFAULT_SHAPES, metavar="SPEC",
               help="Throughput cells: smoke, full (the seeds' matrix), or a comma list of IN/OUT, IN/OUT@C, "
                    f"IN/OUT@CxR (default: {DEFAULT_SHAPES})"),
    OptionSpec("--throughput-rounds", type=int, default=DEFAULT_ROUNDS, metavar="N",
               help=f"Measured rounds per throughput cell; tables show the median of rounds "
                    f"(default: {DEFAULT_ROUNDS})"),
    OptionSpec("--throughput-threshold", action="append", default=[], metavar="[CELL:]METRIC<=|>=VALUE",
               help="Throughput gate on a cell's median, e.g. p95_ttft_ms<=500 or 128/128@4:output_tok_s>=100 "
                    "(repeatable; adds to the model profile's)"),
    OptionSpec("--throughput-tolerance", action="append", default=[], metavar="METRIC=PCT",
               help="Allowed regression against the baseline, e.g. p95_ttft_ms=20%% (repeatable; overrides the "
                    "baseline file's)"),
    OptionSpec("--throughput-baseline", default=None, metavar="PATH",
               help="Compare throughput with this saved baseline"),
    OptionSpec("--throughput-save", default=None, metavar="PATH",
               help="Save this run's throughput medians as a baseline"),
    OptionSpec("--throughput-out", default=None, metavar="PATH", driver_sets=True,
               help="Write every throughput round's figures to this JSON file"),
    # The compare driver gives every engine the same seed, so each gets the same prompts.
    OptionSpec("--throughput-seed", type=int, default=None, metavar="N", driver_sets=True,
               help="Seed of the throughput prompts' text and offsets, so runs send the same prompts "
                    "(default: random)"),
)


def from_options(values: Any) -> ThroughputSettings:
    """The throughput settings from the parsed options (``config.option``)."""
    return settings_from_options(
        shapes=values.throughput_shapes, rounds=values.throughput_rounds, thresholds=values.throughput_threshold,
        tolerances=values.throughput_tolerance, baseline=values.throughput_baseline, save=values.throughput_save,
        out=values.throughput_out)
