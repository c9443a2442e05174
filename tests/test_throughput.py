"""Throughput smoke (TEST-PLAN §7): a fixed-length load, its figures, and the gate.

One check per workload (input/output tokens); it measures each selected concurrency
of that workload (warm-up, then ``--throughput-rounds`` rounds), reports a table and
a chart per workload, and fails when the load was not what it claimed (errors,
input or output length not honoured) or when a threshold or the baseline is missed,
or when the baseline compared nothing (none of its cells and metrics was measured).
Throughput runs alone (``pytest -m throughput``, no ``-n``): the plugin skips it,
with the reason, whenever anything else would share the engine.

On an engine without a tokenize endpoint and without ``--tokenizer`` the prompts are
text of an estimated length: the check then reports the lengths the engine counted
as approximate (terminal, table, JSON, junit properties ``input_tokens[CELL]``) and,
instead of the exact input length, checks that every request reported
``usage.prompt_tokens`` and that the first measured prompt, sent again, counts the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import allure
import pytest

from engine_acceptance.load.charts import workload_chart_png
from engine_acceptance.load.generator import Cell, CellResult, PromptSource
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.load.closed_loop.validity import (
    Recount,
    count_notes,
    error_problems,
    input_tokens_line,
    input_tokens_summary,
    length_problems,
)
from engine_acceptance.load.closed_loop.gate import check_thresholds, compare_with_baseline, nothing_compared
from engine_acceptance.load.prompts import TextPrompts, recount_prompt_tokens
from engine_acceptance.load.report import table_html
from engine_acceptance.load.closed_loop.settings import select_cells
from engine_acceptance.load.closed_loop.workload import ClosedLoopWorkload
from engine_acceptance.load.output_split import acceptance_rate_properties
from engine_acceptance.load.spec_decode import spec_decode_counters
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.assertions import assert_no_problems
from engine_acceptance.provenance import BASELINE_PROPERTY, baseline_entry, describe
from engine_acceptance.reporting import terminal
from engine_acceptance.run_bundle import cells_property
from engine_acceptance.pytest_plugin.public import suite_options_of

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.throughput]


@dataclass(frozen=True)
class Workload:
    name: str
    cells: tuple[Cell, ...]

    @property
    def id(self) -> str:
        return "in{}-out{}".format(*self.name.split("/"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "workload" not in metafunc.fixturenames:
        return
    options = suite_options_of(metafunc.config)
    settings = options.throughput if options is not None else None
    cells = settings.cells if settings is not None else tuple(select_cells("smoke"))
    grouped: dict[str, list[Cell]] = {}
    for cell in cells:
        grouped.setdefault(cell.workload, []).append(cell)
    workloads = [Workload(name, tuple(group)) for name, group in grouped.items()]
    metafunc.parametrize("workload", workloads, ids=[w.id for w in workloads])


async def _recount_first_measured_prompt(target, prompts: PromptSource, result: CellResult) -> Recount:
    """Send the cell's first measured prompt once more: does the engine count it the same?"""
    records = result.records[0] if result.records else []
    in_load = records[0].prompt_tokens if records and records[0].ok else None
    prompt = prompts.prompt(result.cell.input_tokens, result.first_index + result.cell.warmup_requests)
    again, error = await recount_prompt_tokens(target, prompt)
    return Recount(in_load, again, error)


def _input_tokens(result: CellResult, prompts: PromptSource, recount: Recount | None) -> dict:
    """For the JSON: asked and counted input lengths, and for text prompts how they were estimated."""
    summary = input_tokens_summary(result, exact=prompts.exact)
    if isinstance(prompts, TextPrompts):
        summary.update(why_not_exact=prompts.why, characters_aimed=prompts.chars_for(result.cell.input_tokens),
                       estimate=prompts.estimate.as_dict(), recount=vars(recount) if recount else None)
    return summary


async def test_fixed_length_load_is_served_in_full_and_passes_the_gate(
        workload, acceptance, engine_profile, suite_options, throughput_thresholds, throughput_write,
        throughput_results, load_prompts, load_processes, request) -> None:
    prompts = await load_prompts(max(cell.input_tokens for cell in workload.cells))
    # Without ignore_eos the engine decides the output length: measured, but not checked.
    output_forced = engine_profile.supports_ignore_eos
    recounts: dict[str, Recount] = {}

    async def recount(result: CellResult) -> None:
        # Between cells, as the load left the engine: text prompts' lengths are the engine's to count.
        if not prompts.exact:
            recounts[result.cell.key] = await _recount_first_measured_prompt(acceptance.target, prompts, result)

    closed_loop = ClosedLoopWorkload(LoadContext(
        acceptance.target, progress=throughput_write, prompts=prompts, ignore_eos=output_forced,
        processes=load_processes, after_cell=recount, counters=spec_decode_counters(acceptance.target, engine_profile)))
    throughput_settings = closed_loop.settings(suite_options)
    # This workload's cells (one input/output length); the others are checks of their own.
    results = await closed_loop.run(throughput_settings, workload.cells)
    measured = closed_loop.result(throughput_settings, results)

    load_problems = {r.cell.key: error_problems(r) + length_problems(
        r, output_forced=output_forced, input_exact=prompts.exact, recount=recounts.get(r.cell.key))
        for r in results}
    throughput_results.add(results, clean={key for key, problems in load_problems.items() if not problems},
                           prompts=prompts,
                           input_tokens={r.cell.key: _input_tokens(r, prompts, recounts.get(r.cell.key))
                                         for r in results})
    for r in results:
        request.node.user_properties.append((f"input_tokens[{r.cell.key}]",
                                             input_tokens_line(r, exact=prompts.exact, short=True)))
    # The figures of each cell (median [min-max] of rounds) for gate.json and the comparison driver.
    request.node.user_properties.append(("throughput", json.dumps(measured.figures())))
    # Every request's latencies, for a later diff of two runs (engine-acceptance diff, docs/diff.md).
    request.node.user_properties.append(cells_property([r.bundle_entry(prompts, ignore_eos=output_forced)
                                                        for r in results]))
    # Each cell's draft acceptance as k of n (accepted of draft tokens), where the engine counts them.
    request.node.user_properties.extend(acceptance_rate_properties(r.split_cell() for r in results))
    notes = [note for r in results for note in count_notes(
        r, output_forced=output_forced,
        ignore_eos_reason=f"engine profile {engine_profile.name!r} does not declare ignore_eos",
        input_estimate=(f"{prompts.describe(r.cell.input_tokens)}, because {prompts.why}"
                        if isinstance(prompts, TextPrompts) else None),
        recount=recounts.get(r.cell.key))]
    title = f"throughput {workload.name} tokens"
    approximate = [input_tokens_line(r, exact=False) for r in results if not r.input_exact]
    allure.attach(table_html(title, results, approximate), name=f"{title}: table",
                  attachment_type=allure.attachment_type.HTML)
    allure.attach(workload_chart_png(workload.name, results), name=f"{title}: chart",
                  attachment_type=allure.attachment_type.PNG)
    attach_json(f"{title}: every round", [r.as_dict() for r in results], acceptance.redactor)
    for line in terminal.table_lines(measured.table(), title=False):
        throughput_write(line)

    problems = [problem for key in load_problems for problem in load_problems[key]]
    baseline = throughput_settings.baseline
    for result in results:
        problems += check_thresholds(result.summary, throughput_thresholds)
        if baseline is not None:
            violations, baseline_notes = compare_with_baseline(result.summary, baseline,
                                                               throughput_settings.tolerances)
            problems += violations
            notes += baseline_notes
    if baseline is not None:
        # Whose the baseline is: one saved from this same engine measures a regression against itself.
        entry = baseline_entry("throughput", str(baseline.path), baseline.provenance, acceptance.engine)
        request.node.user_properties.append((BASELINE_PROPERTY, json.dumps(entry)))
        throughput_write(f"baseline {baseline.path}: {entry['comparison']} ({describe(baseline.provenance)})")
        # A baseline that compared nothing gated nothing: a failure, not a pass with a note.
        empty = nothing_compared([r.summary for r in results], baseline, throughput_settings.tolerances)
        if empty is not None:
            problems.append(empty)
    for note in notes:
        throughput_write(f"note: {note}")
    if notes:
        allure.attach("\n".join(notes), name=f"{title}: notes", attachment_type=allure.attachment_type.TEXT)
    assert_no_problems(problems)
