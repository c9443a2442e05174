"""The open-loop workload (the SLO check) behind the load interface.

Settings are the open-loop and SLO options (:class:`OpenLoopSettings`), merged with the
model profile's ``slo`` from the :class:`LoadContext`; the schedule is one cell per rate;
a run measures them one after another, saying each as it starts, with prompt indices that
go on from run to run; the result judges each cell against the SLO and gives the SLO
table. The search for the highest rate (``search.py``) picks its cells as it goes: the
check runs it one cell at a time through the same steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.arrivals import format_rate
from engine_acceptance.load.open_loop.cells import RateCell, RateCellResult, measure_rate_cell
from engine_acceptance.load.open_loop.report import slo_table
from engine_acceptance.load.output_split import SplitCell
from engine_acceptance.load.open_loop.settings import OpenLoopSettings
from engine_acceptance.load.open_loop.slo import SloOutcome, SloSpec, evaluate_slo
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.reporting.table import Table


@dataclass(frozen=True)
class OpenLoopResult:
    spec: SloSpec
    outcomes: tuple[SloOutcome, ...]
    # Each cell's output split (cached tokens, draft acceptance), in the outcomes' order.
    splits: tuple[SplitCell, ...] = ()

    def figures(self) -> dict[str, Any]:
        """The SLO and each cell's attainment, goodput and percentiles (the junit ``slo`` property)."""
        return {"spec": self.spec.as_dict(), "cells": {o.key: o.as_dict() for o in self.outcomes}}

    def table(self) -> Table:
        return slo_table("SLO, open loop", self.outcomes, self.splits)

    def problems(self) -> list[str]:
        return [problem for outcome in self.outcomes for problem in outcome.problems(self.spec)]


class OpenLoopWorkload:
    """Requests on a schedule of arrivals, judged against a service-level objective."""

    name = "open loop"

    def __init__(self, context: LoadContext) -> None:
        self.context = context
        # Prompt indices go on from run to run (the SLO search runs one cell at a time): no prompt repeats.
        self.next_index = 0

    def settings(self, options: Any) -> OpenLoopSettings | None:
        settings: OpenLoopSettings = options.open_loop
        return settings if self.spec(settings) is not None else None

    def spec(self, settings: OpenLoopSettings) -> SloSpec | None:
        """The SLO in force (the command line over the model profile); None: no SLO, the check is off."""
        return settings.spec(self.context.model_slo, self.context.model_slo_source)

    def schedule(self, settings: OpenLoopSettings) -> Sequence[RateCell]:
        return settings.cells(self.context.model_slo)

    async def run(self, settings: OpenLoopSettings, cells: Sequence[RateCell]) -> list[RateCellResult]:
        if self.context.prompts is None:
            raise ValueError("the open loop needs prompts in its LoadContext")
        say = self.context.progress or (lambda _line: None)
        results = []
        for cell in cells:
            say(f"{cell.key}: {cell.requests} requests at {format_rate(cell.rate)} req/s, burstiness "
                f"{format_rate(cell.burstiness)}, load seed {cell.seed}; {cell.warmup_requests} warm-up")
            result = await measure_rate_cell(
                self.context.target, cell, self.context.prompts, ignore_eos=self.context.ignore_eos,
                first_index=self.next_index, progress=self.context.progress, processes=self.context.processes,
                counters=self.context.counters)
            results.append(result)
            if self.context.after_cell is not None:
                await self.context.after_cell(result)
            self.next_index += cell.warmup_requests + cell.requests
        return results

    def result(self, settings: OpenLoopSettings, runs: Sequence[RateCellResult]) -> OpenLoopResult:
        spec = self.spec(settings)
        if spec is None:
            raise ValueError("no SLO in force: nothing to judge the open-loop cells by")
        return OpenLoopResult(spec, tuple(
            evaluate_slo(r.cell.key, r.cell.rate, r.records, r.duration_s, spec.limits_ms,
                         late_sends=r.sends.late, max_in_flight=r.sends.max_in_flight,
                         client_processes=r.processes) for r in runs), tuple(r.split_cell() for r in runs))
