"""What a tool-accuracy run sends and what it must reach: defaults, overridden by the model profile.

The defaults follow the vendor verifiers: schema accuracy is 100% on the official
APIs (K2-Vendor-Verifier) and providers are asked for 98% or more
(MiniMax-Provider-Verifier), so 99% of calls must fit their schema, which a parser
failing 3% of the time does not reach on the 300-odd cases of the set. Trigger F1
against the baseline must stay within a few points (0.95), as K2's acceptance asks
of a vendor against the official deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from engine_acceptance.resources import suite_path
from engine_acceptance.tool_accuracy.runner import RunSettings

__all__ = ["BASELINES_DIR", "ToolAccuracyPolicy"]

# Baselines shipped with the suite, named by model profiles (tool_accuracy.baseline).
BASELINES_DIR = suite_path("fixtures", "tool_baselines")


@dataclass(frozen=True)
class ToolAccuracyPolicy:
    max_tokens: int = 512
    temperature: float = 0.0
    concurrency: int = 16
    min_schema_valid: float = 0.99
    min_finish_reason_consistent: float = 0.99
    min_stream_agreement: float = 0.95
    min_trigger_f1: float = 0.95
    # Fewer cases whose two replies both ran to their end than this cannot judge streamed = non-streamed.
    min_compared_cases: int = 30
    # Fewer replies that ended before max_tokens (not cut, not an error) than this cannot judge finish_reason.
    min_judged_replies: int = 30
    # The baseline to gate triggers on unless --tool-baseline names one (see baseline_path).
    baseline: str | None = None

    @classmethod
    def from_profile(cls, values: Mapping[str, Any]) -> "ToolAccuracyPolicy":
        """The defaults with the profile's ``tool_accuracy`` values (already schema-checked) over them."""
        known = {item.name for item in fields(cls)}
        return replace(cls(), **{key: value for key, value in values.items() if key in known})

    def baseline_path(self, given: Path | None) -> Path | None:
        """``--tool-baseline`` if given, else the profile's: a shipped baseline's name, or a path."""
        if given is not None or self.baseline is None:
            return given
        named = Path(self.baseline)
        return named if named.parent != Path(".") else BASELINES_DIR / named

    @property
    def settings(self) -> RunSettings:
        return RunSettings(self.max_tokens, self.temperature, self.concurrency)
