"""The closed-loop workload (the throughput smoke) behind the load interface.

Settings are ``--throughput-*`` (:class:`ThroughputSettings`); the schedule its selected
cells; a run measures them one after another, saying each as it starts (and, for text
prompts, how long they are estimated to be), with prompt indices that never repeat
between cells; the result is the cells' medians of rounds and the throughput table.
``tests/test_throughput.py`` runs one workload's cells (input/output tokens) at a time,
and between two cells sends a text prompt again (the context's ``after_cell``) to see
that the engine counts it the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.closed_loop.settings import ThroughputSettings
from engine_acceptance.load.generator import Cell, CellResult, measure_cell
from engine_acceptance.load.prompts import TextPrompts
from engine_acceptance.load.report import throughput_table
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.reporting.table import Table


@dataclass(frozen=True)
class ClosedLoopResult:
    cells: tuple[CellResult, ...]

    def figures(self) -> dict[str, Any]:
        """Per cell, each metric's median of rounds with min-max (the junit ``throughput`` property)."""
        return {r.cell.key: {name: spread.as_dict() for name, spread in r.summary.metrics.items()}
                for r in self.cells}

    def table(self) -> Table:
        return throughput_table("Throughput, fixed length", self.cells)


class ClosedLoopWorkload:
    """Fixed concurrency, fixed-length requests: the throughput smoke's cells."""

    name = "closed loop"

    def __init__(self, context: LoadContext) -> None:
        self.context = context
        # Prompt indices go on from run to run: no prompt repeats within this workload's cells.
        self.next_index = 0

    def settings(self, options: Any) -> ThroughputSettings | None:
        return options.throughput

    def schedule(self, settings: ThroughputSettings) -> Sequence[Cell]:
        return settings.cells

    async def run(self, settings: ThroughputSettings, cells: Sequence[Cell]) -> list[CellResult]:
        if self.context.prompts is None:
            raise ValueError("the closed loop needs prompts in its LoadContext")
        prompts, say = self.context.prompts, self.context.progress or (lambda _line: None)
        results = []
        for cell in cells:
            say(f"{cell.key}: {settings.rounds} round(s) of {cell.requests} requests, {cell.warmup_requests} "
                f"warm-up; prompts from {prompts.source}")
            if isinstance(prompts, TextPrompts):
                say(f"{cell.key}: input tokens approximate: {prompts.describe(cell.input_tokens)}")
            result = await measure_cell(
                self.context.target, cell, prompts, rounds=settings.rounds, ignore_eos=self.context.ignore_eos,
                first_index=self.next_index, progress=self.context.progress, processes=self.context.processes,
                counters=self.context.counters)
            results.append(result)
            if self.context.after_cell is not None:
                await self.context.after_cell(result)
            self.next_index += cell.warmup_requests + cell.requests * settings.rounds
        return results

    def result(self, settings: ThroughputSettings, runs: Sequence[CellResult]) -> ClosedLoopResult:
        return ClosedLoopResult(tuple(runs))
