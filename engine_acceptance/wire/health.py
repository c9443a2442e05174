"""Engine lost mid-run: notice it once, then fail every later check at once.

Readiness (``readiness.py``) stops a run whose engine is down before it starts.
This module covers an engine that goes away during the run (a crash, an OOM
kill, a node lost, a frozen process): once a request fails at the connection
level (refused, reset, or no answer within a timeout), one quick ``GET /health``
decides whether the engine is gone or only that request failed. If it is gone,
the state is kept for the rest of the process: the clients send nothing more and
the plugin fails each remaining check with "engine unreachable since <time>",
instead of every check waiting for its own timeout.

The state is per process and per engine URL: under pytest-xdist each worker finds
out on its own, at the cost of one failed request each. It never recovers within
a run: an engine that came back after a crash is a restarted engine, and the gate
must not pass on it as if nothing happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp

from engine_acceptance.wire import http
from engine_acceptance.wire.types import EngineTarget, Exchange

__all__ = ["HEALTH_PROBE_TIMEOUT_S", "EngineLost", "check_after_failure", "forget", "lost", "mark_lost"]

# A healthy engine answers /health in milliseconds even under load; the connect
# timeout bounds it further when that is shorter.
HEALTH_PROBE_TIMEOUT_S = 5.0
# Exchange errors after which the engine may be gone (a 5xx or a bad body means it answered).
_SUSPICIOUS_KINDS = frozenset({"connection", "timeout"})


@dataclass(frozen=True)
class EngineLost:
    """Since when the engine has been unreachable, and how that was found."""

    since_epoch_s: float
    first_failure: str
    probe: str

    @property
    def since(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since_epoch_s))

    def message(self) -> str:
        return (f"engine unreachable since {self.since} (first: {self.first_failure}; "
                f"then GET /health: {self.probe})")


_lost: dict[str, EngineLost] = {}


def _key(base_url: str) -> str:
    return base_url.rstrip("/")


def lost(base_url: str) -> EngineLost | None:
    """The loss of the engine at ``base_url`` if this process has seen it, else None."""
    return _lost.get(_key(base_url))


def mark_lost(base_url: str, loss: EngineLost) -> None:
    _lost.setdefault(_key(base_url), loss)


def forget(base_url: str | None = None) -> None:
    """Drop what is known (all engines when None): for self-tests that restart an engine."""
    if base_url is None:
        _lost.clear()
    else:
        _lost.pop(_key(base_url), None)


async def probe_health(base_url: str, timeout_s: float) -> str | None:
    """None when ``GET /health`` answers 200 within ``timeout_s``; otherwise what happened."""
    url = _key(base_url) + "/health"
    try:
        async with http.session(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url) as response:
                if response.status == 200:
                    return None
                return f"HTTP {response.status}"
    except (TimeoutError, aiohttp.ServerTimeoutError):
        return f"no answer within {timeout_s:g}s"
    except aiohttp.ClientError as exc:
        return f"{type(exc).__name__}: {exc}"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


async def check_after_failure(target: EngineTarget, exchange: Exchange) -> EngineLost | None:
    """After a failed exchange, probe the engine; when it is gone, record and return the loss.

    The exchange's error then says so too, so the check that found it reads the
    same as the ones failed afterwards.
    """
    if exchange.error_kind not in _SUSPICIOUS_KINDS:
        return None
    known = lost(target.base_url)
    if known is not None:
        return known
    failed_at = time.time()
    probe = await probe_health(target.base_url, min(HEALTH_PROBE_TIMEOUT_S, target.timeouts.connect))
    if probe is None:
        return None
    path = exchange.url.removeprefix(_key(target.base_url))
    loss = EngineLost(failed_at, f"{exchange.method} {path}: {exchange.error_kind}: {exchange.error}", probe)
    mark_lost(target.base_url, loss)
    exchange.error = f"{exchange.error}; GET /health then: {probe}: engine unreachable since {loss.since}"
    return lost(target.base_url)
