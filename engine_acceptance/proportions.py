"""Counts of successes as rates with their uncertainty: the Wilson score interval.

A check that samples a nondeterministic model K times, or scores hundreds of tool
calls, reports ``k/n`` and the rate's 95% Wilson interval. Wilson, not the normal
approximation: it stays inside [0, 1] and is honest at k = 0 or k = n, where the
normal interval collapses to a point (3/3 is not "100% ± 0").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Proportion", "wilson_interval"]

# The two-sided 95% normal quantile.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / total``; (0, 1) when nothing was counted."""
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"successes must be within 0..total, got {successes}/{total}")
    if total == 0:
        return 0.0, 1.0
    rate = successes / total
    denominator = 1 + z * z / total
    centre = (rate + z * z / (2 * total)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Proportion:
    """``successes`` out of ``total``, with its rate and 95% Wilson bounds."""

    successes: int
    total: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.total if self.total else None

    @property
    def lower(self) -> float:
        return wilson_interval(self.successes, self.total)[0]

    @property
    def upper(self) -> float:
        return wilson_interval(self.successes, self.total)[1]

    def __str__(self) -> str:
        if not self.total:
            return "0/0"
        return (f"{self.successes}/{self.total} = {100 * self.rate:.1f}% "
                f"(95% Wilson {100 * self.lower:.1f}-{100 * self.upper:.1f}%)")
