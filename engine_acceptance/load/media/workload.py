"""The media workload behind the load interface.

Settings are ``--media-shapes`` (:class:`MediaSettings`) with the rounds of
``--throughput-rounds``; the schedule its selected cells; a run measures them one after
another, saying each as it starts; the result is each cell's req/s and E2E and the media
table. The check in ``tests/test_media_throughput.py`` runs one input's cells at a time
(one check each), their replies capped by the model profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.media.cells import (
    MediaCell,
    MediaCellResult,
    MediaSettings,
    measure_media_cell,
    media_table,
)
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.reporting.table import Table


@dataclass(frozen=True)
class MediaLoadSettings:
    media: MediaSettings
    rounds: int


@dataclass(frozen=True)
class MediaResult:
    cells: tuple[MediaCellResult, ...]

    def figures(self) -> dict[str, Any]:
        """Per cell, req/s and E2E as median/min/max of rounds (the junit ``media_throughput`` property)."""
        return {r.cell.key: r.figures() for r in self.cells}

    def table(self) -> Table:
        return media_table("Media throughput", self.cells)


class MediaWorkload:
    """Chat requests carrying images or a video, at a fixed client concurrency."""

    name = "media"

    def __init__(self, context: LoadContext) -> None:
        self.context = context

    def settings(self, options: Any) -> MediaLoadSettings | None:
        return MediaLoadSettings(options.media, options.throughput.rounds)

    def schedule(self, settings: MediaLoadSettings) -> Sequence[MediaCell]:
        return settings.media.cells

    async def run(self, settings: MediaLoadSettings, cells: Sequence[MediaCell]) -> list[MediaCellResult]:
        say = self.context.progress or (lambda _line: None)
        results = []
        for cell in cells:
            say(f"{cell.key}: {settings.rounds} round(s) of {cell.requests} requests with "
                f"{' + '.join(cell.input.files)}, {cell.warmup_requests} warm-up")
            result = await measure_media_cell(self.context.target, cell, content_type=self.context.content_type,
                                              rounds=settings.rounds, progress=self.context.progress,
                                              counters=self.context.counters)
            results.append(result)
            if self.context.after_cell is not None:
                await self.context.after_cell(result)
        return results

    def result(self, settings: MediaLoadSettings, runs: Sequence[MediaCellResult]) -> MediaResult:
        return MediaResult(tuple(runs))
