"""Capability discovery: ask the deployment what it serves before the checks run.

Why: a model profile lists the capabilities of the models someone wrote a profile
for. A served model without one got the ``generic`` profile, and only text and
streaming were tested, so a deployment serving images, tools or reasoning passed
the gate with all of that untested. A few cheap requests (temperature 0, a few
dozen output tokens, sent together) ask the deployment itself instead, and each
capability comes out served, not served, broken or not probed
(:mod:`engine_acceptance.capabilities.probes.base` says what each means).

This module only runs the probes: which capabilities are probed, and by which
function, is the registry's word (:class:`~engine_acceptance.capabilities.registry.Probed`,
a family module of ``capabilities/probes/`` and a function name, resolved here so the
registry stays a leaf that imports nothing). Every probe gets one
:class:`~engine_acceptance.capabilities.probes.base.ProbeContext`; a function that
answers for several capabilities (reasoning and thinking_modes) runs once.

No pytest here: the plugin runs :func:`discover` once in the controller and hands
the result to pytest-xdist workers as JSON (:meth:`Discovery.to_dict`,
:meth:`Discovery.from_dict`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_acceptance.capabilities.probes.base import PROBE_MAX_TOKENS, Probe, ProbeContext
from engine_acceptance.capabilities.registry import Probed, probed_capabilities
from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.wire.client import RawStreamingClient, SdkChatClient
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget

__all__ = ["Discovery", "ProbeFunction", "discover", "resolve_probe"]

# A probe: one capability's Probe, or several from one exchange (reasoning and thinking_modes).
ProbeFunction = Callable[[ProbeContext], Awaitable["Probe | tuple[Probe, ...]"]]
_PROBES_PACKAGE = "engine_acceptance.capabilities.probes"


def resolve_probe(probed: Probed) -> ProbeFunction:
    """The function a registry entry names: ``probes/<family>.py``'s ``<function>``.

    ImportError or AttributeError for a name that does not resolve (a self-test resolves
    every entry, so that surfaces in the self-tests).
    """
    module = importlib.import_module(f"{_PROBES_PACKAGE}.{probed.family}")
    function = getattr(module, probed.function)
    if not callable(function):
        raise TypeError(f"{_PROBES_PACKAGE}.{probed.family}.{probed.function} is not a function")
    return function


@dataclass(frozen=True)
class Discovery:
    """Every capability's probe, what the engine says of its context, and how long it took."""

    probes: dict[str, Probe]
    advertised_context: int | None
    elapsed_s: float

    def state(self, capability: str) -> str:
        """The capability's state; ``not_probed`` for one no probe asked about."""
        probe = self.probes.get(capability)
        return probe.state if probe is not None else "not_probed"

    def settings(self, capability: str) -> dict[str, Any]:
        probe = self.probes.get(capability)
        return dict(probe.settings) if probe is not None else {}

    def served(self, capability: str) -> bool:
        """Whether the capability's checks run (served or broken)."""
        return self.state(capability) in ("served", "broken")

    def table_rows(self) -> list[tuple[str, str, str]]:
        """(capability, state, evidence) per probe, in the registry's report order."""
        order = {entry.name: index for index, entry in enumerate(probed_capabilities())}
        names = sorted(self.probes, key=lambda name: (order.get(name, len(order)), name))
        return [(name, self.probes[name].state, self.probes[name].evidence) for name in names]

    def summary(self) -> str:
        """One line: each capability and its state."""
        return ", ".join(f"{name} {state.replace('_', ' ')}" for name, state, _ in self.table_rows())

    def to_dict(self) -> dict[str, Any]:
        return {
            "probes": {name: probe.to_dict() for name, probe in self.probes.items()},
            "advertised_context": self.advertised_context,
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Discovery":
        return cls(
            probes={name: Probe.from_dict(name, probe) for name, probe in data["probes"].items()},
            advertised_context=data.get("advertised_context"),
            elapsed_s=float(data["elapsed_s"]),
        )


async def discover(target: EngineTarget, engine_profile: EngineProfile, *, advertised_context: int | None,
                   media_dir: Path, timeouts: ClientTimeouts | None = None,
                   max_tokens: int = PROBE_MAX_TOKENS) -> Discovery:
    """Probe every capability of the deployment at `target` at once, and say what each found.

    `advertised_context` is what ``/v1/models`` said (``max_model_len``), kept for the
    report; `media_dir` holds the committed media and their manifest; `timeouts`
    replaces the target's for the probes (a hanging probe waits the idle timeout).
    """
    started = time.monotonic()
    if timeouts is not None:
        target = dataclasses.replace(target, timeouts=timeouts)
    entries = probed_capabilities()
    # One call per function: reasoning and thinking_modes share theirs.
    functions = {(probed.family, probed.function): probed for probed in (entry.probe for entry in entries)
                 if probed is not None}
    async with SdkChatClient(target) as chat, RawStreamingClient(target, pool_size=2) as raw:
        context = ProbeContext(chat=chat, raw=raw, model=target.model, engine_profile=engine_profile,
                               media_dir=media_dir, max_tokens=max_tokens)
        found = await asyncio.gather(*(resolve_probe(probed)(context) for probed in functions.values()))
    results: dict[str, Probe] = {}
    for item in found:
        for probe in item if isinstance(item, tuple) else (item,):
            results[probe.capability] = probe
    ordered = {entry.name: results[entry.name] for entry in entries if entry.name in results}
    return Discovery(probes=ordered, advertised_context=advertised_context, elapsed_s=time.monotonic() - started)
