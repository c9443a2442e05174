"""Long waits say they are alive: elapsed seconds on the terminal, not silence.

A million-token prefill took 168-272 s in the seeds; a run that prints nothing for
four minutes looks hung. :func:`waiting` awaits something and writes one line every
few seconds until it is done.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any, TypeVar

__all__ = ["PROGRESS_EVERY_S", "Write", "terminal_writer", "waiting"]

PROGRESS_EVERY_S = 10.0

T = TypeVar("T")
Write = Callable[[str], None]


async def waiting(awaitable: Awaitable[T], *, label: str, write: Write, every_s: float = PROGRESS_EVERY_S,
                  clock: Callable[[], float] = time.monotonic) -> T:
    """The result of ``awaitable``; meanwhile ``label: N s elapsed`` every ``every_s`` seconds."""
    started = clock()
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            done, _pending = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            write(f"{label}: {clock() - started:.0f} s elapsed")
    finally:
        if not task.done():
            task.cancel()


def terminal_writer(config: Any, prefix: str) -> Write:
    """Writes ``engine-acceptance: <prefix><line>`` to the terminal while a check runs.

    Output capture is bypassed on purpose: progress of a long measurement must be
    seen while it happens, not in the captured output afterwards.
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
            reporter.write_line(f"engine-acceptance: {prefix}{line}")

    return write
