"""Client worker processes that share one schedule and one clock (issue 18).

One Python process times its reads accurately up to about 27,000 SSE events a second on
this project's machine (``benchmarks/README.md``); above that a cell is spread over W
worker processes. This module is the fan-out, and knows nothing of HTTP: each worker
opens a context once (the load generator's session, ``open_context(arg)``, an async
context manager) and then, per round, runs ``run(context, job, start_at)`` in its own
event loop and sends the result back. The callers (``generator.py``, ``open_loop/cells.py``)
give the functions, the jobs and the merge.

One clock: the parent fixes the round's start on ``time.monotonic()`` a little in the
future, after every worker has its job, and each worker starts at that moment. On Linux
``time.monotonic()`` is CLOCK_MONOTONIC, one clock for the whole system, so the stamps of
every process are on the same time line and can be merged as they are; each worker's
"ready" carries its own reading, which must fall between the parent's send and receipt,
so a platform where that does not hold fails loudly instead of merging skewed stamps.

One schedule: worker k gets the requests k, k+W, k+2W... (:func:`split_indices`), and a
closed-loop concurrency C is split C/W with the remainder spread (:func:`split_concurrency`).

Processes start with the "spawn" method: forking a process that runs an event loop (the
pytest-asyncio loop the checks run in) would copy that loop's state into the child. A
worker that raises sends its traceback; one that dies (a signal, ``os._exit``) is noticed
by its process sentinel; either way the round stops with a :class:`WorkerError` naming the
worker, never with a silently smaller cell.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from multiprocessing.connection import Connection, wait
from typing import Any

from engine_acceptance.errors import EngineAcceptanceError

__all__ = ["START_MARGIN_S", "WorkerError", "WorkerPool", "split_concurrency", "split_indices"]

OpenContext = Callable[[Any], AbstractAsyncContextManager[Any]]
RunShare = Callable[[Any, Any, float], Awaitable[Any]]

# How far ahead of "all workers are ready" a round starts: time for the "go" to cross a
# pipe and wake each worker on a busy two-core machine. A worker that still wakes late
# starts late, and an open-loop cell records that lateness as it records any.
START_MARGIN_S = 0.1
# Seconds a worker gets to leave after "stop" before it is terminated.
STOP_TIMEOUT_S = 10.0


class WorkerError(EngineAcceptanceError):
    """A load worker process raised, died or broke the protocol; the message names it and why."""


def split_indices(count: int, workers: int) -> list[tuple[int, ...]]:
    """Request indices per worker: worker k sends k, k+W, k+2W... (a partition of range(count))."""
    if workers < 1:
        raise ValueError(f"at least one worker, got {workers}")
    return [tuple(range(k, count, workers)) for k in range(workers)]


def split_concurrency(concurrency: int, workers: int) -> list[int]:
    """``concurrency`` over ``workers``: C // W each, the first C % W one more."""
    if workers < 1:
        raise ValueError(f"at least one worker, got {workers}")
    base, extra = divmod(concurrency, workers)
    return [base + (1 if k < extra else 0) for k in range(workers)]


def _worker_main(conn: Connection, open_context: OpenContext, arg: Any) -> None:
    """A worker process: serve rounds until told to stop; any exception goes back as a traceback."""
    try:
        asyncio.run(_serve(conn, open_context, arg))
    except BaseException:  # noqa: BLE001 - everything, KeyboardInterrupt included, is the parent's to report
        try:
            conn.send(("error", traceback.format_exc()))
        finally:
            raise SystemExit(1)


async def _serve(conn: Connection, open_context: OpenContext, arg: Any) -> None:
    async with open_context(arg) as context:
        while True:
            # Blocking reads: between rounds this process has nothing else to do.
            message = conn.recv()
            if message[0] == "stop":
                return
            _, run, job = message
            conn.send(("ready", time.monotonic()))
            _, start_at = conn.recv()
            conn.send(("result", await run(context, job, start_at)))


class WorkerPool:
    """W spawned worker processes, each with its own context, serving rounds on one clock.

    Blocking methods: call them from a thread (``asyncio.to_thread``) inside an event loop.
    """

    def __init__(self, open_context: OpenContext, args: Sequence[Any], *, name: str = "load worker") -> None:
        self.open_context = open_context
        self.args = list(args)
        self.name = name
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[Connection] = []

    @property
    def size(self) -> int:
        return len(self.args)

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        for k, arg in enumerate(self.args):
            parent_end, child_end = context.Pipe()
            process = context.Process(target=_worker_main, args=(child_end, self.open_context, arg),
                                      name=f"{self.name} {k}", daemon=True)
            process.start()
            child_end.close()
            self._processes.append(process)
            self._conns.append(parent_end)

    def _describe(self, k: int) -> str:
        process = self._processes[k]
        return f"{self.name} {k} of {self.size} (pid {process.pid})"

    def _raised(self, k: int, trace: str) -> WorkerError:
        """The error for a worker that raised: the exception first, then where (its traceback)."""
        last = trace.strip().splitlines()[-1] if trace.strip() else "an exception without a traceback"
        return WorkerError(f"{self._describe(k)} raised {last}; its traceback:\n{trace}")

    def _gone(self, k: int, kind: str) -> WorkerError:
        """The error for a worker whose process ended: its traceback if it sent one, else its exit code."""
        conn, process = self._conns[k], self._processes[k]
        try:
            if conn.poll():
                message = conn.recv()
                if message[0] == "error":
                    return self._raised(k, message[1])
        except (EOFError, OSError):
            pass  # nothing more to read: the exit code is all there is
        process.join(1.0)
        return WorkerError(f"{self._describe(k)} died (exit code {process.exitcode}) while the parent waited for "
                           f"its {kind!r}")

    def _send(self, k: int, message: tuple[Any, ...], kind: str) -> None:
        try:
            self._conns[k].send(message)
        except OSError:  # BrokenPipeError: the worker is gone
            raise self._gone(k, kind) from None

    def _collect(self, kind: str) -> list[Any]:
        """One message of ``kind`` from every worker, or WorkerError for the first that fails."""
        pending = set(range(self.size))
        got: dict[int, Any] = {}
        while pending:
            waiting = {self._conns[k]: k for k in pending}
            waiting.update({self._processes[k].sentinel: k for k in pending})
            for ready in wait(list(waiting)):
                k = waiting[ready]
                if k not in pending:
                    continue
                conn = self._conns[k]
                # A worker that sent its message and then exited is not dead: read the pipe first.
                if ready is not conn and not conn.poll():
                    raise self._gone(k, kind)
                try:
                    message = conn.recv()
                except EOFError:
                    raise self._gone(k, kind) from None
                if message[0] == "error":
                    raise self._raised(k, message[1])
                if message[0] != kind:
                    raise WorkerError(f"{self._describe(k)} sent {message[0]!r} where {kind!r} was due")
                got[k] = message[1]
                pending.discard(k)
        return [got[k] for k in range(self.size)]

    def run_round(self, run: RunShare, jobs: Sequence[Any]) -> tuple[list[Any], float]:
        """Give worker k ``jobs[k]``, start them all at one moment, return (their results, that moment)."""
        if len(jobs) != self.size:
            raise ValueError(f"{len(jobs)} jobs for {self.size} workers")
        sent_at = time.monotonic()
        for k, job in enumerate(jobs):
            self._send(k, ("job", run, job), "ready")
        clocks = self._collect("ready")
        received_at = time.monotonic()
        for k, clock in enumerate(clocks):
            if not sent_at <= clock <= received_at:
                raise WorkerError(f"{self._describe(k)} read time.monotonic() {clock:.6f} outside the parent's "
                                  f"{sent_at:.6f}-{received_at:.6f}: the processes do not share one clock, so "
                                  f"their stamps cannot be merged")
        start_at = time.monotonic() + START_MARGIN_S
        for k in range(self.size):
            self._send(k, ("go", start_at), "result")
        return self._collect("result"), start_at

    def stop(self) -> None:
        """Ask every worker to leave; terminate one that does not within STOP_TIMEOUT_S."""
        for conn, process in zip(self._conns, self._processes):
            if process.is_alive():
                try:
                    conn.send(("stop",))
                except (BrokenPipeError, OSError):
                    pass  # already gone: its exit was (or will be) reported by _collect
        for conn, process in zip(self._conns, self._processes):
            process.join(STOP_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(STOP_TIMEOUT_S)
            conn.close()
