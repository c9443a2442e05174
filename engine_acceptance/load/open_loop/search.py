"""The highest arrival rate (or concurrency) whose SLO attainment stays at or above the target.

Pure logic: the caller's ``run(rate)`` measures one cell and returns a :class:`Step`;
here only the rates are chosen. The search goes up by ``factor`` (doubling) from
``start`` while the attainment holds, then bisects (geometric midpoint: rates span
orders of magnitude) between the highest good rate and the lowest bad one until they
are within ``resolution`` of each other. When the start rate already misses the
target it goes down by ``factor`` instead, to ``min_rate`` at most. At most
``max_steps`` cells are run in all.

Plainly saturated: a step whose attainment is far below the target (under
``saturated_below``). No rate above a saturated one is ever tried, and a saturated
start ends the search at once: an engine that cannot take the smallest rate asked gains nothing from more
minutes of overload. The same search serves concurrency (``integer=True`` rounds
every rate to a whole number and never repeats one).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SearchPolicy", "SearchResult", "Step", "search_highest_rate"]


@dataclass(frozen=True)
class Step:
    """What one measured cell says to the search."""

    rate: float
    attainment: float | None
    sent: int
    late_sends: int = 0
    max_in_flight: int = 0

    @property
    def late_share(self) -> float:
        return self.late_sends / self.sent if self.sent else 0.0


@dataclass(frozen=True)
class SearchPolicy:
    start: float = 1.0
    target: float = 0.99
    factor: float = 2.0
    max_steps: int = 10
    # Bisection ends once the lowest bad rate is within this share above the highest good one.
    resolution: float = 0.1
    min_rate: float = 0.01
    saturated_below: float = 0.5
    integer: bool = False

    def __post_init__(self) -> None:
        if not (self.start > 0 and self.factor > 1 and self.max_steps >= 1 and self.resolution > 0
                and 0 < self.target <= 1 and self.min_rate > 0):
            raise ValueError(f"a search needs start > 0, factor > 1, max_steps >= 1, resolution > 0, "
                             f"target in (0, 1] and min_rate > 0; got {self}")

    def good(self, step: Step) -> bool:
        return step.attainment is not None and step.attainment >= self.target

    def saturated(self, step: Step) -> bool:
        # Late sends are not the engine's saturation: in open loop the client never waits for the
        # engine (the pool has no limit), so a send late by a few ms is the client's or the machine's
        # (2.5 ms at 1 req/s beside vLLM on these two cores). They are reported with each step.
        return step.attainment is None or step.attainment < self.saturated_below


@dataclass
class SearchResult:
    """Every step in the order run, the highest good rate, the lowest bad one, and why it stopped."""

    steps: list[Step] = field(default_factory=list)
    best: float | None = None
    first_bad: float | None = None
    stopped: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"best_rate": self.best, "lowest_bad_rate": self.first_bad, "stopped": self.stopped,
                "steps": [vars(step) for step in self.steps]}


async def search_highest_rate(run: Callable[[float], Awaitable[Step]], policy: SearchPolicy) -> SearchResult:
    """Run cells at chosen rates until the highest good rate is bracketed within the resolution."""
    result = SearchResult()
    tried: set[float] = set()

    def shape(rate: float) -> float:
        return float(max(1, round(rate))) if policy.integer else rate

    async def measure(rate: float) -> Step:
        step = await run(rate)
        result.steps.append(step)
        tried.add(rate)
        return step

    rate = shape(policy.start)
    first = await measure(rate)
    if policy.good(first):
        result.best = rate
        # Up by the factor while the attainment holds.
        while len(result.steps) < policy.max_steps:
            rate = shape(rate * policy.factor)
            step = await measure(rate)
            if not policy.good(step):
                result.first_bad = rate
                break
            result.best = rate
        else:
            result.stopped = f"step budget ({policy.max_steps}) spent going up; every rate tried met the target"
            return result
    elif policy.saturated(first):
        result.first_bad = rate
        result.stopped = (f"saturated at the start rate {rate:g} (attainment {_share(first.attainment)}, "
                          f"{first.late_sends}/{first.sent} sends late)")
        return result
    else:
        result.first_bad = rate
        # Down by the factor until the target is met.
        while len(result.steps) < policy.max_steps:
            rate = shape(rate / policy.factor)
            if rate < policy.min_rate or rate in tried:
                result.stopped = f"no rate down to {policy.min_rate:g} met the target"
                return result
            step = await measure(rate)
            if policy.good(step):
                result.best = rate
                break
            result.first_bad = rate
        else:
            result.stopped = f"step budget ({policy.max_steps}) spent going down; no rate met the target"
            return result

    assert result.best is not None and result.first_bad is not None
    while result.first_bad > result.best * (1 + policy.resolution):
        if len(result.steps) >= policy.max_steps:
            result.stopped = f"step budget ({policy.max_steps}) spent bisecting"
            return result
        middle = shape(math.sqrt(result.best * result.first_bad))
        if middle in tried or not result.best < middle < result.first_bad:
            break  # whole numbers next to each other: nothing left between them
        step = await measure(middle)
        if policy.good(step):
            result.best = middle
        else:
            result.first_bad = middle
    result.stopped = (f"bracketed: {result.best:g} meets the target, {result.first_bad:g} does not "
                      f"(within {100 * policy.resolution:g}% or adjacent)")
    return result


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
