"""Media throughput (seed 001): chat requests carrying images or a video, under load.

A media cell is one input (``image-512``, ``two-images-512``, ``video-16frames``, ...
from ``fixtures/media_throughput.yaml``) at one client concurrency with a fixed number
of requests per round. The load goes through the same load generator as the
fixed-length smoke (:class:`engine_acceptance.load.generator.LoadGenerator` on
``/v1/chat/completions``: bodies built before the round, reads stamped when they
arrive, parsing afterwards) and the same metrics (:mod:`engine_acceptance.load.metrics`:
per round req/s and P50/P95 E2E, per cell the median of rounds with min-max).

Besides its figures, a media cell checks that the load was served: every request
succeeded, and every reply names the right colours (the engine really looked at
each request's media under concurrency, not at another request's).

Every request sends the same media, as seed 001 did, so an engine's multimodal
processor cache may serve repeats: :data:`CACHE_NOTE` goes next to every table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any


from engine_acceptance.media import library as media
from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.load.generator import LoadGenerator, RawRequest, analyse_round, connection_note, replay_events
from engine_acceptance.media.messages import colors_named
from engine_acceptance.wire.media_parts import media_part, user_turn
from engine_acceptance.load.metrics import CellSummary, RequestRecord, RoundSummary, request_samples, summarize_cell
from engine_acceptance.load.output_split import SplitCell, cell_of_summary, split_columns, split_figures
from engine_acceptance.load.spec_decode import RoundCounters, SpecDecodeCounters
from engine_acceptance.profiles.profile import DATA_ROOT
from engine_acceptance.wire.reassembly import reassemble_stream
from engine_acceptance.load.report import note_page
from engine_acceptance.reporting import terminal
from engine_acceptance.reporting.table import Table
from engine_acceptance.errors import UsageError
from engine_acceptance.option_spec import OptionSpec
from engine_acceptance.resources import read_yaml
from engine_acceptance.run_bundle import cell_entry

__all__ = [
    "CACHE_NOTE",
    "FIGURES",
    "MEDIA_SHAPES_FILE",
    "MediaCell",
    "MediaCellResult",
    "MediaInput",
    "MediaSettings",
    "MediaSettingsError",
    "OPTIONS",
    "build_media_body",
    "from_options",
    "load_inputs",
    "measure_media_cell",
    "media_table",
    "media_table_html",
    "media_table_lines",
    "select_media_cells",
    "wrong_answer",
]

MEDIA_SHAPES_FILE = DATA_ROOT / "media_throughput.yaml"
PROMPTS_DIR = DATA_ROOT / "prompts"
CACHE_NOTE = ("Every request sends the same media (as seed 001 did): an engine's multimodal processor cache may "
              "serve the repeats, so these are end-to-end serving figures, not vision-encoder speed.")
# The figures a media cell reports (metric names of metrics.py), in table order.
FIGURES = (
    ("request_per_s", "req/s"),
    ("p50_e2e_ms", "median E2E ms"),
    ("p95_e2e_ms", "P95 E2E ms"),
    ("p50_ttft_ms", "median TTFT ms"),
)
# Border and marks of the bordered images: naming them is not a wrong answer.
_NEUTRAL = ("white", "black")
_CELL = re.compile(r"^(?P<name>[a-z0-9-]+)(?:@(?P<concurrency>\d+)(?:x(?P<requests>\d+))?)?$")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MediaInput:
    """What one media request sends and what its answer must name."""

    name: str
    kind: str  # "image" or "video": the capability it needs
    files: tuple[str, ...]
    prompt: str
    max_tokens: int
    colors: tuple[str, ...]
    concurrencies: tuple[int, ...]


@dataclass(frozen=True)
class MediaCell:
    """One media input at one concurrency: ``image-512@4`` sends 4 at a time."""

    input: MediaInput
    concurrency: int
    requests: int

    @property
    def key(self) -> str:
        return f"{self.input.name}@{self.concurrency}"

    @property
    def warmup_requests(self) -> int:
        return self.concurrency


class MediaSettingsError(UsageError):
    """A ``--media-shapes`` value that cannot be used."""

    option = "--media-shapes"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.option}: {message}")


@dataclass(frozen=True)
class MediaSettings:
    cells: tuple[MediaCell, ...]
    spec: str = "full"




@lru_cache(maxsize=None)
def _data(path: Path = MEDIA_SHAPES_FILE) -> dict[str, Any]:
    return read_yaml(path)


@lru_cache(maxsize=None)
def _prompt_file(stem: str) -> dict[str, Any]:
    return read_yaml(PROMPTS_DIR / f"{stem}.yaml")


def load_inputs() -> dict[str, MediaInput]:
    """The media inputs of ``fixtures/media_throughput.yaml``, prompts resolved."""
    inputs = {}
    for name, entry in _data()["inputs"].items():
        stem, case = entry["prompt"]
        prompts = _prompt_file(stem)
        inputs[name] = MediaInput(
            name=name, kind=entry["kind"], files=tuple(entry["files"]), prompt=prompts[case]["prompt"],
            max_tokens=int(prompts["max_tokens"]), colors=tuple(entry["colors"]),
            concurrencies=tuple(int(c) for c in entry["concurrency"]))
    return inputs


def select_media_cells(spec: str) -> list[MediaCell]:
    """The cells a ``--media-shapes`` value names: ``full`` (seed 001's), or ``NAME``, ``NAME@C``, ``NAME@CxR``."""
    inputs = load_inputs()
    default_requests = int(_data()["requests_per_round"])
    tokens = [token.strip() for token in spec.split(",")]
    if not spec.strip() or not all(tokens):
        raise MediaSettingsError(f"{spec!r} has an empty entry")
    chosen: dict[str, MediaCell] = {}
    for token in tokens:
        if token == "full":
            cells = [MediaCell(i, c, default_requests) for i in inputs.values() for c in i.concurrencies]
        else:
            match = _CELL.match(token)
            if not match or match["name"] not in inputs:
                raise MediaSettingsError(f"{token!r} is not full, NAME, NAME@C or NAME@CxR with NAME one of "
                                         f"{', '.join(inputs)} (e.g. image-512@4x16)")
            item = inputs[match["name"]]
            numbers = [int(n) for n in (match["concurrency"], match["requests"]) if n is not None]
            if any(n < 1 for n in numbers):
                raise MediaSettingsError(f"{token!r}: every number must be at least 1")
            if match["concurrency"] is None:
                cells = [MediaCell(item, c, default_requests) for c in item.concurrencies]
            else:
                requests = int(match["requests"]) if match["requests"] else default_requests
                cells = [MediaCell(item, int(match["concurrency"]), requests)]
        for cell in cells:
            previous = chosen.get(cell.key)
            if previous is not None and previous.requests != cell.requests:
                raise MediaSettingsError(f"{cell.key} is named twice with different requests per round "
                                         f"({previous.requests} and {cell.requests})")
            chosen.setdefault(cell.key, cell)
    return list(chosen.values())


def build_media_body(item: MediaInput, *, model: str, content_type: str) -> bytes:
    """One streamed chat request carrying the input's media, encoded once (every request sends the same)."""
    parts = [media_part(content_type, media.data_uri(name)) for name in item.files]
    body = {
        "model": model,
        "messages": user_turn(item.prompt, parts),
        "temperature": 0,
        "max_tokens": item.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def wrong_answer(content: str, expected: Sequence[str]) -> str | None:
    """Why ``content`` is not the expected colours in order (white and black ignored); None if it is."""
    hues = [color for color in colors_named(content) if color not in _NEUTRAL]
    if hues == list(expected):
        return None
    return f"named {hues or 'no colour'} instead of {' then '.join(expected)}: {content[:120]!r}"


def _content(raw: RawRequest) -> str:
    return reassemble_stream(replay_events(raw), sent_at=raw.start).content


@dataclass
class MediaCellResult:
    """A media cell's rounds: figures, records, and the replies that named the wrong colours."""

    cell: MediaCell
    summary: CellSummary
    records: list[list[RequestRecord]]
    warmup: RoundSummary | None
    wrong: list[str]
    answered: int
    stamping: str = "task read"
    # Why its rounds have no speculative-decoding acceptance (spec_decode.py); None: they have one, or none asked.
    spec_decode_note: str | None = None

    def split_cell(self) -> SplitCell:
        """What the output split's columns read: chat, so reasoning and content apart."""
        return cell_of_summary(self.cell.key, self.summary, (r for records in self.records for r in records),
                               chat=True, spec_decode_note=self.spec_decode_note)

    def figures(self) -> dict[str, dict[str, Any]]:
        """The reported figures as median/min/max/rounds, for tables and the comparison."""
        return {name: self.summary.metrics[name].as_dict() for name, _ in FIGURES}

    def bundle_entry(self, content_type: str) -> dict[str, Any]:
        """The cell for the run bundle: what was sent, every measured request's latencies, each round's req/s."""
        item = self.cell.input
        shape = {"input": item.name, "files": list(item.files), "concurrency": self.cell.concurrency,
                 "requests_per_round": self.cell.requests, "warmup_requests": self.cell.warmup_requests,
                 "rounds": len(self.records), "max_tokens": item.max_tokens, "content_type": content_type}
        return cell_entry("media_throughput", self.cell.key, shape,
                          samples=request_samples((r for records in self.records for r in records), chat=True),
                          rounds={"request_per_s": list(self.summary.metrics["request_per_s"].rounds)},
                          request_set_parts=(item.prompt,))

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.cell.key,
            "input": self.cell.input.name,
            "files": list(self.cell.input.files),
            "concurrency": self.cell.concurrency,
            "requests_per_round": self.cell.requests,
            "warmup_requests": self.cell.warmup_requests,
            "client_stamping": self.stamping,
            "spec_decode_note": self.spec_decode_note,
            "output_split": split_figures(self.split_cell()),
            "answers_checked": self.answered,
            "wrong_answers": len(self.wrong),
            "wrong_answer_examples": self.wrong[:5],
            "summary": self.summary.as_dict(),
            "warmup": self.warmup.as_dict() if self.warmup else None,
            "requests": [[record.as_dict() for record in records] for records in self.records],
            "note": CACHE_NOTE,
        }


async def measure_media_cell(target: EngineTarget, cell: MediaCell, *, content_type: str, rounds: int,
                             progress: Progress | None = None,
                             counters: SpecDecodeCounters | None = None) -> MediaCellResult:
    """Warm up (one wave, not counted), then ``rounds`` rounds of ``cell.requests`` requests.

    ``counters``: the engine's speculative-decoding counters, read between the rounds (never during one).
    """
    say: Progress = progress or (lambda _line: None)
    body = build_media_body(cell.input, model=target.model, content_type=content_type)
    summaries: list[RoundSummary] = []
    all_records: list[list[RequestRecord]] = []
    wrong: list[str] = []
    answered = 0
    warmup = None
    around = RoundCounters(counters)
    if note := connection_note(target):
        say(f"{cell.key}: {note}")
    async with LoadGenerator(target, cell.concurrency, path="/chat/completions") as generator:
        raw = await generator.round([body] * cell.warmup_requests)
        _, warmup = analyse_round(raw, chat=True)
        say(f"{cell.key} warm-up: {warmup.completed}/{warmup.requests} requests done in {warmup.wall_s:.1f} s "
            f"(not counted)")
        for number in range(1, rounds + 1):
            await around.start()
            raw = await generator.round([body] * cell.requests)
            records, summary = analyse_round(raw, chat=True)
            summary = await around.finish(summary)
            for request, record in zip(raw.requests, records):
                if record.ok:
                    answered += 1
                    why = wrong_answer(_content(request), cell.input.colors)
                    if why is not None:
                        wrong.append(why)
            summaries.append(summary)
            all_records.append(records)
            rate = summary.metrics["request_per_s"] or 0.0
            e2e = summary.metrics["p50_e2e_ms"]
            say(f"{cell.input.name} concurrency {cell.concurrency} round {number}/{rounds}: "
                f"{summary.completed}/{summary.requests} requests done, {summary.failed} failed, "
                f"{summary.wall_s:.1f} s, {rate:.2f} req/s, median E2E "
                f"{'-' if e2e is None else f'{e2e:.1f} ms'}")
    return MediaCellResult(cell, summarize_cell(cell.key, summaries), all_records, warmup, wrong, answered,
                           generator.stamping, around.unavailable)


def _rows(results: Sequence[MediaCellResult]) -> list[list[str]]:
    rows = []
    for result in results:
        summary = result.summary
        errors = ", ".join(f"{k}={v}" for k, v in sorted(summary.errors_by_kind.items())) or "0"
        rows.append([result.cell.input.name, str(result.cell.concurrency),
                     f"{result.cell.requests}x{len(summary.rounds)}",
                     *(summary.metrics[name].text() for name, _ in FIGURES), errors,
                     f"{len(result.wrong)}/{result.answered}"])
    return rows


def _header() -> list[str]:
    return ["input", "concurrency", "req x rounds", *(label for _, label in FIGURES), "errors", "wrong answers"]


def media_table(title: str, results: Sequence[MediaCellResult], notes: Sequence[str] = ()) -> Table:
    """The cells' table: the media columns, then the output split's (reasoning against answer), with its notes."""
    header, rows, split_notes = split_columns([result.split_cell() for result in results])
    return Table.of(title, [*_header(), *header], [[*row, *split] for row, split in zip(_rows(results), rows)],
                    [*notes, *split_notes])


def media_table_lines(results: Sequence[MediaCellResult]) -> list[str]:
    """A fixed-width table: median of rounds [min-max], the split's notes under it."""
    return terminal.table_lines(media_table("", results), title=False)


def media_table_html(title: str, results: Sequence[MediaCellResult]) -> str:
    return note_page(media_table(title, results,
                                 [f"Each cell: median of rounds [min-max across rounds]. {CACHE_NOTE}"]))


OPTIONS = (
    OptionSpec("--media-shapes", default="full", metavar="SPEC",
               help="Media throughput cells: full (seed 001's), or a comma list of NAME, NAME@C, NAME@CxR "
                    "(fixtures/media_throughput.yaml; default: full)"),
)


def from_options(values: Any) -> MediaSettings:
    """The media throughput settings from the parsed options (``config.option``)."""
    return MediaSettings(tuple(select_media_cells(values.media_shapes)), values.media_shapes)
