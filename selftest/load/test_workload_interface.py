"""Every load workload behind the one interface: settings -> schedule -> run -> result.

Each adapter (``load/*/workload.py``) is driven through the four steps against the
reference engine (the soak with a send of its own: its pacing is the soak's, not the
engine's), on cells small enough to take a second or two, and its result gives the
figures and the table in the one shape: the table's rows are the ones the workload's
own table prints, and its figures are keyed as the check's junit property is. What a
check does between cells goes through the context's ``after_cell``, awaited with each
cell's result before the next cell starts; the soak's check hands what it saw around the
run (what ended it, the engine's metrics, notes) to the result step.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from engine_acceptance.load.closed_loop.settings import ThroughputSettings
from engine_acceptance.load.closed_loop.workload import ClosedLoopWorkload
from engine_acceptance.load.generator import Cell, CellResult, PromptIds
from engine_acceptance.load.media.cells import MediaSettings, media_table_lines, select_media_cells
from engine_acceptance.load.media.workload import MediaWorkload
from engine_acceptance.load.open_loop.report import slo_table_lines
from engine_acceptance.load.open_loop.settings import OpenLoopSettings
from engine_acceptance.load.open_loop.workload import OpenLoopWorkload
from engine_acceptance.load.report import table_lines
from engine_acceptance.load.soak.traffic import SoakSettings
from engine_acceptance.load.soak.workload import SoakRun, SoakWorkload
from engine_acceptance.load.workload import LoadContext, Workload, WorkloadResult
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine
from engine_acceptance.reporting import terminal
from engine_acceptance.wire.types import EngineTarget

pytestmark = pytest.mark.asyncio

INPUT_TOKENS, OUTPUT_TOKENS = 32, 4


@pytest.fixture(scope="module")
def engine() -> Iterator[RunningReferenceEngine]:
    with start_reference_engine() as running:
        yield running


def _options(**given: object) -> SimpleNamespace:
    """The suite's parsed options as the workloads read them (AcceptanceOptions' fields)."""
    defaults = dict(throughput=ThroughputSettings(cells=(Cell(INPUT_TOKENS, OUTPUT_TOKENS, 2, 4, 2),), rounds=2),
                    open_loop=OpenLoopSettings(), media=None, soak=None)
    return SimpleNamespace(**{**defaults, **given})


async def _context(engine: RunningReferenceEngine, **fields: object) -> LoadContext:
    target = EngineTarget(engine.url, "reference-model")
    prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=INPUT_TOKENS, seed=1)
    return LoadContext(target, prompts=prompts, ignore_eos=True, **fields)


async def _through_the_interface(workload: Workload, options: SimpleNamespace) -> tuple[list, WorkloadResult]:
    settings = workload.settings(options)
    assert settings is not None
    runs = await workload.run(settings, workload.schedule(settings))
    result = workload.result(settings, runs)
    assert isinstance(result, WorkloadResult)
    return runs, result


async def test_closed_loop_gives_the_throughput_table_and_figures(engine) -> None:
    said: list[str] = []
    workload = ClosedLoopWorkload(await _context(engine, progress=said.append))
    assert isinstance(workload, Workload)
    runs, result = await _through_the_interface(workload, _options())
    assert [r.cell.key for r in runs] == [f"{INPUT_TOKENS}/{OUTPUT_TOKENS}@2"]
    assert said[0].startswith(f"{runs[0].cell.key}: 2 round(s) of 4 requests, 2 warm-up; prompts from ")
    assert workload.next_index == 2 + 4 * 2  # the next run's prompts follow this one's
    assert terminal.table_lines(result.table(), title=False) == table_lines(runs)
    figures = result.figures()
    assert set(figures) == {runs[0].cell.key}
    assert figures[runs[0].cell.key]["output_tok_s"]["median"] > 0


async def test_closed_loop_awaits_after_cell_with_each_cell_before_the_next_starts(engine) -> None:
    said: list[str] = []

    async def after_cell(result: CellResult) -> None:
        said.append(f"after {result.cell.key}, prompts from {result.first_index}")

    workload = ClosedLoopWorkload(await _context(engine, progress=said.append, after_cell=after_cell))
    cells = (Cell(INPUT_TOKENS, OUTPUT_TOKENS, 1, 2, 1), Cell(INPUT_TOKENS, OUTPUT_TOKENS, 2, 2, 2))
    settings = ThroughputSettings(cells=cells, rounds=1)
    runs = await workload.run(settings, workload.schedule(settings))
    # The hook sees each cell's result, with where its prompts started, before the next cell is said.
    assert [line for line in said if line.startswith(("after ", f"{INPUT_TOKENS}/{OUTPUT_TOKENS}@2: 1 round"))] == [
        f"after {runs[0].cell.key}, prompts from 0",
        f"{runs[1].cell.key}: 1 round(s) of 2 requests, 2 warm-up; prompts from "
        + workload.context.prompts.source,  # type: ignore[union-attr]
        f"after {runs[1].cell.key}, prompts from 3",
    ]


async def test_open_loop_is_off_without_an_slo_and_judges_its_cells_with_one(engine) -> None:
    workload = OpenLoopWorkload(await _context(engine))
    assert workload.settings(_options()) is None  # no --slo and no profile slo: the check is off
    options = _options(open_loop=OpenLoopSettings(rates=(math.inf,), limits_ms={"e2e": 60_000.0}, requests=4,
                                                  shape=(INPUT_TOKENS, OUTPUT_TOKENS)))
    runs, result = await _through_the_interface(workload, options)
    assert len(runs) == 1
    assert terminal.table_lines(result.table(), title=False) == slo_table_lines(result.outcomes, result.splits)
    figures = result.figures()
    assert figures["spec"]["e2e_ms"] == 60_000.0
    assert figures["cells"][runs[0].cell.key]["attainment"] == 1.0
    assert result.problems() == []


async def test_media_gives_the_media_table_and_figures(engine) -> None:
    workload = MediaWorkload(await _context(engine))
    cells = tuple(select_media_cells("image-512@1x2"))
    runs, result = await _through_the_interface(workload, _options(media=MediaSettings(cells)))
    assert [r.cell.key for r in runs] == ["image-512@1"]
    assert terminal.table_lines(result.table(), title=False) == media_table_lines(runs)
    assert result.figures() == {"image-512@1": runs[0].figures()}


async def test_soak_sends_through_the_context_and_tables_its_windows() -> None:
    sent: list[tuple[int, str]] = []

    async def send(index: int, kind: str) -> tuple[float | None, str | None]:
        sent.append((index, kind))
        return 0.001, None

    workload = SoakWorkload(LoadContext(EngineTarget("http://127.0.0.1:9", "none"), send=send))
    assert workload.settings(_options()) is None  # no --soak-minutes: the soak is off
    settings = SoakSettings(minutes=0.5 / 60, rate_per_s=20.0, image_share=0.5, workers=2)
    runs, result = await _through_the_interface(workload, _options(soak=settings))
    assert len(sent) == 10 and {kind for _, kind in sent} == {"text", "image"}
    figures = result.figures()
    assert figures["requests"] == 10 and figures["failures"] == 0
    table = result.table()
    assert table.header[0] == "window s" and sum(int(row[1]) for row in table.rows) == 10
    assert result.report.ended_early is None


async def test_soak_stopped_early_names_what_stopped_it_and_carries_what_the_check_saw() -> None:
    stop, ran = asyncio.Event(), []

    async def send(index: int, kind: str) -> tuple[float | None, str | None]:
        if index == 2:
            stop.set()  # as the check's signal handler does
        return 0.001, None

    async def after_cell(run: SoakRun) -> None:
        ran.append(run)

    workload = SoakWorkload(LoadContext(EngineTarget("http://127.0.0.1:9", "none"), send=send, stop=stop,
                                        after_cell=after_cell))
    settings = SoakSettings(minutes=1.0, rate_per_s=20.0, image_share=0.0, workers=1)
    runs = await workload.run(settings, workload.schedule(settings))
    assert ran == runs and runs[0].ended_early
    report = workload.result(settings, runs, ended_by="SIGINT", metrics_start={"m": 1.0}, metrics_end={"m": 2.0},
                             notes=["text only"]).report
    assert report.ended_early is not None and report.ended_early.startswith("SIGINT after 0.0")
    assert (report.metrics_start, report.metrics_end, report.notes) == ({"m": 1.0}, {"m": 2.0}, ["text only"])
    assert workload.result(settings, runs).report.ended_early.startswith("stopped after ")  # type: ignore[union-attr]
