"""The one registry of capabilities: one entry each, and every list the suite needs derived from it.

A capability is something a deployment serves or not (tools, image input, a Responses
endpoint). Its entry says everything the suite knows about it:

- its **name**, which is also its key everywhere a profile names it: a model profile's
  ``capabilities:``, ``expect:`` and ``not_served:``, ``--expect`` and ``--not-served``,
  and an engine profile's ``refusals:`` (``fixtures/schemas/*.schema.json`` list the same
  names; a self-test keeps them equal);
- whether a model profile may name it (``in_profiles``): those are planned and get a row
  of the verdict's capability table, in the order of :data:`CAPABILITIES`; ``tokenize`` is
  probed but is no model capability (what stands in for it is a local tokenizer);
- its **markers**: the check groups whose checks test it even without ``requires(...)``;
- how it is found and so its **coverage rule** (:class:`Probed`, :class:`AlwaysTested`,
  :class:`Undiscoverable`): tested when its probe finds it served or broken (or the
  model profile declares it, or it is required); tested on every deployment; or tested
  only when declared or required;
- for a probed capability, the **refusal data** it needs: engine profiles may list, under
  its name, the 4xx answers that mean "not offered" (``refusals:``, read by
  :mod:`engine_acceptance.profiles.refusals`), and the **stated-intent** text a broken probe's
  evidence ends with: the command that states it is off on purpose;
- whether it is served on a **route of its own** (``own_route``: ``/tokenize``,
  ``/v1/responses``): only there does a 404 or 405 mean "not offered" (the route is not
  there), so only there may an engine profile list one as a refusal. The other
  capabilities ride on ``/v1/chat/completions``, where a 404 or 405 is a wrong path or a
  proxy, never the engine declining tools or images.

The check groups (:data:`CHECK_GROUPS`) are the markers that group checks, with the line
pytest registers for each, in the order of the verdict's check-group table. A check
belongs to the first group in that order whose marker it carries; a group is not a
capability (``throughput`` and ``soak`` test none of their own).

This module is data only and imports nothing of the package: ``profiles/`` reads it and
sits below ``capabilities/`` (whose probes use ``wire/``, ``media/`` and ``profiles/``).
So a probe is named, not imported: :class:`Probed` holds the family (a module of
``engine_acceptance/capabilities/probes/``) and the function's name, which
:func:`engine_acceptance.capabilities.discovery.resolve_probe` imports; a self-test
resolves every one, so a misspelt name fails the self-tests, not a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "CAPABILITIES",
    "CHECK_GROUPS",
    "GROUP_MARKERS",
    "PROFILE_VOCABULARY",
    "AlwaysTested",
    "Capability",
    "CheckGroup",
    "Probed",
    "Undiscoverable",
    "capability",
    "capability_of_marker",
    "probed_capabilities",
    "stated_intent",
]


@dataclass(frozen=True)
class Probed:
    """Discovery asks the deployment: tested when the probe finds it served or broken, declared or required.

    `family` is a module of ``engine_acceptance/capabilities/probes/``, `function` its
    ``async def (ProbeContext)`` returning this capability's probe (one function may answer
    for several: reasoning and thinking_modes come from one exchange). `report_rank` is the
    capability's place in discovery's own report (the progress line, ``gate.json``'s
    ``discovery``), which kept the order the probes were first written in: tools first.
    """

    family: str
    function: str
    report_rank: int


@dataclass(frozen=True)
class AlwaysTested:
    """Every deployment serves it: no probe, tested on every run, and it cannot be stated not served."""

    reason: str


@dataclass(frozen=True)
class Undiscoverable:
    """No probe can tell: tested only when a model profile declares it or it is required."""

    reason: str


@dataclass(frozen=True)
class Capability:
    """One capability: see the module docstring for what each field means."""

    name: str
    found_by: Probed | AlwaysTested | Undiscoverable
    markers: tuple[str, ...] = ()
    in_profiles: bool = True
    # What a broken probe's evidence tells the user to do when the capability is off on purpose;
    # None: the default sentence (--not-served NAME), see stated_intent().
    intent_override: str | None = None
    # Served on a route of its own, whose absence (404, 405) is a refusal (profiles/refusals.py).
    own_route: bool = False

    @property
    def probe(self) -> Probed | None:
        return self.found_by if isinstance(self.found_by, Probed) else None

    @property
    def always_tested(self) -> str | None:
        """Why every deployment is tested on it, or None."""
        return self.found_by.reason if isinstance(self.found_by, AlwaysTested) else None

    @property
    def undiscoverable(self) -> str | None:
        """Why no probe can tell, or None."""
        return self.found_by.reason if isinstance(self.found_by, Undiscoverable) else None


@dataclass(frozen=True)
class CheckGroup:
    """A marker that groups checks, and the description pytest registers for it."""

    marker: str
    description: str

    @property
    def marker_line(self) -> str:
        """The line for pytest's ``markers`` ini value."""
        return f"{self.marker}: {self.description}"


# In the order of the verdict's capability table.
CAPABILITIES = (
    Capability("text", AlwaysTested("every OpenAI-compatible server answers chat completions (readiness listed "
                                    "the model)"),
               # The error-code and sampling contracts hold for every chat deployment: text's checks.
               markers=("text", "error_codes", "sampling")),
    Capability("streaming", AlwaysTested("every OpenAI-compatible server streams chat completions"),
               # The wire checks read streams; clients leave streams mid-way: streaming's checks.
               markers=("streaming", "wire", "cancellation")),
    Capability("reasoning", Probed("chat_features", "probe_reasoning", report_rank=3)),
    Capability("thinking_modes", Probed("chat_features", "probe_reasoning", report_rank=4)),
    Capability("reasoning_effort", Undiscoverable(
        "an engine accepts reasoning_effort whether or not the model honours it, so no probe can tell; declare it "
        "in a model profile or require it with --expect reasoning_effort")),
    Capability("tools", Probed("chat_features", "probe_tools", report_rank=0), markers=("tools",)),
    Capability("code", AlwaysTested("writing a function is a text task: any chat model is asked"),
               markers=("code_exec",)),
    Capability("image", Probed("media", "probe_image", report_rank=1), markers=("image",)),
    Capability("video", Probed("media", "probe_video", report_rank=2), markers=("video",)),
    Capability("long_context", AlwaysTested("every model has a context: recall runs at the declared or advertised "
                                            "length"),
               markers=("recall", "recall_1m")),
    Capability("structured_outputs", Probed("structured", "probe_structured", report_rank=6),
               markers=("structured_outputs",)),
    Capability("responses", Probed("responses", "probe_responses", report_rank=7), markers=("responses",),
               own_route=True),
    # Probed for the token counts, but no model capability: what stands in for it is a local tokenizer.
    Capability("tokenize", Probed("tokenize", "probe_tokenize", report_rank=5), in_profiles=False, own_route=True,
               intent_override="if the deployment has no tokenize endpoint on purpose, count locally with "
                               "--tokenizer FILE (the served model's tokenizer.json) or add the refusal to the "
                               "engine profile's refusals.tokenize"),
)

# Every marker that groups checks, in the order of the verdict's check-group table; a check
# belongs to the first whose marker it carries.
CHECK_GROUPS: tuple[CheckGroup, ...] = (
    CheckGroup("text", "plain text answers (TEST-PLAN 1)"),
    CheckGroup("streaming", "streamed replies (TEST-PLAN 1)"),
    CheckGroup("thinking", "thinking modes and reasoning effort (TEST-PLAN 2)"),
    CheckGroup("tools", "parallel tool calls (TEST-PLAN 3)"),
    CheckGroup("tool_accuracy", "tool-call accuracy over the committed set of 300+ requests, streamed and not "
                                "(issue 17)"),
    CheckGroup("code_exec", "model-written code run in a sandbox (TEST-PLAN 4)"),
    CheckGroup("image", "image understanding (TEST-PLAN 5)"),
    CheckGroup("video", "video understanding (TEST-PLAN 5)"),
    CheckGroup("corrupt_media", "corrupt media must get a 4xx (TEST-PLAN 6)"),
    CheckGroup("structured_outputs", "response_format json_schema and json_object (issue 15)"),
    CheckGroup("error_codes", "invalid request values get a 4xx with an error body naming the problem (issue 15)"),
    CheckGroup("sampling", "max_tokens, stop, n, logprobs and seed do what they say (issue 15)"),
    CheckGroup("wire", "the raw stream: role, usage and finish_reason chunks, tool-call indexes, UTF-8, framing "
                       "(issue 15)"),
    CheckGroup("responses", "the Responses API, /v1/responses, where served (issue 15)"),
    CheckGroup("cancellation", "clients that disconnect leave the engine serving and free what they held "
                               "(issue 15)"),
    CheckGroup("throughput", "throughput smoke with TTFT/TPOT/E2E (TEST-PLAN 7)"),
    CheckGroup("recall", "long-context recall (TEST-PLAN 8)"),
    CheckGroup("recall_1m", "million-token recall (TEST-PLAN 8)"),
    CheckGroup("auth", "API key handling (TEST-PLAN 9)"),
    CheckGroup("soak", "mixed-traffic soak, off unless --soak-minutes is given (seed 001)"),
    CheckGroup("slo", "open-loop arrivals against service-level objectives: attainment and goodput (issue 18)"),
)

# --- derived: everything else reads these -------------------------------------------------

_BY_NAME: Mapping[str, Capability] = {entry.name: entry for entry in CAPABILITIES}
# The model profiles' vocabulary (and --expect, --not-served), in the verdict's row order.
PROFILE_VOCABULARY: tuple[str, ...] = tuple(entry.name for entry in CAPABILITIES if entry.in_profiles)
# The check groups' markers, in the group table's order.
GROUP_MARKERS: tuple[str, ...] = tuple(group.marker for group in CHECK_GROUPS)


def capability(name: str) -> Capability:
    """The entry named `name`; KeyError naming the known ones for any other."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown capability {name!r}; known: {', '.join(_BY_NAME)}") from None


def probed_capabilities() -> tuple[Capability, ...]:
    """The capabilities a probe asks about (the keys of an engine profile's ``refusals:``), in report order."""
    probed = [entry for entry in CAPABILITIES if entry.probe is not None]
    return tuple(sorted(probed, key=lambda entry: entry.probe.report_rank))  # type: ignore[union-attr]


def capability_of_marker() -> dict[str, str]:
    """Marker -> the capability its checks test without ``requires(...)``."""
    return {marker: entry.name for entry in CAPABILITIES for marker in entry.markers}


def stated_intent(name: str) -> str:
    """How the user states that `name` is off on purpose, for a broken probe's evidence."""
    entry = _BY_NAME.get(name)
    if entry is not None and entry.intent_override is not None:
        return entry.intent_override
    return (f"if the deployment does not offer {name} on purpose, run with --not-served {name} "
            f"(or not_served: [{name}] in the model profile)")
