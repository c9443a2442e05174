"""Mixed-traffic soak (seed 001's observation window): low-rate traffic for N minutes.

Seed 001 kept vLLM under about 0.5 req/s, 80% text and 20% repeated images, with at
most four client workers, and reported requests, failures and the E2E median. Here
the same traffic is sent open-loop: request ``i`` is due ``i / rate`` seconds after
the start, whatever the engine does, because a soak asks whether the engine keeps up
with traffic that does not wait for it. At most ``workers`` requests are in flight;
a request due while all are busy waits for one, and the report counts it as late.
The kind of each request is fixed by its index (:func:`is_image`: evenly spread, the
exact share), so two engines of a comparison receive the same sequence.

The report gives the totals, requests, failures, E2E median and P95 per time window
(:func:`window_length`), and, where the engine exposes Prometheus metrics, the memory
and queue series at the start and at the end. It fails on any failed request, and
names a rising error rate (the last window's above the first's) when there is one.

The sending is done by the caller's ``send`` coroutine (``tests/test_soak.py`` uses
the suite's raw streaming client); this module only paces, collects and judges, and
is tested without pytest.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


from engine_acceptance.load.metrics import percentile
from engine_acceptance.option_spec import OptionSpec
# The Prometheus reader is shared with the cancellation checks; re-exported here for the soak's users.
from engine_acceptance.wire.prometheus import parse_prometheus, pick_series
from engine_acceptance.errors import UsageError
from engine_acceptance.reporting import terminal
from engine_acceptance.reporting.table import Table

__all__ = [
    "DEFAULT_IMAGE_SHARE",
    "DEFAULT_RATE",
    "DEFAULT_WORKERS",
    "OPTIONS",
    "SoakReport",
    "SoakSample",
    "SoakSettings",
    "SoakSettingsError",
    "SoakWindow",
    "from_options",
    "is_image",
    "parse_prometheus",
    "pick_series",
    "run_soak",
    "soak_settings_from_options",
    "summarize_windows",
    "window_length",
]

# Seed 001: about 0.5 req/s, 80% text / 20% image, up to four client workers.
DEFAULT_RATE = 0.5
DEFAULT_IMAGE_SHARE = 0.2
DEFAULT_WORKERS = 4
# Ten windows over the soak, none shorter than this (fewer requests make a median noise).
MIN_WINDOW_S = 10.0
WINDOWS = 10

Send = Callable[[int, str], Awaitable["tuple[float | None, str | None]"]]
Progress = Callable[[str], None]


class SoakSettingsError(UsageError):
    """A soak option value that cannot be used: names the option."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class SoakSettings:
    minutes: float
    rate_per_s: float = DEFAULT_RATE
    image_share: float = DEFAULT_IMAGE_SHARE
    workers: int = DEFAULT_WORKERS

    @property
    def duration_s(self) -> float:
        return self.minutes * 60.0




def soak_settings_from_options(*, minutes: str | None, rate: str, workers: str,
                               image_share: str) -> SoakSettings | None:
    """The soak settings, or None when no ``--soak-minutes`` was given (the soak is off)."""
    def number(option: str, raw: str) -> float:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise SoakSettingsError(option, f"{raw!r} is not a number") from None
        if not math.isfinite(value):
            raise SoakSettingsError(option, f"{raw!r} is not a finite number")
        return value

    rate_value = number("--soak-rate", rate)
    share = number("--soak-image-share", image_share)
    worker_count = number("--soak-workers", workers)
    if rate_value <= 0:
        raise SoakSettingsError("--soak-rate", f"{rate!r} must be above 0 requests per second")
    if not 0 <= share <= 1:
        raise SoakSettingsError("--soak-image-share", f"{image_share!r} must be between 0 and 1")
    if worker_count < 1 or worker_count != int(worker_count):
        raise SoakSettingsError("--soak-workers", f"{workers!r} must be a whole number of at least 1")
    if minutes is None:
        return None
    length = number("--soak-minutes", minutes)
    if length <= 0:
        raise SoakSettingsError("--soak-minutes", f"{minutes!r} must be above 0")
    return SoakSettings(minutes=length, rate_per_s=rate_value, image_share=share, workers=int(worker_count))


def is_image(index: int, share: float) -> bool:
    """Whether request ``index`` is an image request: spread evenly, ``share`` of every run of requests."""
    return math.floor((index + 1) * share + 1e-9) > math.floor(index * share + 1e-9)


def window_length(duration_s: float) -> float:
    """Seconds per report window: a tenth of the soak, at least MIN_WINDOW_S."""
    return max(duration_s / WINDOWS, MIN_WINDOW_S)


@dataclass(frozen=True)
class SoakSample:
    """One request of the soak. ``error`` is None for a success."""

    index: int
    kind: str
    due_s: float
    sent_s: float
    e2e_s: float | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def late_s(self) -> float:
        return max(self.sent_s - self.due_s, 0.0)


@dataclass(frozen=True)
class SoakWindow:
    start_s: float
    end_s: float
    requests: int
    failures: int
    p50_e2e_ms: float | None
    p95_e2e_ms: float | None

    @property
    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else 0.0


def summarize_windows(samples: Sequence[SoakSample], duration_s: float) -> list[SoakWindow]:
    """Requests by the window they were due in (the schedule, so a late send stays in its window);
    E2E percentiles of the successful ones."""
    length = window_length(duration_s)
    count = max(1, math.ceil(duration_s / length - 1e-9))
    windows = []
    for number in range(count):
        start, end = number * length, min((number + 1) * length, duration_s)
        last = number == count - 1
        inside = [s for s in samples if start <= s.due_s and (s.due_s < end or last)]
        e2e = [s.e2e_s * 1000.0 for s in inside if s.ok and s.e2e_s is not None]
        windows.append(SoakWindow(start, end, len(inside), sum(1 for s in inside if not s.ok),
                                  percentile(e2e, 50), percentile(e2e, 95)))
    return windows


@dataclass
class SoakReport:
    """What a soak saw, and whether it holds."""

    settings: SoakSettings
    duration_s: float
    samples: list[SoakSample]
    ended_early: str | None = None
    metrics_start: dict[str, float] | None = None
    metrics_end: dict[str, float] | None = None
    metrics_note: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def windows(self) -> list[SoakWindow]:
        return summarize_windows(self.samples, self.duration_s)

    @property
    def failures(self) -> int:
        return sum(1 for s in self.samples if not s.ok)

    def e2e_ms(self, q: float) -> float | None:
        return percentile([s.e2e_s * 1000.0 for s in self.samples if s.ok and s.e2e_s is not None], q)

    def late(self) -> tuple[int, float]:
        """Requests sent after they were due (every worker busy), and the largest delay in seconds."""
        delays = [s.late_s for s in self.samples if s.late_s > 0.05]
        return len(delays), max(delays, default=0.0)

    def rising_error_rate(self) -> str | None:
        """The error rate of the last window with requests above the first's, said in words; else None."""
        used = [w for w in self.windows if w.requests]
        if len(used) < 2 or used[-1].error_rate <= used[0].error_rate:
            return None
        first, last = used[0], used[-1]
        return (f"the error rate rose from {first.error_rate:.0%} ({first.failures}/{first.requests}) in the first "
                f"window ({first.start_s:.0f}-{first.end_s:.0f} s) to {last.error_rate:.0%} "
                f"({last.failures}/{last.requests}) in the last ({last.start_s:.0f}-{last.end_s:.0f} s)")

    def problems(self) -> list[str]:
        """Why the soak fails: failed requests, one problem per kind (with its first example), a rising error rate.

        Each kind is its own problem, so an expected-failure record of one kind (a known 503,
        say) leaves another kind beside it failing the soak.
        """
        problems = []
        failed = [s for s in self.samples if not s.ok]
        kinds = Counter(_kind(sample) for sample in failed)
        first: dict[str, SoakSample] = {}
        for sample in failed:
            first.setdefault(_kind(sample), sample)
        for kind, count in kinds.most_common():
            example = first[kind]
            problems.append(f"{count}/{len(self.samples)} soak requests failed: {kind or 'no error text'} x{count} "
                            f"(first: request {example.index}, {example.kind}, due at {example.due_s:.1f} s: "
                            f"{(example.error or '')[:200]})")
        rising = self.rising_error_rate()
        if rising:
            problems.append(rising)
        return problems

    def summary(self) -> dict[str, Any]:
        """The figures a comparison shows (no per-request rows)."""
        late, worst = self.late()
        return {
            "minutes_planned": self.settings.minutes,
            "minutes_observed": self.duration_s / 60.0,
            "ended_early": self.ended_early,
            "rate_per_s": self.settings.rate_per_s,
            "image_share": self.settings.image_share,
            "workers": self.settings.workers,
            "requests": len(self.samples),
            "image_requests": sum(1 for s in self.samples if s.kind == "image"),
            "failures": self.failures,
            "p50_e2e_ms": self.e2e_ms(50),
            "p95_e2e_ms": self.e2e_ms(95),
            "late_requests": late,
            "max_late_s": worst,
            "rising_error_rate": self.rising_error_rate(),
            "windows": [{**asdict(w), "error_rate": w.error_rate} for w in self.windows],
            "metrics_start": self.metrics_start,
            "metrics_end": self.metrics_end,
            "metrics_note": self.metrics_note,
            "notes": list(self.notes),
        }

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary(), "requests_detail": [asdict(s) for s in self.samples]}

    def window_table(self) -> Table:
        """A row per observation window: its span, requests, failures, error rate, median and P95 E2E."""
        return Table.of("Soak: observation windows",
                        ["window s", "requests", "failed", "errors", "median E2E ms", "P95 E2E ms"],
                        [[f"{w.start_s:.0f}-{w.end_s:.0f}", str(w.requests), str(w.failures), f"{w.error_rate:.0%}",
                          _ms(w.p50_e2e_ms), _ms(w.p95_e2e_ms)] for w in self.windows])

    def table_lines(self) -> list[str]:
        """Totals, the windows, and the metrics at the start and the end, for the terminal."""
        late, worst = self.late()
        images = sum(1 for s in self.samples if s.kind == "image")
        lines = [
            f"{len(self.samples)} requests ({images} with an image) in {self.duration_s / 60:.2f} min at "
            f"{self.settings.rate_per_s:g} req/s, up to {self.settings.workers} workers: {self.failures} failed, "
            f"E2E median {_ms(self.e2e_ms(50))} ms, P95 {_ms(self.e2e_ms(95))} ms"
            + (f"; {late} sent late (all workers busy, up to {worst:.1f} s)" if late else ""),
        ]
        if self.ended_early:
            lines.append(f"ENDED EARLY: {self.ended_early} (planned {self.settings.minutes:g} min)")
        lines += terminal.aligned_lines(self.window_table(), (14, 9, 8, 8, 15, 12), right=range(1, 6))
        if self.metrics_note:
            lines.append(f"metrics: {self.metrics_note}")
        if self.metrics_start is not None or self.metrics_end is not None:
            start, end = self.metrics_start or {}, self.metrics_end or {}
            for name in sorted(set(start) | set(end)):
                lines.append(f"  {name}: start {_figure(name, start.get(name))}, end {_figure(name, end.get(name))}")
        lines += [f"note: {note}" for note in self.notes]
        return lines


def _kind(sample: SoakSample) -> str:
    """A failed request's kind of error: its error's words up to the first colon (``HTTP 503``, ``timeout``)."""
    return sample.error.split(":", 1)[0] if sample.error else ""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _figure(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    if name.split("{", 1)[0].endswith("_bytes"):
        return f"{value / 1e6:.1f} MB"
    return f"{value:g}"


async def run_soak(settings: SoakSettings, send: Send, *, stop: asyncio.Event | None = None,
                   progress: Progress | None = None, progress_every_s: float = 30.0,
                   clock: Callable[[], float] = time.monotonic) -> tuple[list[SoakSample], float, bool]:
    """Send the soak's requests on schedule; returns the samples, the observed seconds, and whether it stopped early.

    ``send(index, kind)`` performs one request and returns ``(e2e_s, error)``, ``error``
    None for a success; it must not raise. ``stop`` ends the soak early: nothing more
    is sent, the requests in flight are awaited.
    """
    stop = stop or asyncio.Event()
    say: Progress = progress or (lambda _line: None)
    workers = asyncio.Semaphore(settings.workers)
    samples: list[SoakSample] = []
    tasks: set[asyncio.Task[None]] = set()
    start = clock()
    next_progress = progress_every_s

    async def one(index: int, kind: str, due: float, sent: float) -> None:
        try:
            e2e, error = await send(index, kind)
        except Exception as exc:  # a bug in send must still show as a failed request, not vanish
            e2e, error = None, f"client error: {type(exc).__name__}: {exc}"
        finally:
            workers.release()
        samples.append(SoakSample(index, kind, due, sent, e2e, error))

    index = 0
    while not stop.is_set():
        due = index / settings.rate_per_s
        if due >= settings.duration_s:
            break
        delay = start + due - clock()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
                break
            except (asyncio.TimeoutError, TimeoutError):
                pass
        acquire = asyncio.ensure_future(workers.acquire())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({acquire, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not acquire.done():
            acquire.cancel()
            break
        if stop.is_set():
            workers.release()
            break
        kind = "image" if is_image(index, settings.image_share) else "text"
        task = asyncio.ensure_future(one(index, kind, due, clock() - start))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        index += 1
        elapsed = clock() - start
        if elapsed >= next_progress:
            next_progress += progress_every_s
            failed = sum(1 for s in samples if not s.ok)
            e2e = percentile([s.e2e_s * 1000.0 for s in samples if s.ok and s.e2e_s is not None], 50)
            say(f"{elapsed / 60:.1f}/{settings.minutes:g} min: {len(samples)} requests done, {failed} failed, "
                f"median E2E {'-' if e2e is None else f'{e2e:.0f} ms'}")
    early = stop.is_set()
    if tasks:
        await asyncio.gather(*tasks)
    observed = min(clock() - start, settings.duration_s) if early else settings.duration_s
    samples.sort(key=lambda s: s.index)
    return samples, observed, early


# Strings, not type=float: soak_settings_from_options checks them and names the option in its error.
OPTIONS = (
    OptionSpec("--soak-minutes", default=None, metavar="N",
               help="Run the mixed-traffic soak (pytest -m soak) for N minutes (default: the soak is off)"),
    OptionSpec("--soak-rate", default="0.5", metavar="R", help="Soak requests per second (default: 0.5)"),
    OptionSpec("--soak-image-share", default="0.2", metavar="F",
               help="Share of soak requests carrying an image (default: 0.2)"),
    OptionSpec("--soak-workers", default="4", metavar="N", help="Soak requests in flight at most (default: 4)"),
)


def from_options(values: Any) -> SoakSettings | None:
    """The soak settings from the parsed options (``config.option``); None when the soak is off."""
    return soak_settings_from_options(minutes=values.soak_minutes, rate=values.soak_rate, workers=values.soak_workers,
                                      image_share=values.soak_image_share)
