"""A bare HTTP server on a free loopback port, for self-tests of the clients themselves.

No fault of the reference engine does what these self-tests need (a first event after a
long 'prefill', a huge error body, a record of which connection each request came on),
so they serve their own aiohttp handlers; this starts and stops the server for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

__all__ = ["serving"]


@asynccontextmanager
async def serving(app: web.Application, **runner_options: Any) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 at a free port; yield its base URL (``http://127.0.0.1:PORT``)."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
