"""The jobs and sessions the worker-pool self-tests hand to real spawned processes.

Kept apart from ``test_workers.py`` on purpose: a spawned worker unpickles these by
module and name, so it imports the module that defines them. From the test module that
meant pytest, the load generator, numpy and the metrics self-tests in every worker
(about two seconds of CPU each, eight workers in the pool tests); from here, only the
standard library.
"""

from __future__ import annotations

import asyncio
import os
import time

__all__ = ["echo", "misbehave", "open_nothing"]


class _Nothing:
    async def __aenter__(self) -> "_Nothing":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def open_nothing(arg: object) -> _Nothing:
    if arg == "refuse":
        raise RuntimeError("this worker cannot open its session")
    return _Nothing()


async def echo(context: object, job: object, start_at: float) -> tuple[object, float, int]:
    while time.monotonic() < start_at:
        await asyncio.sleep(0.001)
    return job, time.monotonic(), os.getpid()


async def misbehave(context: object, job: object, start_at: float) -> object:
    if job == "raise":
        raise RuntimeError("boom in the worker")
    if job == "die":
        os._exit(3)
    return job
