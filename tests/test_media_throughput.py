"""Media throughput (seed 001): images and a video under a fixed client concurrency.

One check per media input (``image-512``, ``image-1024``, ``two-images-512``,
``video-16frames``); it measures each selected concurrency of that input (one
warm-up wave, then ``--throughput-rounds`` rounds of 16 requests; ``--media-shapes``
picks fewer), reports req/s and median E2E as the median of rounds with min-max,
the reasoning's and the answer's first token and tokens apart (chat: the reference engine
and a model with a reasoning parser reason before they answer), cached prompt tokens and the
draft acceptance where the engine reports them, and fails when a request failed or a reply
named the wrong colours. The same
media goes out in every request, as in seed 001, so the report notes that an
engine's processor cache may serve repeats. Runs alone, with the fixed-length
smoke: ``pytest -m throughput``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import allure
import pytest

from engine_acceptance.load.media.cells import CACHE_NOTE, MediaCell, media_table_html, select_media_cells
from engine_acceptance.load.media.workload import MediaWorkload
from engine_acceptance.load.output_split import acceptance_rate_properties
from engine_acceptance.load.spec_decode import spec_decode_counters
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.assertions import assert_no_problems
from engine_acceptance.run_bundle import cells_property
from engine_acceptance.pytest_plugin.public import suite_options_of
from engine_acceptance.reporting import terminal

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.throughput]


@dataclass(frozen=True)
class MediaLoad:
    name: str
    kind: str
    cells: tuple[MediaCell, ...]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "media_load" not in metafunc.fixturenames:
        return
    options = suite_options_of(metafunc.config)
    settings = options.media if options is not None else None
    cells = settings.cells if settings is not None else tuple(select_media_cells("full"))
    grouped: dict[str, list[MediaCell]] = {}
    for cell in cells:
        grouped.setdefault(cell.input.name, []).append(cell)
    loads = [MediaLoad(name, group[0].input.kind, tuple(group)) for name, group in grouped.items()]
    metafunc.parametrize("media_load", [pytest.param(load, marks=pytest.mark.requires(load.kind), id=load.name)
                                        for load in loads])


def _content_type(kind: str, engine_profile) -> str:
    if kind == "image":
        return "image_url"
    content_type = engine_profile.video_content_type
    if not content_type:
        pytest.skip(engine_profile.no_video_reason())
    return content_type


async def test_media_load_is_served_in_full_with_the_right_answers(
        media_load, acceptance, engine_profile, model_profile, suite_options, throughput_write, request) -> None:
    workload = MediaWorkload(LoadContext(acceptance.target, progress=throughput_write,
                                         content_type=_content_type(media_load.kind, engine_profile),
                                         counters=spec_decode_counters(acceptance.target, engine_profile)))
    settings = workload.settings(suite_options)
    # This input's cells, capped by the model profile as every long reply is: a model that never stops runs to the cap.
    cells = [replace(cell, input=replace(cell.input, max_tokens=model_profile.output_budget(cell.input.max_tokens)))
             for cell in media_load.cells]
    results = await workload.run(settings, cells)
    measured = workload.result(settings, results)

    request.node.user_properties.append(("media_throughput", json.dumps(measured.figures())))
    # Every request's latencies, for a later diff of two runs (engine-acceptance diff, docs/diff.md).
    request.node.user_properties.append(cells_property([r.bundle_entry(workload.context.content_type)
                                                        for r in results]))
    # Each cell's draft acceptance as k of n (accepted of draft tokens), where the engine counts them.
    request.node.user_properties.extend(acceptance_rate_properties(r.split_cell() for r in results))
    title = f"media throughput {media_load.name}"
    allure.attach(media_table_html(title, results), name=f"{title}: table", attachment_type=allure.attachment_type.HTML)
    attach_json(f"{title}: every round", [r.as_dict() for r in results], acceptance.redactor)
    for line in terminal.table_lines(measured.table(), title=False):
        throughput_write(line)
    throughput_write(f"note: {CACHE_NOTE}")

    problems = []
    for result in results:
        total = sum(len(records) for records in result.records)
        errors = result.summary.errors_by_kind
        # One problem per kind of error, so a record for one kind covers no other.
        for kind, count in sorted(errors.items()):
            example = next((r.error for records in result.records for r in records
                            if not r.ok and r.error_kind == kind), None)
            problems.append(f"{result.cell.key}: {count}/{total} measured requests failed: {kind} x{count} "
                            f"(e.g. {(example or '')[:200]})")
        # One problem per kind of wrong answer (what was named instead of what): a record for replies
        # that name no colour covers no reply that names another colour.
        kinds: dict[str, list[str]] = {}
        for why in result.wrong:
            kinds.setdefault(why.partition(": ")[0], []).append(why)
        for examples in kinds.values():
            problems.append(f"{result.cell.key}: {len(examples)}/{result.answered} replies named the wrong "
                            f"colours under load, e.g. {examples[0]}")
    assert_no_problems(problems)
