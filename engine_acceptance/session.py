"""What a run knows about its engine, built once and shared with xdist workers.

The controller process checks readiness, detects the engine and picks the
profiles; workers receive the result as plain JSON (``to_dict``/``from_dict``)
instead of probing the engine again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.client import ClientTimeouts, EngineTarget
from engine_acceptance.profiles import EngineProfile, ModelProfile, load_engine_profile, load_model_profile
from engine_acceptance.readiness import EngineInfo
from engine_acceptance.redaction import Redactor

__all__ = ["AcceptanceSession", "ReferenceTarget"]


@dataclass(frozen=True)
class ReferenceTarget:
    """Set when the run targets the built-in reference engine rather than a deployment."""

    convention: str
    defects: tuple[str, ...]
    log_path: str | None = None


@dataclass
class AcceptanceSession:
    engine: EngineInfo
    engine_profile: EngineProfile
    model_profile: ModelProfile
    # Out of the repr: pytest prints a failing test's arguments (this session among them).
    api_key: str | None = field(repr=False)
    timeouts: ClientTimeouts
    reference: ReferenceTarget | None = None

    @property
    def target(self) -> EngineTarget:
        return EngineTarget(
            base_url=self.engine.url, model=self.engine.model, api_key=self.api_key, timeouts=self.timeouts
        )

    @property
    def redactor(self) -> Redactor:
        return Redactor([self.api_key])

    @property
    def tokenize_endpoint(self) -> str | None:
        """The engine's tokenize path, or None when it has none: read this, not the engine profile."""
        return self.engine_profile.tokenize_endpoint

    @property
    def reasoning_expected(self) -> bool:
        return self.model_profile.has("reasoning") and self.model_profile.reasoning_default_on

    def describe(self) -> str:
        version = self.engine.version or "version unknown"
        return (
            f"{self.engine.kind} {version} at {self.engine.url} serving {self.engine.model!r} "
            f"(engine profile {self.engine_profile.name!r}, model profile {self.model_profile.name!r})"
        )

    def environment(self) -> dict[str, str]:
        """Facts for the report's environment page; the URL carries no credentials."""
        facts = {
            "target": "BUILT-IN REFERENCE ENGINE (not a real deployment)" if self.reference else "deployed engine",
            "engine.kind": self.engine.kind,
            "engine.kind_detected_by": self.engine.kind_source,
            "engine.version": self.engine.version or "unknown",
            "engine.url": self.engine.url,
            "model": self.engine.model,
            "model.profile": self.model_profile.name,
            "engine.profile": self.engine_profile.name,
            "engine.ready_after_s": f"{self.engine.ready_after_s:.1f}",
            "api_key": "set (redacted)" if self.api_key else "none",
        }
        if self.engine.max_model_len:
            facts["engine.max_model_len"] = str(self.engine.max_model_len)
        if self.reference:
            facts["reference.convention"] = self.reference.convention
            facts["reference.injected_defects"] = ",".join(self.reference.defects) or "none"
        return facts

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine.as_dict(),
            "engine_profile": str(self.engine_profile.source),
            "model_profile": str(self.model_profile.source),
            "api_key": self.api_key,
            "timeouts": vars(self.timeouts),
            "reference": vars(self.reference) if self.reference else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AcceptanceSession":
        return cls(
            engine=EngineInfo.from_dict(data["engine"]),
            engine_profile=load_engine_profile(data["engine_profile"]),
            model_profile=load_model_profile(data["model_profile"]),
            api_key=data["api_key"],
            timeouts=ClientTimeouts(**data["timeouts"]),
            reference=ReferenceTarget(**data["reference"]) if data["reference"] else None,
        )
