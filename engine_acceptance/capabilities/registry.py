"""The one registry of capabilities: one entry each, and every list the suite needs derived from it.

A capability is something a deployment serves or not (tools, image input, a Responses
endpoint). Its entry says everything the suite knows about it:

- its **name**, which is also its key everywhere a profile names it: a model profile's
  ``capabilities:``, ``expect:`` and ``not_served:``, ``--expect`` and ``--not-served``,
  and an engine profile's ``refusals:`` (``fixtures/schemas/*.schema.json`` list the same
  names; a self-test keeps them equal);
- whether a model profile may name it (``in_profiles``); every entry gets a row of the
  verdict's capability table, in the order of :data:`CAPABILITIES`, but ``tokenize`` is
  probed and is no model capability (what stands in for it is a local tokenizer, so
  ``--tokenizer`` is how its absence is stated, not ``--not-served``);
- its **markers**: the check groups whose checks test it even without ``requires(...)``;
- its **core checks** (``core_checks``): the checks that exercise the capability itself (for
  tools a tool call made and parsed, for image an answer about an image's content), named by
  check-id pattern ``module::test`` as records name checks (``*`` the only wildcard, a
  parametrized check matched with any parameter). A capability counts as *tested* only when
  one of them passed outright; its other checks (contracts around it: error codes, markup
  left in content, a tool result fed back) still count as ran, failed or known. A capability
  with no core checks (``tokenize``) has none of its own: its row of the verdict is its
  probe's finding;
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

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

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
    "is_core_check",
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
    # The checks that exercise the capability itself (module::test patterns): one passing is "tested".
    core_checks: tuple[str, ...] = ()
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

    def is_core(self, check: str) -> bool:
        """Whether `check` (``module::test[param]``, as records name checks) is one of this capability's core checks."""
        return any(_core_pattern(pattern).fullmatch(check) for pattern in self.core_checks)


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
               # The error-code and sampling contracts hold for every chat deployment: text's checks. (So does "a
               # cached prefix changes no answer": those checks of the prefix_cache group carry requires("text").)
               markers=("text", "error_codes", "sampling"),
               # A chat answer read for what it says; the models list, error codes, sampling parameters
               # and prompt-token accounting are contracts around it.
               core_checks=("test_text.py::test_reply_has_content_and_a_valid_finish_reason",
                            "test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion",
                            "test_text.py::test_arithmetic_answer_is_correct",
                            "test_text.py::test_multi_turn_conversation_recalls_the_codename",
                            "test_text.py::test_max_tokens_cuts_the_reply_with_finish_reason_length")),
    Capability("streaming", AlwaysTested("every OpenAI-compatible server streams chat completions"),
               # The wire checks read streams; clients leave streams mid-way: streaming's checks.
               markers=("streaming", "wire", "cancellation"),
               # A stream read whole: it ends, its chunks parse, it says what the reply says.
               core_checks=("test_streaming.py::test_stream_ends_with_done_and_a_final_finish_reason",
                            "test_streaming.py::test_every_stream_event_is_a_well_formed_chunk",
                            "test_streaming.py::test_streamed_reply_has_the_same_shape_as_the_non_streamed_reply")),
    # Reasoning found in its field (chat) or as a reasoning item (Responses); "no markers in content"
    # holds for a model that never reasons too, so it is no core check.
    Capability("reasoning", Probed("chat_features", "probe_reasoning", report_rank=3),
               core_checks=("test_reasoning_separation.py::"
                            "test_reasoning_arrives_in_the_reasoning_field_not_in_content",
                            "test_responses.py::test_reasoning_is_an_item_apart_from_the_output_text")),
    # The switch seen working: reasoning gone when off, there when on. The adaptive mode and the 240
    # question judge the answers the model gives in a mode, not the switch.
    Capability("thinking_modes", Probed("chat_features", "probe_reasoning", report_rank=4),
               core_checks=("test_thinking.py::test_disabled_mode_answers_in_content_without_reasoning",
                            "test_thinking.py::test_enabled_mode_returns_reasoning_apart_from_content")),
    Capability("reasoning_effort", Undiscoverable(
        "an engine accepts reasoning_effort whether or not the model honours it, so no probe can tell; declare it "
        "in a model profile or require it with --expect reasoning_effort"),
               core_checks=("test_thinking.py::test_reasoning_effort_is_accepted_and_the_model_still_reasons",
                            "test_thinking.py::test_high_effort_reasons_more_than_low_effort")),
    # A thinking token budget the engine applies (vLLM's thinking_token_budget): probed where the engine profile
    # names its field, since a deployment without a reasoning parser refuses it in its own words and one that
    # ignores it shows reasoning past the budget. It rides on the chat route: no route of its own.
    Capability("thinking_budget", Probed("thinking_budget", "probe_thinking_budget", report_rank=9),
               # Reasoning cut at the budget with the answer after it: the one check that sends a budget.
               core_checks=("test_reasoning_budget.py::"
                            "test_reasoning_stays_within_the_thinking_budget_and_the_answer_still_comes",)),
    # A tool call made and parsed: asked for (both cities), forced, streamed and compared, at scale, and
    # through the Responses API. Content free of markup, tool_choice "none", a result fed back, every
    # request answered and finish_reason hold for a model that never calls a tool too: not core.
    Capability("tools", Probed("chat_features", "probe_tools", report_rank=0), markers=("tools",),
               core_checks=("test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn",
                            "test_tools.py::test_tool_call_arguments_are_json_that_fits_the_schema",
                            "test_tools.py::test_streamed_tool_calls_reassemble_to_the_non_streamed_calls",
                            "test_tools.py::test_forced_named_tool_is_called",
                            "test_tool_accuracy.py::test_tool_call_arguments_fit_their_schemas_at_scale",
                            "test_tool_accuracy.py::test_streamed_tool_calls_equal_non_streamed_at_scale",
                            "test_wire.py::test_tool_call_deltas_are_indexed_from_zero_in_call_order",
                            "test_responses.py::test_function_call_round_trip_answers_the_result_in_text")),
    Capability("code", AlwaysTested("writing a function is a text task: any chat model is asked"),
               markers=("code_exec",),
               core_checks=("test_code_exec.py::test_unique_sorted_passes_the_hidden_cases_in_the_sandbox",)),
    # An answer about the media's content; an unreachable image URL (error codes) and corrupt media are
    # refusals, not answers.
    Capability("image", Probed("media", "probe_image", report_rank=1), markers=("image",),
               core_checks=("test_image.py::*",
                            "test_media_throughput.py::test_media_load_is_served_in_full_with_the_right_answers")),
    Capability("video", Probed("media", "probe_video", report_rank=2), markers=("video",),
               core_checks=("test_video.py::test_video_background_colors_are_listed_in_order",
                            "test_media_throughput.py::test_media_load_is_served_in_full_with_the_right_answers")),
    Capability("long_context", AlwaysTested("every model has a context: recall runs at the declared or advertised "
                                            "length"),
               markers=("recall", "recall_1m"),
               # The codes found in a long prompt; the prompt-token counts are accounting, not recall.
               core_checks=("test_recall.py::test_field_extraction_returns_the_asked_key_exactly",
                            "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found",
                            "test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json")),
    # JSON made to a schema or as an object; an uncompilable schema's refusal is an error path.
    Capability("structured_outputs", Probed("structured", "probe_structured", report_rank=6),
               markers=("structured_outputs",),
               core_checks=("test_structured_outputs.py::test_json_schema_reply_is_json_that_fits_the_schema",
                            "test_structured_outputs.py::test_json_object_reply_is_a_json_object")),
    Capability("responses", Probed("responses", "probe_responses", report_rank=7), markers=("responses",),
               own_route=True,
               core_checks=("test_responses.py::test_text_answer_is_a_message_with_output_text_and_usage_that_adds_up",
                            "test_responses.py::test_streamed_events_come_in_order",
                            "test_responses.py::test_streamed_text_deltas_add_up_to_the_final_text")),
    # A prefix cache that reports its hits (usage.prompt_tokens_details.cached_tokens or /metrics counters): its
    # own capability, since only a deployment that reports hits can be held to them; the probe sends one long
    # prefix twice. It rides on the chat route: no route of its own.
    Capability("prefix_cache", Probed("prefix_cache", "probe_prefix_cache", report_rank=8),
               # The hit reported for a prefix sent again is the only check that exercises the cache as such. The
               # checks that a cached prefix changes no answer (alone, in a shared-prefix batch) and the cold/warm
               # TTFT carry requires("text"), not requires("prefix_cache"): any deployment may cache prefixes,
               # reported or not, so they run and count for text everywhere; a core pattern here would never
               # apply to them (a core check counts only for the capabilities it covers).
               core_checks=("test_prefix_cache.py::test_repeated_long_prefix_is_reported_as_a_cache_hit",)),
    # Probed for the token counts, but no model capability: what stands in for it is a local tokenizer.
    # No core checks: the measurements that use it fall back to --tokenizer or estimates, so its row is
    # the probe's finding, and a broken one fails the gate itself.
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
    CheckGroup("agent", "multi-turn agent loops: reasoning, tool calls, tool results and follow-ups over four turns "
                        "(issue 41)"),
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
    CheckGroup("prefix_cache", "a long prefix sent again is a cache hit and changes no answer; TTFT cold and warm "
                               "(issue 41)"),
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


@lru_cache(maxsize=256)
def _core_pattern(pattern: str) -> re.Pattern[str]:
    # As records match checks: only * is a wildcard ([ ] are a parameter's brackets, not a class); a
    # pattern without a parameter matches the check with any.
    body = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.compile(body if pattern.endswith("]") or pattern.endswith("*") else rf"{body}(?:\[.*\])?")


def is_core_check(name: str, check: str) -> bool:
    """Whether `check` (``module::test[param]``) is a core check of capability `name`: one that exercises it.

    False for a name the registry does not know (a ``requires(...)`` of a user's own check).
    """
    entry = _BY_NAME.get(name)
    return entry is not None and entry.is_core(check)


def stated_intent(name: str) -> str:
    """How the user states that `name` is off on purpose, for a broken probe's evidence."""
    entry = _BY_NAME.get(name)
    if entry is not None and entry.intent_override is not None:
        return entry.intent_override
    return (f"if the deployment does not offer {name} on purpose, run with --not-served {name} "
            f"(or not_served: [{name}] in the model profile)")
