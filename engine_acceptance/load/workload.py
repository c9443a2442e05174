"""One interface every load workload implements: settings -> schedule -> run -> result.

As vLLM's ``benchmarks/datasets`` puts every dataset behind one ``sample()``, each workload
here (closed_loop/, open_loop/, media/, soak/) is reached through the same four steps,
whatever it measures and however differently its cells are paced:

- ``settings(options)``: its settings out of the suite's options (parsed once, by
  ``pytest_plugin/options.py``), or None when the run leaves the workload off;
- ``schedule(settings)``: the cells it measures, in order;
- ``run(settings, cells)``: measure them against the engine, one result per cell;
- ``result(settings, runs)``: a :class:`WorkloadResult`, the figures and the table of
  the cells measured, the same shape for every workload.

A workload is built on a :class:`LoadContext` (the engine and how to reach it), so the
steps take only what differs between workloads. The adapters (each subpackage's
``workload.py``) are thin on purpose: they call the workload's own functions, and every
check runs its workload through the four steps. What a check does around them goes
through the context: ``after_cell`` is awaited with each cell's result as soon as it is
measured, before the next cell starts (the throughput smoke sends a prompt again there
to see the engine count it the same), and ``stop`` ends a run early (the soak, on a
signal). A workload's ``result`` may take keyword arguments for what only its check
observes around the run (the soak: the engine's metrics before and after it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from engine_acceptance.load.generator import PromptSource
from engine_acceptance.load.spec_decode import SpecDecodeCounters
from engine_acceptance.reporting.table import Table
from engine_acceptance.wire.types import EngineTarget

SettingsT = TypeVar("SettingsT")
CellT = TypeVar("CellT")
RunT = TypeVar("RunT")

# One request of the soak: (index, "text" or "image") -> (E2E seconds or None, error or None).
SoakSend = Callable[[int, str], Any]
# Awaited with one cell's result (the workload's run type) as soon as the cell is measured.
AfterCell = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class LoadContext:
    """What running a workload needs besides its settings: the engine, and how to talk to it.

    Each workload reads the fields it uses: the token workloads (closed and open loop) the
    prompts, ``ignore_eos`` and the client processes; the media load how video is sent;
    the soak the function that sends one of its requests, and what ends it early; the cells
    (closed, open loop, media) the speculative-decoding counters. Every workload awaits
    ``after_cell`` (when given) with each cell's result, in order.
    """

    target: EngineTarget
    progress: Callable[[str], None] | None = None
    prompts: PromptSource | None = None
    ignore_eos: bool = False
    processes: int | None = None
    # The model profile's ``slo`` section: the open loop's objective and cell when no option gives them.
    model_slo: Mapping[str, Any] = field(default_factory=dict)
    model_slo_source: str = "model profile"
    content_type: str = "image_url"
    send: SoakSend | None = None
    stop: asyncio.Event | None = None
    after_cell: AfterCell | None = None
    # The engine's speculative-decoding counters, read around each measured round (spec_decode.py).
    counters: SpecDecodeCounters | None = None


@runtime_checkable
class WorkloadResult(Protocol):
    """What a workload measured, in one shape: figures for JSON and comparisons, rows for a table."""

    def figures(self) -> dict[str, Any]:
        """JSON-ready figures keyed by cell (the soak: its totals)."""
        ...

    def table(self) -> Table:
        """A row of text per cell (or per window, for the soak); any format module renders it."""
        ...


@runtime_checkable
class Workload(Protocol[SettingsT, CellT, RunT]):
    """A load workload: its settings, its cells, measuring them, and the result."""

    name: str

    def settings(self, options: Any) -> SettingsT | None:
        """This workload's settings from the suite's parsed options; None: off for this run."""
        ...

    def schedule(self, settings: SettingsT) -> Sequence[CellT]:
        ...

    async def run(self, settings: SettingsT, cells: Sequence[CellT]) -> list[RunT]:
        ...

    def result(self, settings: SettingsT, runs: Sequence[RunT]) -> WorkloadResult:
        ...
