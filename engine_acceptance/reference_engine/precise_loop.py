"""An asyncio event loop whose timers fire within microseconds, for the latency model.

asyncio's default selector waits with ``epoll_wait``, whose timeout is whole
milliseconds, rounded up: every ``asyncio.sleep`` then ends up to 1 ms late. For a
reference engine whose time to first token and per-token time are the ground truth
of throughput self-tests (2% of a 50 ms TTFT is 1 ms), that is the whole error
budget. Here the wait itself goes through ``select()`` on the epoll descriptor,
which takes a microsecond timeout; epoll then only collects the ready events.
"""

from __future__ import annotations

import asyncio
import select
import selectors

__all__ = ["PreciseEpollSelector", "precise_event_loop"]

# select() cannot watch descriptors at or above FD_SETSIZE.
_FD_SETSIZE = 1024


class PreciseEpollSelector(selectors.EpollSelector):
    """EpollSelector that sleeps with microsecond resolution."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        epoll_fd = self._selector.fileno()  # type: ignore[attr-defined]
        if timeout is not None and timeout > 0 and epoll_fd < _FD_SETSIZE:
            # Returns early as soon as any registered descriptor is ready.
            select.select([epoll_fd], [], [], timeout)
            timeout = 0
        return super().select(timeout)


def precise_event_loop() -> asyncio.AbstractEventLoop:
    """A loop factory for ``asyncio.Runner``."""
    return asyncio.SelectorEventLoop(PreciseEpollSelector())

