"""Fixed-concurrency load generator for the throughput smoke (TEST-PLAN §7).

A cell is one shape (input/output tokens) at one concurrency with a fixed number of
requests per round. A round sends every request through one aiohttp session whose
pool is sized to the concurrency, holding at most ``concurrency`` in flight with a
semaphore and no arrival-rate limit. Warm-up requests run first and are not counted.

Keeping the client out of the numbers: every request body is built and encoded to
bytes before the round; during the round a request only stamps each read with a
monotonic clock and keeps the bytes. Parsing (``sse.py``) and reassembly
(``reassembly.py``, the one reassembly the functional clients use too) happen
after the round, replaying the reads with their stamps, so a request's timing
does not pay for another request's JSON parsing. Reads are stamped when their bytes
arrive on the socket (the connection protocol's ``data_received``), not when the
reading task gets its turn; garbage collection waits until the round is over.
Each round records the client's CPU share, so a saturated client is visible.

Prompts are token ids of exact length, cut from a text the engine itself
tokenized (``/tokenize``) or a local tokenizer named by the model profile; each
request starts at a different offset so no two share a prefix (no prefix-cache
hits). An engine with neither gets text prompts of an estimated length instead
(:class:`engine_acceptance.load.prompts.TextPrompts`, same corpus, same
offsets); either is a :class:`PromptSource`, and the round does not tell them apart.
Figures: :mod:`engine_acceptance.load.metrics`.

Above the events per second one process times accurately, a cell's rounds are spread
over worker processes (:class:`SpreadGenerator`, :mod:`engine_acceptance.load.workers`,
``--load-processes``): each runs this same hot loop on its share of the requests, from
one start time on the shared monotonic clock, and the parent merges their raw requests
back into one round in request order (:func:`merge_rounds`) before anything is computed,
so every percentile is over all the samples.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import aiohttp
from aiohttp.client_proto import ResponseHandler

from engine_acceptance.wire.client import IDLE_CONNECTION_REUSE_S
from engine_acceptance.wire.tokenize_api import TokenizeApi
from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.load.arrivals import sleep_until
from engine_acceptance.load.metrics import (
    CellSummary,
    RequestRecord,
    RoundSummary,
    record_request,
    request_samples,
    summarize_cell,
    summarize_round,
)
from engine_acceptance.load.process_plan import ASSUMED_STREAM_EVENTS_PER_S, ProcessPlan, plan_processes
from engine_acceptance.load.output_split import SplitCell, cell_of_summary, split_figures
from engine_acceptance.load.spec_decode import RoundCounters, SpecDecodeCounters
from engine_acceptance.load.workers import WorkerPool, split_concurrency, split_indices
from engine_acceptance.wire.reassembly import reassemble_stream
from engine_acceptance.wire.sse import SSEEvent, SSEParser
from engine_acceptance.errors import EngineAcceptanceError
from engine_acceptance.run_bundle import cell_entry

__all__ = [
    "Cell",
    "CellResult",
    "LoadGenerator",
    "PromptIds",
    "PromptSource",
    "PromptSourceError",
    "ProcessUse",
    "RawRequest",
    "RawRound",
    "SpreadGenerator",
    "analyse_round",
    "build_bodies",
    "connection_note",
    "measure_cell",
    "merge_rounds",
    "replay_events",
    "run_round",
    "send_request",
]

Clock = Callable[[], float]
Progress = Callable[[str], None]
# Long rounds (a slow engine, long outputs) say they are alive this often.
PROGRESS_EVERY_S = 15.0

# Words for the prompt corpus: common English, so a real tokenizer makes ordinary
# tokens of them (no rare ids, no special tokens).
_WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community "
    "name president team minute idea kid body information back parent face others level office door health "
    "person art war history party result change morning reason research girl guy moment air teacher force"
).split()


@dataclass(frozen=True)
class Cell:
    """One shape at one concurrency: ``128/128@4`` sends 128-token prompts for 128 tokens, 4 at a time."""

    input_tokens: int
    output_tokens: int
    concurrency: int
    requests: int
    warmup_requests: int

    @property
    def workload(self) -> str:
        return f"{self.input_tokens}/{self.output_tokens}"

    @property
    def key(self) -> str:
        return f"{self.workload}@{self.concurrency}"

    def plan_processes(self, asked: int | None) -> ProcessPlan:
        """How many client processes measure this cell (``process_plan.py``): every stream busy."""
        return plan_processes(asked, self.concurrency * ASSUMED_STREAM_EVENTS_PER_S,
                              streams=min(self.concurrency, self.requests),
                              how=f"{self.concurrency} streams x {ASSUMED_STREAM_EVENTS_PER_S:g} events/s assumed")

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "concurrency": self.concurrency, "requests_per_round": self.requests,
                "warmup_requests": self.warmup_requests}


class PromptSourceError(EngineAcceptanceError):
    """Exact-length prompts cannot be built for this engine (no tokenizer reachable)."""


class PromptSource(Protocol):
    """Where a cell's prompts come from: token ids (exact length) or text (estimated length)."""

    #: True when ``prompt(n, i)`` is exactly n tokens; False when n is an estimate.
    exact: bool
    source: str
    # How the prompts were made, without where a file lies ("engine tokenize", "local tokenizer",
    # "text"): two runs' cells of one origin sent the same kind of prompts (run bundles compare them).
    origin: str
    seed: int

    def prompt(self, length: int, index: int) -> list[int] | str: ...


@dataclass(frozen=True)
class PromptIds:
    """A tokenized corpus from which exact-length, mutually distinct prompts are cut."""

    corpus: tuple[int, ...]
    source: str
    seed: int
    origin: str = "engine tokenize"
    exact: ClassVar[bool] = True

    def prompt(self, length: int, index: int) -> list[int]:
        """``length`` ids starting at an offset of its own (wrapping around the corpus)."""
        size = len(self.corpus)
        start = (self.seed + index) % size
        ids = list(self.corpus[start:start + length])
        while len(ids) < length:
            ids.extend(self.corpus[: length - len(ids)])
        return ids

    @staticmethod
    def corpus_text(words: int, seed: int) -> str:
        rng = random.Random(seed)
        return " ".join(rng.choice(_WORDS) for _ in range(words))

    @classmethod
    async def from_engine(cls, target: EngineTarget, tokenize: TokenizeApi | str, *, min_tokens: int,
                          seed: int | None = None) -> "PromptIds":
        """Tokenize a generated text with the engine's own ``/tokenize`` (no special tokens), in the body it takes."""
        seed = random.randrange(1 << 30) if seed is None else seed
        text = cls.corpus_text(min_tokens + 1024, seed)
        api = tokenize if isinstance(tokenize, TokenizeApi) else TokenizeApi(tokenize)
        tokenize_path = api.endpoint
        url = target.base_url.rstrip("/") + tokenize_path
        body = api.text_request(target.model, text)
        timeout = aiohttp.ClientTimeout(total=target.timeouts.total, sock_connect=target.timeouts.connect)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            try:
                async with session.post(url, json=body, headers=target.auth_headers()) as response:
                    raw = await response.read()
                    status = response.status
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise PromptSourceError(f"POST {tokenize_path} failed: {type(exc).__name__}: {exc}") from exc
        try:
            ids = json.loads(raw).get("tokens") if status == 200 else None
        except (ValueError, AttributeError):
            ids = None
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids) or len(ids) < min_tokens:
            raise PromptSourceError(f"POST {tokenize_path} answered HTTP {status} without a list of at least "
                                    f"{min_tokens} token ids: {raw[:200]!r}")
        return cls(tuple(ids), f"engine {tokenize_path}", seed % len(ids))

    @classmethod
    def from_tokenizer_file(cls, path: str, *, min_tokens: int, seed: int | None = None) -> "PromptIds":
        """Tokenize locally with a ``tokenizer.json`` (the model profile's tokenizer)."""
        from tokenizers import Tokenizer

        seed = random.randrange(1 << 30) if seed is None else seed
        try:
            tokenizer = Tokenizer.from_file(path)
        except Exception as exc:  # tokenizers raises its own untyped Exception
            raise PromptSourceError(f"cannot load tokenizer {path}: {exc}") from exc
        ids = tokenizer.encode(cls.corpus_text(min_tokens + 1024, seed), add_special_tokens=False).ids
        return cls(tuple(ids), f"local tokenizer {path}", seed % len(ids), origin="local tokenizer")


def build_bodies(cell: Cell, prompts: PromptSource, *, model: str, ignore_eos: bool, count: int,
                 first_index: int, chat: bool = False) -> list[bytes]:
    """The encoded request bodies of one round, ready to send.

    ``chat``: chat requests (``/v1/chat/completions``), each prompt the one user message; they
    carry text, so the prompts must be text (:class:`~engine_acceptance.load.prompts.TextPrompts`).
    """
    bodies = []
    for i in range(count):
        prompt = prompts.prompt(cell.input_tokens, first_index + i)
        if chat and not isinstance(prompt, str):
            raise ValueError("chat requests carry text: build them from text prompts, not token ids")
        body: dict[str, Any] = {
            "model": model,
            **({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt}),
            "max_tokens": cell.output_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if ignore_eos:
            body["ignore_eos"] = True
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


@dataclass
class RawRequest:
    """What the hot loop keeps: when it started and ended, and each read with its stamp."""

    start: float = 0.0
    end: float = 0.0
    status: int | None = None
    content_type: str | None = None
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error_kind: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ProcessUse:
    """One worker process's part of a spread round: its CPU time and its own round's wall time."""

    cpu_s: float
    wall_s: float

    @property
    def cpu_fraction(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class RawRound:
    start: float
    end: float
    requests: list[RawRequest]
    cpu_s: float = 0.0
    # One entry per worker process when the round was spread over several (merge_rounds); empty: this process.
    processes: tuple[ProcessUse, ...] = ()

    @property
    def wall_s(self) -> float:
        return self.end - self.start


def merge_rounds(shares: Sequence[RawRound], indices: Sequence[Sequence[int]], origin: float) -> RawRound:
    """The rounds of W worker processes as one: each request back at its index, from the shared origin.

    ``indices[k]`` are the request indices worker k sent (``workers.split_indices``), in
    the order of its ``requests``. Stamps are kept as they are (one clock for every
    process); the round starts at the common ``origin`` and ends with the last worker.
    Nothing is summarised here: the analysis runs over the merged requests, so the
    percentiles are those of all the samples.
    """
    if len(shares) != len(indices):
        raise ValueError(f"{len(shares)} worker rounds for {len(indices)} index lists")
    count = sum(len(share) for share in indices)
    slots: list[RawRequest | None] = [None] * count
    for k, (share, where) in enumerate(zip(shares, indices)):
        if len(share.requests) != len(where):
            raise ValueError(f"worker {k} returned {len(share.requests)} requests for {len(where)} indices")
        for index, request in zip(where, share.requests):
            if not 0 <= index < count or slots[index] is not None:
                raise ValueError(f"request index {index} is out of range or given twice: not a partition")
            slots[index] = request
    requests = [request for request in slots if request is not None]
    if len(requests) != count:
        raise ValueError("the workers' indices leave gaps: not a partition")
    return RawRound(origin, max((share.end for share in shares), default=origin), requests,
                    sum(share.cpu_s for share in shares),
                    tuple(ProcessUse(share.cpu_s, share.wall_s) for share in shares))


class _Session(Protocol):
    def post(self, url: str, *, data: bytes, headers: dict[str, str]) -> Any: ...


class _ArrivalStampingHandler(ResponseHandler):
    """aiohttp's connection protocol, noting when bytes arrive from the socket.

    When a burst of events arrives on many connections at once, the event loop
    first runs every connection's ``data_received`` and only then resumes the
    reading tasks one after another: a stamp taken in the task is late by the
    whole burst's parsing. Stamped here, a read keeps the time its bytes arrived.
    When several arrivals are read at once, the latest one stamps the read: no
    byte is ever stamped before it could have been seen (errors stay one-sided).
    """

    arrived_at: float | None = None

    def data_received(self, data: bytes) -> None:
        # aiohttp also calls this with b"" when the reader resumes: not an arrival.
        if data:
            self.arrived_at = time.monotonic()
        super().data_received(data)


def _arrival_source(response: Any) -> _ArrivalStampingHandler | None:
    connection = getattr(response, "connection", None)
    protocol = getattr(connection, "protocol", None)
    return protocol if isinstance(protocol, _ArrivalStampingHandler) else None


async def send_request(session: _Session, url: str, body: bytes, headers: dict[str, str], clock: Clock,
                record: RawRequest) -> None:
    reads = record.reads
    record.start = clock()
    try:
        async with session.post(url, data=body, headers=headers) as response:
            record.status = response.status
            record.content_type = response.content_type
            arrivals = _arrival_source(response)
            if arrivals is None:
                async for chunk in response.content.iter_any():
                    reads.append((clock(), chunk))
            else:
                # The headers' arrival is not the body's: start counting from here.
                arrivals.arrived_at = None
                async for chunk in response.content.iter_any():
                    stamp, arrivals.arrived_at = arrivals.arrived_at, None
                    reads.append((stamp if stamp is not None else clock(), chunk))
    except (asyncio.TimeoutError, TimeoutError) as exc:
        record.error_kind, record.error = "timeout", f"{type(exc).__name__}: {exc}"
    except aiohttp.ClientError as exc:
        record.error_kind, record.error = "connection", f"{type(exc).__name__}: {exc}"
    record.end = clock()


async def run_round(session: _Session, url: str, bodies: Sequence[bytes], headers: dict[str, str], *,
                    concurrency: int, clock: Clock = time.monotonic,
                    on_done: Callable[[int], None] | None = None) -> RawRound:
    """Send every body, at most ``concurrency`` at once; nothing but I/O and stamps meanwhile."""
    semaphore = asyncio.Semaphore(concurrency)
    records = [RawRequest() for _ in bodies]
    done = 0

    async def one(body: bytes, record: RawRequest) -> None:
        nonlocal done
        async with semaphore:
            await send_request(session, url, body, headers, clock, record)
        done += 1
        if on_done is not None:
            on_done(done)

    # A cyclic garbage collection in the middle of a burst of events would delay
    # every stamp behind it; the round's garbage is collected once it is over.
    collecting = gc.isenabled()
    gc.disable()
    try:
        cpu = time.process_time()
        start = clock()
        await asyncio.gather(*(one(body, record) for body, record in zip(bodies, records)))
        end = clock()
        cpu = time.process_time() - cpu
    finally:
        if collecting:
            gc.enable()
    return RawRound(start, end, records, cpu)


def replay_events(raw: RawRequest) -> list[SSEEvent]:
    """Parse the kept reads as the client would have live, each event stamped with its read."""
    parser = SSEParser()
    events: list[SSEEvent] = []
    for stamp, chunk in raw.reads:
        events.extend(parser.feed(chunk, stamp))
    tail, _leftover = parser.close(raw.end)
    return events + tail


def analyse_round(raw: RawRound, *, chat: bool = False) -> tuple[list[RequestRecord], RoundSummary]:
    """Per-request records and the round's figures, computed after the round.

    ``chat``: the requests went to ``/v1/chat/completions``, where reasoning has a field of its own
    (``metrics.record_request``).
    """
    records = []
    for request in raw.requests:
        start_s = request.start - raw.start
        if request.error_kind is not None:
            records.append(record_request(None, start_s=start_s, status=request.status,
                                          error_kind=request.error_kind, error=request.error))
            continue
        body = b"".join(chunk for _, chunk in request.reads)
        ok_status = request.status is not None and 200 <= request.status < 300
        if not ok_status or request.content_type != "text/event-stream":
            records.append(record_request(None, start_s=start_s, status=request.status,
                                          error=f"{request.content_type}: {body[:300].decode('utf-8', 'replace')}"))
            continue
        reply = reassemble_stream(replay_events(request), sent_at=request.start)
        records.append(record_request(reply, start_s=start_s, status=request.status, chat=chat))
    wall = raw.wall_s
    if raw.processes:
        # Saturation is per process: the busiest one says whether the client kept up.
        shares = [use.cpu_fraction for use in raw.processes]
        client: dict[str, Any] = {"cpu_fraction": max(shares), "processes": len(shares),
                                  "cpu_fraction_per_process": shares}
    else:
        client = {"cpu_fraction": raw.cpu_s / wall if wall > 0 else 0.0, "processes": 1}
    return records, summarize_round(records, wall, client)


def connection_note(target: EngineTarget) -> str | None:
    """What the load says when it cannot keep its connections: each request's time then includes a connect."""
    if target.reuse_connections:
        return None
    return ("a new connection for each request, its connect inside the measured time: the engine profile says the "
            "engine closes a connection after each streamed reply (features.closes_connection_after_stream)")


class LoadGenerator:
    """One aiohttp session for one cell: a pool of ``concurrency`` connections.

    ``path`` is the endpoint under ``/v1``: completions for the fixed-length load,
    ``/chat/completions`` for the media load (``media/cells.py``), same stamping.
    ``concurrency`` 0 leaves the pool unlimited (aiohttp's ``limit=0``): an open-loop
    cell (``open_loop/cells.py``) must never queue a due request behind the pool.
    """

    def __init__(self, target: EngineTarget, concurrency: int, *, clock: Clock = time.monotonic,
                 path: str = "/completions") -> None:
        self.target = target
        self.concurrency = concurrency
        self.clock = clock
        self.url = target.v1_url + path
        self.headers = {"Content-Type": "application/json", **target.auth_headers()}
        self._session: aiohttp.ClientSession | None = None
        # Where read times come from, for the results: the socket's arrival or the task's read.
        self.stamping = "task read"

    async def __aenter__(self) -> "LoadGenerator":
        timeouts = self.target.timeouts
        # An engine that closes a connection after each streamed reply gets a connection per request:
        # reused, its closed socket would fail whichever request raced the close (connection_note).
        reuse = ({"keepalive_timeout": IDLE_CONNECTION_REUSE_S} if self.target.reuse_connections
                 else {"force_close": True})
        connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=self.concurrency, **reuse)
        if self.clock is time.monotonic and hasattr(connector, "_factory"):
            # aiohttp builds each connection's protocol with this factory (a private
            # attribute, checked for): ours stamps arrivals on the same clock.
            connector._factory = functools.partial(_ArrivalStampingHandler, loop=asyncio.get_running_loop())
            self.stamping = "socket arrival (data_received)"
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=timeouts.total, sock_connect=timeouts.connect,
                                          sock_read=timeouts.idle),
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session, for senders other than :meth:`round` (the open-loop cell)."""
        assert self._session is not None, "use LoadGenerator as an async context manager"
        return self._session

    async def round(self, bodies: Sequence[bytes], on_done: Callable[[int], None] | None = None) -> RawRound:
        assert self._session is not None, "use LoadGenerator as an async context manager"
        return await run_round(self._session, self.url, bodies, self.headers, concurrency=self.concurrency,
                               clock=self.clock, on_done=on_done)


def _open_share(arg: tuple[EngineTarget, int, str]) -> LoadGenerator:
    """In a worker process: its own load generator (session and pool) for its share of the cell."""
    target, concurrency, path = arg
    return LoadGenerator(target, concurrency, path=path)


async def _closed_share(generator: LoadGenerator, job: tuple[list[bytes], int], start_at: float
                        ) -> tuple[RawRound, str]:
    """In a worker process: its requests of a closed-loop round at its concurrency, from ``start_at``."""
    bodies, concurrency = job
    await sleep_until(start_at)
    raw = await run_round(generator.session, generator.url, bodies, generator.headers, concurrency=concurrency)
    return raw, generator.stamping


class SpreadGenerator:
    """A cell's rounds spread over ``processes`` worker processes: one schedule, one clock.

    Used like :class:`LoadGenerator` (``round``); each worker keeps its own session and
    pool across the rounds (``concurrency`` split over the workers, 0 for an unlimited
    pool), as one process keeps its one. :meth:`each` runs any worker-side function
    (``open_loop/cells.py`` sends its schedule with it). No progress lines from inside a
    spread round: the workers' counts stay in the workers until it ends.
    """

    def __init__(self, target: EngineTarget, concurrency: int, processes: int, *, path: str = "/completions") -> None:
        self.concurrency = concurrency
        self.processes = processes
        shares = split_concurrency(concurrency, processes) if concurrency else [0] * processes
        self.pool = WorkerPool(_open_share, [(target, share, path) for share in shares])
        self.stamping = "task read"

    async def __aenter__(self) -> "SpreadGenerator":
        try:
            await asyncio.to_thread(self.pool.start)
        except BaseException:
            # __aexit__ does not run when entering fails: the workers already started must not outlive it.
            await asyncio.to_thread(self.pool.stop)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.pool.stop)

    async def each(self, run: Callable[[Any, Any, float], Any], jobs: Sequence[Any]) -> tuple[list[Any], float]:
        """``run(generator, jobs[k], start_at)`` in worker k; (the results, the common start)."""
        return await asyncio.to_thread(self.pool.run_round, run, jobs)

    async def round(self, bodies: Sequence[bytes], on_done: Callable[[int], None] | None = None, *,
                    concurrency: int | None = None) -> RawRound:
        """A closed-loop round: worker k sends bodies k, k+W, ... at its share of the concurrency."""
        indices = split_indices(len(bodies), self.processes)
        shares = split_concurrency(concurrency or self.concurrency, self.processes)
        results, origin = await self.each(_closed_share, [([bodies[i] for i in where], max(1, share))
                                                          for where, share in zip(indices, shares)])
        self.stamping = results[0][1]
        return merge_rounds([raw for raw, _ in results], indices, origin)


@dataclass
class CellResult:
    """Everything measured for one cell: the rounds' records and figures."""

    cell: Cell
    summary: CellSummary
    records: list[list[RequestRecord]]
    warmup: RoundSummary | None
    stamping: str = "task read"
    # False when the prompts were text of an estimated length (no token ids could be made).
    input_exact: bool = True
    # How many client processes measured the cell, and why (None: one, from before the plan existed).
    plan: ProcessPlan | None = None
    # The prompt index its warm-up started at: its measured prompts follow the warm-up's.
    first_index: int = 0
    # Why its rounds have no speculative-decoding acceptance (spec_decode.py); None: they have one, or none asked.
    spec_decode_note: str | None = None

    @property
    def processes(self) -> int:
        return self.plan.processes if self.plan is not None else 1

    def split_cell(self) -> SplitCell:
        """What the output split's columns read (``/v1/completions``: no reasoning field)."""
        return cell_of_summary(self.cell.key, self.summary, (r for records in self.records for r in records),
                               chat=False, spec_decode_note=self.spec_decode_note)

    def bundle_entry(self, prompts: PromptSource, *, ignore_eos: bool) -> dict[str, Any]:
        """The cell for the run bundle: its shape, every measured request's latencies, each round's throughput.

        Two runs' cells compare when they sent the same kind of requests: the shape and the
        prompts' kind (exact token ids or text of an estimated length) and origin. The seed is
        kept beside it, not in the request set: by default each run draws its prompts from the
        corpus with a random one (--throughput-seed fixes it), as a benchmark run draws its
        random dataset, so two runs send prompts of the same lengths from the same corpus.
        """
        shape = {"input_tokens": self.cell.input_tokens, "output_tokens": self.cell.output_tokens,
                 "concurrency": self.cell.concurrency, "requests_per_round": self.cell.requests,
                 "warmup_requests": self.cell.warmup_requests, "rounds": len(self.records),
                 "ignore_eos": ignore_eos}
        entry = cell_entry(
            "throughput", self.cell.key, shape,
            samples=request_samples((r for records in self.records for r in records), chat=False),
            rounds={name: list(self.summary.metrics[name].rounds) for name in ("output_tok_s", "request_per_s")
                    if name in self.summary.metrics},
            request_set_parts=(prompts.origin,))
        return {**entry, "prompt_seed": prompts.seed}

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.cell.as_dict(),
            "input_tokens_exact": self.input_exact,
            "client_stamping": self.stamping,
            **(self.plan.as_dict() if self.plan is not None else {"client_processes": 1}),
            "spec_decode_note": self.spec_decode_note,
            "output_split": split_figures(self.split_cell()),
            "summary": self.summary.as_dict(),
            "warmup": self.warmup.as_dict() if self.warmup else None,
            "requests": [[record.as_dict() for record in records] for records in self.records],
        }


def _every(seconds: float, report: Callable[[int], None]) -> Callable[[int], None]:
    """A request-completion callback that reports at most once every ``seconds``."""
    last = time.monotonic()

    def on_done(done: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= seconds:
            last = now
            report(done)

    return on_done


async def measure_cell(target: EngineTarget, cell: Cell, prompts: PromptSource, *, rounds: int, ignore_eos: bool,
                       first_index: int = 0, progress: Progress | None = None,
                       clock: Clock = time.monotonic, processes: int | None = 1,
                       counters: SpecDecodeCounters | None = None) -> CellResult:
    """Warm up, then run ``rounds`` measured rounds of ``cell.requests`` requests each.

    ``processes``: client processes (``--load-processes``), None for auto (``Cell.plan_processes``).
    A spread cell runs on the monotonic clock of every process, whatever ``clock`` says.
    ``counters``: the engine's speculative-decoding counters, read between the rounds (never during one).
    """
    say: Progress = progress or (lambda _line: None)
    index = first_index
    plan = cell.plan_processes(processes)
    say(f"{cell.key}: measured by {plan.describe()}")
    if note := connection_note(target):
        say(f"{cell.key}: {note}")

    def bodies(count: int) -> list[bytes]:
        nonlocal index
        built = build_bodies(cell, prompts, model=target.model, ignore_eos=ignore_eos, count=count,
                             first_index=index)
        index += count
        return built

    warmup: RoundSummary | None = None
    summaries: list[RoundSummary] = []
    all_records: list[list[RequestRecord]] = []
    generator: LoadGenerator | SpreadGenerator = (
        LoadGenerator(target, cell.concurrency, clock=clock) if plan.processes == 1
        else SpreadGenerator(target, cell.concurrency, plan.processes))
    around = RoundCounters(counters)
    async with generator:
        if cell.warmup_requests:
            raw = await generator.round(bodies(cell.warmup_requests))
            _, warmup = analyse_round(raw)
            say(f"{cell.key} warm-up: {warmup.completed}/{warmup.requests} requests done in {warmup.wall_s:.1f} s "
                f"(not counted)")
        for number in range(1, rounds + 1):
            batch = bodies(cell.requests)
            await around.start()
            raw = await generator.round(batch, on_done=_every(
                PROGRESS_EVERY_S, lambda done, n=number: say(
                    f"{cell.key} round {n}/{rounds}: {done}/{cell.requests} requests done so far")))
            records, summary = analyse_round(raw)
            summary = await around.finish(summary)
            summaries.append(summary)
            all_records.append(records)
            errors = ", ".join(f"{k}={v}" for k, v in sorted(summary.errors_by_kind.items())) or "no errors"
            tok_s = summary.metrics["output_tok_s"] or 0.0
            say(f"{cell.workload} concurrency {cell.concurrency} round {number}/{rounds}: "
                f"{summary.completed}/{summary.requests} requests done, {errors}, {summary.wall_s:.1f} s, "
                f"{tok_s:.1f} output tok/s")
    return CellResult(cell, summarize_cell(cell.key, summaries), all_records, warmup, generator.stamping,
                      input_exact=prompts.exact, plan=plan, first_index=first_index,
                      spec_decode_note=around.unavailable)
