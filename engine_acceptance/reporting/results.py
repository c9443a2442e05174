"""Results as data: what a check ended as, a capability's row of the verdict, a figure measured more than once.

The producers (the gate, the load workloads, the comparison of engines) keep their results
in these shapes and the format modules render them, so a check's outcome, a capability's
row or a cell's figure means the same thing in the terminal, in ``gate.json`` and in a
comparison.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTCOME_KINDS", "CapabilityRow", "CheckOutcome", "Spread"]

# What a check can end as, in the order every count of them is shown: gate.json's totals and
# by_capability, and the comparison's counts per capability.
OUTCOME_KINDS = ("passed", "failed", "known_defect", "stale_record", "skipped")


@dataclass
class CheckOutcome:
    """One check's verdict: its id, its group, one of :data:`OUTCOME_KINDS`, why, what it covers, its trials.

    ``core`` are the capabilities it covers that it exercises itself (the registry's core checks):
    only a core check's pass makes a capability tested.
    """

    nodeid: str
    capability: str
    outcome: str
    reason: str = ""
    covers: frozenset[str] = frozenset()
    core: frozenset[str] = frozenset()
    # The kind of trial it samples (engine_acceptance.trials: thinking, image, ...), "" for a single-request check.
    trial_kind: str = ""


@dataclass(frozen=True)
class CapabilityRow:
    """After the run: a capability's line of the verdict (``capabilities.plan.coverage_rows`` judges it)."""

    name: str
    declared: bool
    discovered: str
    evidence: str
    required: bool
    ran: int
    skipped: int
    failed: int
    result: str  # passed, N failed, known broken, not tested, not selected, FAIL: ...
    coverage_failure: str | None
    # Checks that passed outright, and that failed as an expected-failure record describes.
    passed: int = 0
    known: int = 0
    # Tested means a genuine pass: at least one of its core checks passed outright.
    tested: bool = False
    # Allowed to end the run with every selected check skipped (--allow-untested).
    allowed_untested: bool = False
    # Checks whose record went stale: counted in failed, or in passed when stale records are only warned about.
    stale: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Spread:
    """A figure over several values (a cell's rounds, a mode's requests): the median and the range.

    ``rounds`` keeps every value, None where one was not measured (a round with no
    successful request); a spread read back without them counts as one value.
    """

    median: float | None
    min: float | None = None
    max: float | None = None
    rounds: tuple[float | None, ...] = ()

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        """The median of the values measured and their range, never a pooled percentile."""
        present = [v for v in values if v is not None]
        if not present:
            return cls(None, None, None, tuple(values))
        return cls(statistics.median(present), min(present), max(present), tuple(values))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Spread:
        """A spread as :meth:`as_dict` wrote it (a results file read back); none: not measured."""
        if not data:
            return cls(None)
        return cls(data.get("median"), data.get("min"), data.get("max"), tuple(data.get("rounds") or ()))

    @property
    def count(self) -> int:
        """How many values it is the median of (one when only the median is known)."""
        return sum(1 for v in self.rounds if v is not None) or 1

    def text(self, dash: str = "-") -> str:
        """``median [min-max]``, or the one value when there is one or they agree; ``-``: not measured."""
        if self.median is None:
            return "-"
        if self.count < 2 or self.min == self.max:
            return f"{self.median:.4g}"
        return f"{self.median:.4g} [{self.min:.4g}{dash}{self.max:.4g}]"

    def as_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "rounds": list(self.rounds)}
