"""What a run knows about its engine, built once and shared with xdist workers.

The controller process checks readiness, detects the engine, picks the profiles
and probes what the deployment serves; workers receive the result as plain JSON
(``to_dict``/``from_dict``) instead of probing the engine again. The checks see
the *effective* model profile: the declared one, with the capabilities that are
tested (declared, discovered or required) and the settings discovery found.

The session is frozen, and what is derived from it (the target every client is bound
to, the redactor, the capability plans) is computed once when it is built, so every
check of a process talks to the engine through the same target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.capabilities.discovery import Discovery
from engine_acceptance.capabilities.plan import STATED_NOT_SERVED, CapabilityPlan, effective_profile, plan_capabilities
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget
from engine_acceptance.profiles.profile import (METRIC_GAUGES, EngineProfile, ModelProfile, load_engine_profile,
                                                load_model_profile)
from engine_acceptance.profiles.problem_text import discovery_lead
from engine_acceptance.wire.readiness import EngineInfo
from engine_acceptance.wire.redaction import Redactor
from engine_acceptance.wire.tokenize_api import TokenizeApi

__all__ = ["AcceptanceSession", "ReferenceTarget"]


@dataclass(frozen=True)
class ReferenceTarget:
    """Set when the run targets the built-in reference engine rather than a deployment."""

    convention: str
    defects: tuple[str, ...]
    log_path: str | None = None


@dataclass(frozen=True)
class AcceptanceSession:
    """The engine handle: its identity (``engine``), the key, the target, the profiles and what discovery found."""

    engine: EngineInfo
    engine_profile: EngineProfile
    # The profile file as written; the checks read `model_profile`, the effective one.
    declared_profile: ModelProfile
    # Out of the repr: pytest prints a failing test's arguments (this session among them).
    api_key: str | None = field(repr=False)
    timeouts: ClientTimeouts
    reference: ReferenceTarget | None = None
    discovery: Discovery | None = None
    # Capabilities the deployment must serve (--expect and the profile's expect).
    required: frozenset[str] = frozenset()
    # Capabilities stated off on purpose -> where (--not-served, the model profile's not_served); and
    # "tokenize" -> "--tokenizer PATH" when the run counts locally (the stated way around a broken /tokenize).
    stated_not_served: dict[str, str] = field(default_factory=dict)
    plans: dict[str, CapabilityPlan] = field(init=False, repr=False)
    model_profile: ModelProfile = field(init=False, repr=False)
    # Where every client of this process sends its requests: the engine's URL and model, the key, the timeouts.
    target: EngineTarget = field(init=False, repr=False)
    # Keeps the key out of every report.
    redactor: Redactor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Frozen: the derived fields are set once here, through object.__setattr__.
        plans = plan_capabilities(self.declared_profile, self.discovery, self.required, self.stated_not_served)
        object.__setattr__(self, "plans", plans)
        object.__setattr__(self, "model_profile", effective_profile(self.declared_profile, plans, self.discovery))
        object.__setattr__(self, "target", EngineTarget(
            base_url=self.engine.url, model=self.engine.model, api_key=self.api_key, timeouts=self.timeouts,
            reuse_connections=not self.engine_profile.closes_connection_after_stream))
        object.__setattr__(self, "redactor", Redactor([self.api_key]))

    def engine_facts(self) -> list[str]:
        """Lines beside the capability table: what the engine offers the measurements (tokenize has its row)."""
        facts = []
        facts.append(self._metrics_fact())
        declared = self.declared_profile.context_length
        advertised = self.engine.max_model_len
        facts.append("context: " + ", ".join([
            f"model profile {self.declared_profile.name!r} declares {declared:,}" if declared else
            f"model profile {self.declared_profile.name!r} declares none",
            f"the engine advertises {advertised:,} (max_model_len)" if advertised else "the engine advertises none"]))
        return facts

    def _metrics_fact(self) -> str:
        """Where the cancellation and soak checks read the engine's Prometheus gauges, as the engine profile says."""
        profile = self.engine_profile
        endpoint = profile.features.get("metrics_endpoint")
        if not endpoint:
            return f"metrics: none (engine profile {profile.name!r} names no metrics_endpoint)"
        gauges = [f"{gauge} {names[0]}" for gauge in METRIC_GAUGES if (names := profile.metric_names(gauge))]
        return f"metrics: GET {endpoint} (engine profile {profile.name!r}: {', '.join(gauges) or 'no gauge named'})"

    def skip_reason(self, capability: str) -> str:
        """Why the checks of a capability that is not tested are skipped."""
        plan = self.plans.get(capability)
        if plan is None:
            return self.declared_profile.lacks_reason(capability)
        return plan.reason

    def broken_reason(self, capability: str) -> str:
        """What discovery found wrong with a capability it found broken, to lead a failing check's message.

        A broken capability's checks run and fail on what the engine answers; the answer alone
        may hide why (a model that never saw the image names a wrong colour). Empty when the
        probe did not find it broken.
        """
        plan = self.plans.get(capability)
        if plan is None or plan.discovered != "broken":
            return ""
        return discovery_lead(capability, plan.evidence)

    @property
    def tokenize_api(self) -> TokenizeApi | None:
        """The engine's tokenize route and the body it takes, or None when it has none.

        A probe's answer wins over the engine profile's claim: a generic server may have
        /tokenize, and a vLLM behind a gateway may not expose it. The body is the engine
        profile's (``features.tokenize_body``), as the probe sent it.
        """
        probe = self.discovery.probes.get("tokenize") if self.discovery is not None else None
        if probe is not None and probe.state != "not_probed":
            if probe.state != "served":
                return None
            return TokenizeApi(probe.settings["endpoint"], probe.settings.get("body") or self.engine_profile.tokenize_body)
        return self.engine_profile.tokenize_api

    @property
    def no_tokenize_reason(self) -> str:
        """Why the engine cannot count tokens, in the probe's words, for a measurement that falls back without it.

        A tokenize endpoint that answered and is broken is said to be broken, never absent: "no
        /tokenize" is only for one the engine refused (its words) or the profile does not name.
        """
        probe = self.discovery.probes.get("tokenize") if self.discovery is not None else None
        if probe is None or probe.state == "not_probed":
            why = probe.evidence if probe is not None else f"engine profile {self.engine_profile.name!r} names none"
            return f"no tokenize endpoint ({why})"
        if probe.state == "broken":
            return f"the engine's tokenize endpoint is broken ({probe.evidence})"
        if probe.state == "not_served":
            return f"no tokenize endpoint ({probe.evidence})"
        return f"the engine's tokenize endpoint ({probe.evidence})"

    @property
    def reasoning_expected(self) -> bool:
        return self.model_profile.has("reasoning") and self.model_profile.reasoning_default_on

    def describe(self) -> str:
        version = self.engine.version or "version unknown"
        return (
            f"{self.engine.kind} {version} at {self.engine.url} serving {self.engine.model!r} "
            f"(engine profile {self.engine_profile.name!r}, model profile {self.declared_profile.name!r})"
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
            "model.profile": self.declared_profile.name,
            "engine.profile": self.engine_profile.name,
            "engine.ready_after_s": f"{self.engine.ready_after_s:.1f}",
            "api_key": "set (redacted)" if self.api_key else "none",
        }
        if self.engine.max_model_len:
            facts["engine.max_model_len"] = str(self.engine.max_model_len)
        if self.required:
            facts["capabilities.required"] = ",".join(sorted(self.required))
        stated = sorted((name, where) for name, where in self.stated_not_served.items()
                        if self.plans[name].discovered == STATED_NOT_SERVED)
        if stated:
            facts["capabilities.not_served_stated"] = ", ".join(f"{name} ({where})" for name, where in stated)
        for name, plan in self.plans.items():
            facts[f"capability.{name}"] = (f"declared={'yes' if plan.declared else 'no'} "
                                           f"discovered={plan.discovered} tested={'yes' if plan.tested else 'no'}")
        if self.discovery is not None:
            facts["capabilities.discovery_s"] = f"{self.discovery.elapsed_s:.2f}"
        if self.reference:
            facts["reference.convention"] = self.reference.convention
            facts["reference.injected_defects"] = ",".join(self.reference.defects) or "none"
        return facts

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine.as_dict(),
            "engine_profile": str(self.engine_profile.source),
            "model_profile": str(self.declared_profile.source),
            "discovery": self.discovery.to_dict() if self.discovery is not None else None,
            "required": sorted(self.required),
            "stated_not_served": self.stated_not_served,
            "api_key": self.api_key,
            "timeouts": vars(self.timeouts),
            "reference": vars(self.reference) if self.reference else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AcceptanceSession":
        return cls(
            engine=EngineInfo.from_dict(data["engine"]),
            engine_profile=load_engine_profile(data["engine_profile"]),
            declared_profile=load_model_profile(data["model_profile"]),
            api_key=data["api_key"],
            timeouts=ClientTimeouts(**data["timeouts"]),
            reference=ReferenceTarget(**data["reference"]) if data["reference"] else None,
            discovery=Discovery.from_dict(data["discovery"]) if data["discovery"] else None,
            required=frozenset(data["required"]),
            stated_not_served=dict(data.get("stated_not_served") or {}),
        )
