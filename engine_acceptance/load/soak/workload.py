"""The soak behind the load interface.

Settings are ``--soak-*`` (:class:`SoakSettings`; None without ``--soak-minutes``); the
schedule is the soak itself, one cell; a run sends its traffic through the context's
``send`` until the soak's minutes are over or the context's ``stop`` is set; the result
is the :class:`SoakReport`'s totals and its windows as a table. The check in
``tests/test_soak.py`` sets ``stop`` on a signal, reads the engine's metrics before and
after the run, and hands them, with what ended the soak, to the result step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.soak.traffic import SoakReport, SoakSample, SoakSettings, run_soak
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.reporting.table import Table


@dataclass(frozen=True)
class SoakRun:
    samples: list[SoakSample]
    observed_s: float
    ended_early: bool


@dataclass(frozen=True)
class SoakResult:
    report: SoakReport

    def figures(self) -> dict[str, Any]:
        """The totals and the windows (the junit ``soak`` property)."""
        return self.report.summary()

    def table(self) -> Table:
        return self.report.window_table()


class SoakWorkload:
    """Low-rate mixed text and image traffic for minutes, open loop."""

    name = "soak"

    def __init__(self, context: LoadContext) -> None:
        self.context = context

    def settings(self, options: Any) -> SoakSettings | None:
        return options.soak

    def schedule(self, settings: SoakSettings) -> Sequence[SoakSettings]:
        return (settings,)

    async def run(self, settings: SoakSettings, cells: Sequence[SoakSettings]) -> list[SoakRun]:
        if self.context.send is None:
            raise ValueError("the soak needs a send function in its LoadContext")
        runs = []
        for cell in cells:
            samples, observed, early = await run_soak(cell, self.context.send, stop=self.context.stop,
                                                      progress=self.context.progress)
            run = SoakRun(samples, observed, early)
            runs.append(run)
            if self.context.after_cell is not None:
                await self.context.after_cell(run)
        return runs

    def result(self, settings: SoakSettings, runs: Sequence[SoakRun], *, ended_by: str | None = None,
               metrics_start: dict[str, float] | None = None, metrics_end: dict[str, float] | None = None,
               metrics_note: str | None = None, notes: Sequence[str] = ()) -> SoakResult:
        """The report of the last run, with what the check saw around it.

        ``ended_by`` names what set the context's ``stop`` (the check: the signal), said when
        the soak ended early; the engine's metrics at the start and the end, why they are
        missing, and the check's notes go into the report as given.
        """
        run = runs[-1]
        ended = f"{ended_by or 'stopped'} after {run.observed_s / 60:.2f} min" if run.ended_early else None
        return SoakResult(SoakReport(settings, run.observed_s, run.samples, ended_early=ended,
                                     metrics_start=metrics_start, metrics_end=metrics_end,
                                     metrics_note=metrics_note, notes=list(notes)))
