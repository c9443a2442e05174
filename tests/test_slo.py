"""Open-loop load against service-level objectives: attainment and goodput (issue 18).

Runs only when an SLO is given, by ``--slo ttft=MS,tpot=MS,e2e=MS`` or by the model
profile's ``slo`` section; otherwise it is skipped, saying so. Requests arrive on an
open-loop schedule (``--request-rate``, ``--burstiness``, ``--load-seed``; one cell
per rate), whether or not earlier ones finished. Per cell: the share of requests
meeting every limit (attainment, with its 95% Wilson interval), goodput (requests
meeting it per second) and the P50/P90/P99 of TTFT, TPOT and E2E. The check fails,
with the figures, when a cell's attainment is below the target or its goodput below
the minimum. Sends that fell behind the schedule are counted and reported.

``--slo-endpoint chat`` sends the cells as chat requests (text prompts of an estimated length):
a reasoning model's first reasoning and first content token are then reported apart.

``--slo-search`` adds the search for the highest rate whose attainment stays at the
target (:mod:`engine_acceptance.load.open_loop.search`), reported as a figure. Like the
throughput smoke this is a measurement: it runs alone on the engine.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import allure
import pytest

from engine_acceptance.load.arrivals import LATE_S, format_rate
from engine_acceptance.load.open_loop.cells import RateCell, RateCellResult
from engine_acceptance.load.open_loop.slo import SloOutcome, SloSpec
from engine_acceptance.load.open_loop.report import slo_chart_png, slo_csv, slo_table_html
from engine_acceptance.load.open_loop.search import SearchPolicy, Step, search_highest_rate
from engine_acceptance.load.open_loop.settings import OpenLoopSettings
from engine_acceptance.load.open_loop.workload import OpenLoopResult, OpenLoopWorkload
from engine_acceptance.load.output_split import acceptance_rate_properties
from engine_acceptance.load.spec_decode import spec_decode_counters
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.progress import Write, terminal_writer
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.assertions import assert_no_problems
from engine_acceptance.run_bundle import cells_property, rate_property
from engine_acceptance.pytest_plugin.public import AcceptanceOptions
from engine_acceptance.reporting import terminal

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.slo]


@pytest.fixture
def slo_write(pytestconfig: pytest.Config) -> Write:
    """A line on the terminal while the cells run (output capture is bypassed)."""
    return terminal_writer(pytestconfig, "slo ")


@pytest.fixture
def open_loop_settings(suite_options: AcceptanceOptions) -> OpenLoopSettings:
    return suite_options.open_loop


def _slo_source(model_profile: Any) -> str:
    return f"model profile {model_profile.name!r} ({model_profile.source})"


@pytest.fixture
def slo_spec(open_loop_settings: OpenLoopSettings, model_profile: Any) -> SloSpec:
    spec = open_loop_settings.spec(model_profile.slo, _slo_source(model_profile))
    if spec is None:
        pytest.skip(f"no SLO given: pass --slo ttft=MS,tpot=MS,e2e=MS (any subset) or give the model profile an "
                    f"slo section (model profile {model_profile.name!r} has none)")
    return spec


class CellRunner:
    """Measures open-loop cells one after another through the load interface, each with prompts of its own."""

    def __init__(self, acceptance: Any, engine_profile: Any, model_profile: Any, settings: OpenLoopSettings,
                 prompts: Any, write: Write, processes: int | None = None) -> None:
        # --load-processes (None: auto); each cell reports how many processes sent it.
        self.workload = OpenLoopWorkload(LoadContext(
            acceptance.target, progress=write, prompts=prompts, ignore_eos=engine_profile.supports_ignore_eos,
            processes=processes, model_slo=model_profile.slo, model_slo_source=_slo_source(model_profile),
            counters=spec_decode_counters(acceptance.target, engine_profile)))
        self.settings = settings
        self.results: list[RateCellResult] = []
        self.outcomes: list[SloOutcome] = []

    async def measure_all(self, cells: list[RateCell]) -> list[SloOutcome]:
        results = await self.workload.run(self.settings, cells)
        outcomes = list(self.workload.result(self.settings, results).outcomes)
        self.results += results
        self.outcomes += outcomes
        return outcomes

    async def measure(self, cell: RateCell) -> SloOutcome:
        return (await self.measure_all([cell]))[0]


def _report(title: str, spec: SloSpec, runner: CellRunner, request: pytest.FixtureRequest, write: Write,
            redactor: Any, figures: dict[str, Any]) -> None:
    splits = [result.split_cell() for result in runner.results]
    allure.attach(slo_table_html(title, spec, runner.outcomes, splits), name=f"{title}: table",
                  attachment_type=allure.attachment_type.HTML)
    allure.attach(slo_csv(runner.outcomes, splits), name=f"{title}: table (CSV)",
                  attachment_type=allure.attachment_type.CSV)
    allure.attach(slo_chart_png(title, spec, runner.outcomes), name=f"{title}: latency against rate",
                  attachment_type=allure.attachment_type.PNG)
    attach_json(f"{title}: every request", [r.as_dict() for r in runner.results], redactor)
    for line in terminal.table_lines(OpenLoopResult(spec, tuple(runner.outcomes), tuple(splits)).table(), title=False):
        write(line)
    # For gate.json and the comparison driver: each cell's figures, the SLO and its source.
    request.node.user_properties.append(("slo", json.dumps(
        {"spec": spec.as_dict(), **figures, "cells": {o.key: o.as_dict() for o in runner.outcomes}})))
    # Every request's latencies and each cell's attainment as k of n, for a later diff of two runs (docs/diff.md).
    request.node.user_properties.append(cells_property([
        result.bundle_entry(runner.workload.context.ignore_eos, figures={"goodput_rps": outcome.goodput_rps})
        for result, outcome in zip(runner.results, runner.outcomes)]))
    for outcome in runner.outcomes:
        request.node.user_properties.append(rate_property(f"slo_attainment[{outcome.key}]",
                                                          outcome.attainment.successes, outcome.attainment.total))
    # Each cell's draft acceptance as k of n (accepted of draft tokens), where the engine counts them.
    request.node.user_properties.extend(acceptance_rate_properties(splits))


async def test_open_loop_load_meets_the_slo_attainment_and_goodput(
        acceptance, engine_profile, model_profile, open_loop_settings: OpenLoopSettings, slo_spec: SloSpec,
        load_prompts, load_processes, slo_write: Write, request: pytest.FixtureRequest) -> None:
    cells = open_loop_settings.cells(model_profile.slo)
    prompts = await load_prompts(max(cell.input_tokens for cell in cells), text=cells[0].chat)
    slo_write(f"SLO: {slo_spec.describe()}; prompts from {prompts.source}")
    runner = CellRunner(acceptance, engine_profile, model_profile, open_loop_settings, prompts, slo_write,
                        load_processes)
    await runner.measure_all(cells)
    _report("SLO open-loop", slo_spec, runner, request, slo_write, acceptance.redactor, {})
    # Reported, not failed: a late send is the client's (or the machine's) miss, and its request still counts.
    late = [f"{r.cell.key}: {r.sends.late}/{len(r.records)} sends more than {LATE_S * 1000:g} ms behind the "
            f"schedule (lateness P99 {r.sends.lateness_ms(99) or 0.0:.3f} ms, max "
            f"{r.sends.lateness_ms(100) or 0.0:.3f} ms)" for r in runner.results if r.sends.late]
    for note in late:
        slo_write(f"note: {note}")
    problems = [problem for outcome in runner.outcomes for problem in outcome.problems(slo_spec)]
    # Late sends are context for a failure (detail), never a problem a record must describe.
    assert_no_problems(problems, detail="; ".join(late) or None)


async def test_slo_search_reports_the_highest_rate_meeting_the_target(
        acceptance, engine_profile, model_profile, open_loop_settings: OpenLoopSettings, slo_spec: SloSpec,
        load_prompts, load_processes, slo_write: Write, request: pytest.FixtureRequest) -> None:
    if not open_loop_settings.search:
        pytest.skip("the SLO search is off: pass --slo-search to look for the highest rate meeting the target")
    first = open_loop_settings.cells(model_profile.slo)[0]
    prompts = await load_prompts(first.input_tokens, text=first.chat)
    runner = CellRunner(acceptance, engine_profile, model_profile, open_loop_settings, prompts, slo_write,
                        load_processes)

    async def run(rate: float) -> Step:
        cell = dataclasses.replace(first, rate=rate)
        outcome = await runner.measure(cell)
        return Step(rate, outcome.attainment.rate, outcome.attainment.total, outcome.late_sends,
                    outcome.max_in_flight)

    result = await search_highest_rate(run, SearchPolicy(start=first.rate, target=slo_spec.target))
    slo_write(f"search: {result.stopped}; highest rate meeting the target: "
              f"{'none' if result.best is None else format_rate(result.best)} req/s")
    _report("SLO search", slo_spec, runner, request, slo_write, acceptance.redactor, {"search": result.as_dict()})
    assert result.best is not None, (f"no arrival rate met the SLO target ({slo_spec.describe()}): {result.stopped}; "
                                     f"attainment per rate: " + ", ".join(
                                         f"{format_rate(o.rate)} req/s {o.attainment}" for o in runner.outcomes))
