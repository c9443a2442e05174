"""Open-loop cells: requests sent on a schedule of arrivals, whether or not earlier ones finished.

A closed-loop round (``generator.run_round``) holds a fixed number of requests in
flight, so a slow engine slows the client down and never sees a queue. An open-loop
cell sends request ``i`` at its due time (:mod:`engine_acceptance.load.arrivals`),
as production traffic arrives. The schedule is kept when the engine falls behind:
each request's due time and actual send time are recorded, a send more than
:data:`~engine_acceptance.load.arrivals.LATE_S` behind is counted late and reported,
and nothing is shifted to make the figures look better. The pool of connections has
no limit, so a due request never waits for a free connection inside the client
(that wait would be invisible lateness); the requests in flight at each send are
recorded instead, so a growing queue shows.

Connections are opened before the schedule starts (:func:`open_connections`), as many
as the cell is expected to hold at once: opening one is the client's costliest step
(~0.6 ms of CPU in aiohttp, socket and connect), and a send due while another request
opens its connection waits for it in the one event loop, so connections opened
mid-cell made sends late by milliseconds (measured with the loop's slow steps: most
steps over 0.5 ms were connection opens).

Everything else is the closed-loop generator's: bodies encoded before the cell,
reads stamped on socket arrival, parsing and the metrics after the cell
(``generator.analyse_round``). TTFT, TPOT and E2E count from the actual send, as
``vllm bench serve`` counts them; the lateness says how far that was from the due time.

Spread over worker processes (``--load-processes``, ``generator.SpreadGenerator``),
worker k sends requests k, k+W, ... at their own due times from one origin on the shared
monotonic clock; the parent merges them by request index (:func:`merge_open_loop`), so
the lateness is each request's own, and the requests in flight at each send are counted
again from every process's stamps.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.arrivals import LATE_S, arrival_offsets, format_rate, sleep_until
import numpy as np

from engine_acceptance.load.generator import (
    Cell,
    LoadGenerator,
    PromptSource,
    RawRequest,
    RawRound,
    SpreadGenerator,
    analyse_round,
    build_bodies,
    merge_rounds,
    run_round,
    send_request,
)
from engine_acceptance.load.metrics import RequestRecord, RoundSummary, percentile, request_samples
from engine_acceptance.load.process_plan import ASSUMED_STREAM_EVENTS_PER_S, ProcessPlan, plan_processes
from engine_acceptance.load.output_split import SplitCell, cell_of_round, split_figures
from engine_acceptance.load.spec_decode import RoundCounters, SpecDecodeCounters
from engine_acceptance.load.workers import split_indices
from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.run_bundle import cell_entry

__all__ = ["OpenLoopRound", "RateCell", "RateCellResult", "SendTiming", "connections_to_open", "in_flight_at_sends",
           "measure_rate_cell", "merge_open_loop", "open_connections", "run_open_loop"]

Clock = Callable[[], float]
Wait = Callable[[float], Awaitable[None]]
Progress = Callable[[str], None]

# Requests in flight grow under load beyond what the warm-up's latency predicts (Little's law
# at the warm-up's E2E): room for that before the cell, so few connections open mid-cell.
LOAD_LATENCY_ROOM = 1.5


@dataclass(frozen=True)
class RateCell:
    """One shape at one arrival rate: ``128/32@4rps`` sends 128-token prompts for 32 tokens, 4 a second."""

    input_tokens: int
    output_tokens: int
    rate: float
    requests: int
    burstiness: float = 1.0
    seed: int = 0
    warmup_requests: int = 4
    # "completions" (token-id prompts of exact length, as the throughput smoke) or "chat" (text prompts of an
    # estimated length, one user message each: where a reasoning model reasons and answers apart).
    endpoint: str = "completions"

    @property
    def chat(self) -> bool:
        return self.endpoint == "chat"

    @property
    def path(self) -> str:
        return "/chat/completions" if self.chat else "/completions"

    @property
    def workload(self) -> str:
        return f"{self.input_tokens}/{self.output_tokens}"

    @property
    def key(self) -> str:
        return f"{self.workload}@{format_rate(self.rate)}rps"

    def offsets(self) -> tuple[float, ...]:
        return arrival_offsets(self.requests, self.rate, burstiness=self.burstiness, seed=self.seed)

    def plan_processes(self, asked: int | None) -> ProcessPlan:
        """How many client processes send this cell (``process_plan.py``): rate x output tokens, and the rate."""
        if math.isinf(self.rate):
            return plan_processes(asked, self.requests * ASSUMED_STREAM_EVENTS_PER_S, streams=self.requests,
                                  how=f"all {self.requests} requests at once x {ASSUMED_STREAM_EVENTS_PER_S:g} "
                                      f"events/s assumed")
        return plan_processes(asked, self.rate * self.output_tokens, streams=self.requests,
                              how=f"{format_rate(self.rate)} req/s x {self.output_tokens} output tokens",
                              sends_per_s=self.rate)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "request_rate": format_rate(self.rate), "burstiness": format_rate(self.burstiness),
                "load_seed": self.seed, "requests": self.requests, "warmup_requests": self.warmup_requests,
                # Only when chat: cells of bundles written before the endpoint could be chosen keep their shape.
                **({"endpoint": self.endpoint} if self.chat else {})}


@dataclass(frozen=True)
class SendTiming:
    """Due and actual send times of a cell's requests, in seconds from its start."""

    due_s: tuple[float, ...]
    sent_s: tuple[float, ...]
    # Requests in flight (sent, not finished) just before each send.
    in_flight: tuple[int, ...]

    @property
    def lateness_s(self) -> tuple[float, ...]:
        return tuple(sent - due for due, sent in zip(self.due_s, self.sent_s))

    @property
    def late(self) -> int:
        return sum(1 for lateness in self.lateness_s if lateness > LATE_S)

    def lateness_ms(self, q: float) -> float | None:
        value = percentile(self.lateness_s, q)
        return None if value is None else value * 1000.0

    @property
    def max_in_flight(self) -> int:
        return max(self.in_flight, default=0)

    def as_dict(self) -> dict[str, Any]:
        return {"late_threshold_ms": LATE_S * 1000.0, "late_sends": self.late,
                "lateness_p50_ms": self.lateness_ms(50), "lateness_p99_ms": self.lateness_ms(99),
                "lateness_max_ms": self.lateness_ms(100), "max_in_flight": self.max_in_flight,
                "due_s": list(self.due_s), "sent_s": list(self.sent_s), "in_flight_at_send": list(self.in_flight)}


@dataclass
class OpenLoopRound:
    """The hot loop's output: the raw round (its start is the schedule's origin) and the sends."""

    raw: RawRound
    offsets: tuple[float, ...]
    in_flight: tuple[int, ...]

    def timing(self) -> SendTiming:
        origin = self.raw.start
        return SendTiming(self.offsets, tuple(r.start - origin for r in self.raw.requests), self.in_flight)


async def run_open_loop(session: Any, url: str, bodies: Sequence[bytes], headers: dict[str, str],
                        offsets: Sequence[float], *, clock: Clock = time.monotonic, wait: Wait | None = None,
                        on_done: Callable[[int], None] | None = None, origin: float | None = None
                        ) -> OpenLoopRound:
    """Send body ``i`` at ``start + offsets[i]``; nothing but waits, I/O and stamps meanwhile.

    ``session`` is an aiohttp session (a fake one in the self-tests).
    ``wait(deadline)`` returns at a ``clock`` time (:func:`sleep_until` by default;
    a scripted one in the self-tests). A request whose time has passed goes at once.
    ``origin``: the schedule's start on ``clock`` (a worker process's share of a spread
    cell starts at the common one); by default, now.
    """
    if len(bodies) != len(offsets):
        raise ValueError(f"{len(bodies)} bodies for {len(offsets)} due times")
    wait_until = wait or functools.partial(sleep_until, clock=clock)
    records = [RawRequest() for _ in bodies]
    in_flight_at_send: list[int] = []
    in_flight = done = 0

    async def one(body: bytes, record: RawRequest) -> None:
        nonlocal in_flight, done
        try:
            await send_request(session, url, body, headers, clock, record)
        finally:
            in_flight -= 1
            done += 1
            if on_done is not None:
                on_done(done)

    # As in run_round: no cyclic collection in the middle of the cell.
    collecting = gc.isenabled()
    gc.disable()
    tasks: list[asyncio.Task[None]] = []
    try:
        cpu = time.process_time()
        start = clock() if origin is None else origin
        for body, record, offset in zip(bodies, records, offsets):
            await wait_until(start + offset)
            in_flight_at_send.append(in_flight)
            in_flight += 1
            tasks.append(asyncio.ensure_future(one(body, record)))
            # One loop pass: the new request stamps its send and starts writing now, not after
            # the next ones due at the same moment (a burst, or a schedule already behind).
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        end = clock()
        cpu = time.process_time() - cpu
    finally:
        for task in tasks:
            task.cancel()
        if collecting:
            gc.enable()
    return OpenLoopRound(RawRound(start, end, records, cpu), tuple(offsets), tuple(in_flight_at_send))


def connections_to_open(rate: float, requests: int, e2e_s: float | None) -> int:
    """Connections a cell is expected to hold at once: rate x E2E (Little's law), with room.

    The requests in flight at a rate are a Poisson count of mean ``m = rate x E2E``; ``m +
    4 sqrt(m)`` is above it at all but ~0.01% of moments. Never more than the cell's requests;
    all of them when they are all due at once or nothing says how long a request takes.
    """
    if math.isinf(rate) or e2e_s is None:
        return requests
    mean = rate * e2e_s * LOAD_LATENCY_ROOM
    return min(requests, math.ceil(mean + 4 * math.sqrt(mean)) + 1)


async def open_connections(session: Any, url: str, headers: dict[str, str], count: int) -> int:
    """Open ``count`` kept-alive connections to the engine before a schedule; how many opened.

    ``count`` GETs of ``url`` (the engine's ``/models``) at once, each read to its end so its
    connection goes back to the pool idle. A GET that fails opens nothing and is not retried:
    the number opened is reported, and the cell opens what it lacks as it goes.
    """
    async def one() -> None:
        async with session.get(url, headers=headers) as response:
            await response.read()

    outcomes = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    return sum(1 for outcome in outcomes if not isinstance(outcome, BaseException))


def in_flight_at_sends(requests: Sequence[RawRequest]) -> tuple[int, ...]:
    """For each request, how many others were sent before it and had not ended when it was sent.

    Counted from the stamps alone, so it holds across worker processes (one clock): the
    requests sent earlier (by send stamp, then index) minus those of them that ended at
    or before this send.
    """
    if not requests:
        return ()
    starts = np.array([r.start for r in requests])
    ends = np.sort(np.array([r.end for r in requests]))
    order = np.lexsort((np.arange(len(requests)), starts))
    sent_before = np.empty(len(requests), dtype=int)
    sent_before[order] = np.arange(len(requests))
    ended = np.searchsorted(ends, starts, side="right")
    return tuple(int(max(0, n)) for n in sent_before - ended)


def merge_open_loop(shares: Sequence[OpenLoopRound], indices: Sequence[Sequence[int]], offsets: Sequence[float],
                    origin: float) -> OpenLoopRound:
    """The workers' parts of one schedule as one cell: requests by index, due times from the whole schedule."""
    for k, (share, where) in enumerate(zip(shares, indices)):
        if tuple(share.offsets) != tuple(offsets[i] for i in where):
            raise ValueError(f"worker {k} sent on due times that are not its share of the schedule")
    raw = merge_rounds([share.raw for share in shares], indices, origin)
    return OpenLoopRound(raw, tuple(offsets), in_flight_at_sends(raw.requests))


async def _opened_share(generator: LoadGenerator, count: int, _start_at: float) -> int:
    """In a worker process: open its share of the cell's connections (:func:`open_connections`)."""
    return await open_connections(generator.session, generator.target.v1_url + "/models", generator.headers, count)


async def _scheduled_share(generator: LoadGenerator, job: tuple[list[bytes], list[float]], start_at: float
                           ) -> tuple[OpenLoopRound, str]:
    """In a worker process: its requests of the schedule, each at ``start_at`` + its due offset."""
    bodies, offsets = job
    sent = await run_open_loop(generator.session, generator.url, bodies, generator.headers, offsets,
                               origin=start_at)
    return sent, generator.stamping


async def _spread_open_loop(generator: SpreadGenerator, bodies: Sequence[bytes], offsets: Sequence[float]
                            ) -> OpenLoopRound:
    indices = split_indices(len(bodies), generator.processes)
    results, origin = await generator.each(_scheduled_share, [([bodies[i] for i in where],
                                                               [offsets[i] for i in where]) for where in indices])
    generator.stamping = results[0][1]
    return merge_open_loop([sent for sent, _ in results], indices, offsets, origin)


@dataclass
class RateCellResult:
    """One open-loop cell: each request's record, the cell's figures and how the schedule was kept."""

    cell: RateCell
    records: list[RequestRecord]
    summary: RoundSummary
    sends: SendTiming
    warmup: RoundSummary | None
    stamping: str = "task read"
    input_exact: bool = True
    plan: ProcessPlan | None = None
    # Connections opened before the schedule, and how many were wanted (open_connections).
    connections: tuple[int, int] = (0, 0)
    # Why it has no speculative-decoding acceptance (spec_decode.py); None: it has one, or none was asked.
    spec_decode_note: str | None = None

    @property
    def processes(self) -> int:
        return self.plan.processes if self.plan is not None else 1

    @property
    def duration_s(self) -> float:
        """From the schedule's origin to the end of the last request (goodput's denominator)."""
        return self.summary.wall_s

    def split_cell(self) -> SplitCell:
        """What the output split's columns read (a completions cell has no reasoning field)."""
        return cell_of_round(self.cell.key, self.summary, self.records, chat=self.cell.chat,
                             spec_decode_note=self.spec_decode_note)

    def bundle_entry(self, ignore_eos: bool, figures: dict[str, Any]) -> dict[str, Any]:
        """The cell for the run bundle: its schedule's shape, every measured request's latencies, ``figures``."""
        shape = {**self.cell.as_dict(), "ignore_eos": ignore_eos}
        return cell_entry("slo", self.cell.key, shape, samples=request_samples(self.records, chat=self.cell.chat),
                          figures=figures)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.cell.as_dict(),
            "input_tokens_exact": self.input_exact,
            "client_stamping": self.stamping,
            **(self.plan.as_dict() if self.plan is not None else {"client_processes": 1}),
            "duration_s": self.duration_s,
            "connections_opened_before": self.connections[0],
            "connections_wanted_before": self.connections[1],
            "spec_decode_note": self.spec_decode_note,
            "output_split": split_figures(self.split_cell()),
            "summary": self.summary.as_dict(),
            "sends": self.sends.as_dict(),
            "warmup": self.warmup.as_dict() if self.warmup else None,
            "requests": [record.as_dict() for record in self.records],
        }


async def measure_rate_cell(target: EngineTarget, cell: RateCell, prompts: PromptSource, *, ignore_eos: bool,
                            first_index: int = 0, progress: Progress | None = None,
                            clock: Clock = time.monotonic, processes: int | None = 1,
                            counters: SpecDecodeCounters | None = None) -> RateCellResult:
    """Warm the connections up (not counted), then send the cell's requests on its schedule.

    ``processes``: client processes (``--load-processes``), None for auto (``RateCell.plan_processes``).
    ``counters``: the engine's speculative-decoding counters, read before the schedule and after it.
    """
    say: Progress = progress or (lambda _line: None)
    plan = cell.plan_processes(processes)
    say(f"{cell.key}: sent by {plan.describe()}")
    shape = Cell(cell.input_tokens, cell.output_tokens, 1, cell.requests, cell.warmup_requests)
    warm = build_bodies(shape, prompts, model=target.model, ignore_eos=ignore_eos, count=cell.warmup_requests,
                        first_index=first_index, chat=cell.chat)
    bodies = build_bodies(shape, prompts, model=target.model, ignore_eos=ignore_eos, count=cell.requests,
                          first_index=first_index + cell.warmup_requests, chat=cell.chat)
    offsets = cell.offsets()
    warmup: RoundSummary | None = None
    around = RoundCounters(counters)
    if plan.processes > 1:
        async with SpreadGenerator(target, 0, plan.processes, path=cell.path) as spread:
            if warm:
                _, warmup = analyse_round(await spread.round(warm, concurrency=len(warm)), chat=cell.chat)
                say(f"{cell.key} warm-up: {warmup.completed}/{warmup.requests} requests done (not counted)")
            wanted = _connections_for(cell, warmup)
            share = math.ceil(wanted / plan.processes)
            opened_each, _ = await spread.each(_opened_share, [share] * plan.processes)
            opened = _say_opened(say, cell, sum(opened_each), share * plan.processes)
            await around.start()
            sent = await _spread_open_loop(spread, bodies, offsets)
            stamping = spread.stamping
    else:
        async with LoadGenerator(target, 0, clock=clock, path=cell.path) as generator:
            if warm:
                # All at once: opens as many connections as the cell is expected to need at first.
                raw_warm = await run_round(generator.session, generator.url, warm, generator.headers,
                                           concurrency=len(warm), clock=clock)
                _, warmup = analyse_round(raw_warm, chat=cell.chat)
                say(f"{cell.key} warm-up: {warmup.completed}/{warmup.requests} requests done (not counted)")
            wanted = _connections_for(cell, warmup)
            opened = _say_opened(say, cell, await open_connections(
                generator.session, target.v1_url + "/models", generator.headers, wanted), wanted)
            await around.start()
            sent = await run_open_loop(generator.session, generator.url, bodies, generator.headers, offsets,
                                       clock=clock)
            stamping = generator.stamping
    records, summary = analyse_round(sent.raw, chat=cell.chat)
    summary = await around.finish(summary)
    timing = sent.timing()
    errors = ", ".join(f"{k}={v}" for k, v in sorted(summary.errors_by_kind.items())) or "no errors"
    say(f"{cell.key}: {summary.completed}/{summary.requests} requests done, {errors}, {summary.wall_s:.1f} s; "
        f"sends late by more than {LATE_S * 1000:g} ms: {timing.late}, lateness P99 "
        f"{timing.lateness_ms(99) or 0.0:.3f} ms, at most {timing.max_in_flight} in flight")
    return RateCellResult(cell, records, summary, timing, warmup, stamping, input_exact=prompts.exact, plan=plan,
                          connections=opened, spec_decode_note=around.unavailable)


def _connections_for(cell: RateCell, warmup: RoundSummary | None) -> int:
    """:func:`connections_to_open` at the warm-up's P99 E2E (none without a warm-up that answered)."""
    e2e_ms = warmup.metrics.get("p99_e2e_ms") if warmup is not None else None
    return connections_to_open(cell.rate, cell.requests, None if e2e_ms is None else e2e_ms / 1000.0)


def _say_opened(say: Progress, cell: RateCell, opened: int, wanted: int) -> tuple[int, int]:
    say(f"{cell.key}: {opened} of {wanted} connections opened before the schedule")
    return opened, wanted
