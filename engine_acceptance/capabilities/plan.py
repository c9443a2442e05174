"""What the deployment serves, what was required of it, and what the run tested.

A green gate must mean "every capability this deployment serves was tested", not
"the model profile listed little". Three sources decide whether a capability's
checks run:

- the model profile declares it (a declared capability is always tested: if the
  engine refuses it, the checks fail with the engine's words; a reasoning parser
  that leaks reasoning into content looks to a probe like "no reasoning", and
  must not be skipped because of that);
- a probe found it *served* or *broken* (broken is served and fails its checks);
- the user or the profile requires it (``--expect``, ``expect:``): required and
  not served is a gate failure, and so is a required capability none of whose
  checks ran;
- the user or the profile states it is off on purpose (``--not-served``,
  ``not_served:``): skipped as "not served (stated)", saying where it was stated,
  whatever the probe found (a 4xx the engine profile does not recognize as a
  refusal is broken, and only a stated intent skips it).

Everything else is skipped with the reason: the engine's own words when it refused,
or why nothing could be probed. This module plans that before the run and judges
coverage after it; it imports no pytest.

Which capabilities there are, in which order, and each one's coverage rule (tested on
every deployment, found by a probe, or only when declared or required) are the
registry's (:mod:`engine_acceptance.capabilities.registry`). Planning lives in
``capabilities/``, above ``profiles/``, because it reads both the model profile and
discovery's results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine_acceptance.capabilities.discovery import Discovery
from engine_acceptance.capabilities.registry import PROFILE_VOCABULARY, capability
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.reporting.results import CapabilityRow

__all__ = ["STATED_NOT_SERVED", "CapabilityPlan",
           "coverage_rows", "effective_profile", "plan_capabilities", "stated_not_served",
           "validate_capability_names"]

# The discovered state of a capability the user or the profile says is off on purpose.
STATED_NOT_SERVED = "not_served (stated)"


@dataclass(frozen=True)
class CapabilityPlan:
    """Before the run: whether a capability's checks run, and why (not)."""

    name: str
    declared: bool
    discovered: str  # served, not_served, broken, not_probed, "not_served (stated)", or "-" (no probe needed)
    evidence: str
    required: bool
    tested: bool
    reason: str  # why it is tested, or the skip reason when it is not

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def validate_capability_names(names: Iterable[str], *, source: str) -> frozenset[str]:
    """The names as a set; ValueError naming the source and the valid names for an unknown one."""
    chosen = frozenset(name.strip() for name in names if name.strip())
    unknown = sorted(chosen - set(PROFILE_VOCABULARY))
    if unknown:
        raise ValueError(f"{source}: unknown capability {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(PROFILE_VOCABULARY)}")
    return chosen


def stated_not_served(profile: ModelProfile, option: Iterable[str]) -> dict[str, str]:
    """Capability -> where it was stated off on purpose: ``--not-served`` or the model profile's ``not_served``.

    ValueError for a capability every deployment is tested on (text, streaming, code,
    long_context): those have no "off".
    """
    stated = {name: f"model profile {profile.name!r} not_served ({profile.source})" for name in profile.not_served}
    stated.update({name: "--not-served" for name in option})
    always = sorted(name for name in stated
                    if name in PROFILE_VOCABULARY and capability(name).always_tested is not None)
    if always:
        raise ValueError(f"{', '.join(map(repr, always))} cannot be stated not served ({stated[always[0]]}): "
                         f"{capability(always[0]).always_tested}")
    return stated


def plan_capabilities(profile: ModelProfile, discovery: Discovery | None,
                      required: frozenset[str], stated: Mapping[str, str] | None = None) -> dict[str, CapabilityPlan]:
    """Each capability's plan; `stated` maps a capability stated off on purpose to where it was stated."""
    stated = stated or {}
    plans = {}
    for name in PROFILE_VOCABULARY:
        entry = capability(name)
        probe = discovery.probes.get(name) if discovery is not None else None
        # A capability every server has needs no probe: "-" rather than "not probed".
        state = probe.state if probe is not None else "-" if entry.always_tested is not None else "not_probed"
        evidence = probe.evidence if probe is not None else _unprobed_evidence(name, discovery)
        declared = profile.has(name)
        is_required = name in required
        if name in stated:
            # The user's word for this deployment wins over the probe and the profile's declaration;
            # what the probe found stays in the evidence, so a stated capability that works is visible.
            plans[name] = CapabilityPlan(name, declared, STATED_NOT_SERVED, f"probe: {state.replace('_', ' ')}: "
                                         f"{evidence}", is_required, False,
                                         f"not served (stated with {stated[name]}); probe found it "
                                         f"{state.replace('_', ' ')}: {evidence}")
            continue
        if entry.always_tested is not None:
            tested, reason = True, entry.always_tested
        elif declared:
            tested, reason = True, f"declared by model profile {profile.name!r}"
        elif state in ("served", "broken"):
            tested, reason = True, f"{state} (probe: {evidence})"
        elif state == "not_served":
            tested = False
            reason = f"not served by the engine: {evidence}"
        elif is_required:
            tested, reason = True, "required with --expect or the profile's expect"
        else:
            tested = False
            reason = (f"model profile {profile.name!r} does not declare {name!r} and no probe found it: "
                      f"{entry.undiscoverable or evidence}")
        plans[name] = CapabilityPlan(name, declared, state, evidence, is_required, tested, reason)
    return plans


def _unprobed_evidence(name: str, discovery: Discovery | None) -> str:
    undiscoverable = capability(name).undiscoverable
    if undiscoverable is not None:
        return undiscoverable
    return "capability discovery did not run" if discovery is None else "no probe for it"


def effective_profile(profile: ModelProfile, plans: Mapping[str, CapabilityPlan],
                      discovery: Discovery | None) -> ModelProfile:
    """The model profile the checks use: what is tested, with discovered settings where the profile has none."""
    changes: dict[str, Any] = {"capabilities": frozenset(name for name, plan in plans.items() if plan.tested)}
    probes = discovery.probes if discovery is not None else {}
    thinking = probes.get("thinking_modes")
    if not profile.thinking_modes and thinking is not None and thinking.settings.get("modes"):
        changes["thinking_modes"] = dict(thinking.settings["modes"])
    reasoning = probes.get("reasoning")
    if not profile.has("reasoning") and reasoning is not None and reasoning.state in ("served", "broken"):
        changes["reasoning_default_on"] = bool(reasoning.settings.get("default_on", True))
    return dataclasses.replace(profile, **changes)


def coverage_rows(plans: Mapping[str, CapabilityPlan],
                  outcomes: Iterable[tuple[frozenset[str], str, str]],
                  allow_untested: frozenset[str] = frozenset()) -> list[CapabilityRow]:
    """Judge each capability from the checks' outcomes: (capabilities covered, outcome, reason).

    A capability counts as tested only when at least one of its checks passed outright: one
    whose every executed check failed as a record is *known broken*, not passed, and a
    required one fails the gate. A capability the run meant to test (served, broken,
    declared, required, or one every server has) whose selected checks were all skipped
    fails the gate unless `allow_untested` names it; one whose checks `-m` did not select
    is "not selected in this run" (a failure only when required).
    """
    tally: dict[str, dict[str, int]] = {name: {} for name in plans}
    skip_reasons: dict[str, list[str]] = {name: [] for name in plans}
    for covers, outcome, reason in outcomes:
        for name in covers & plans.keys():
            tally[name][outcome] = tally[name].get(outcome, 0) + 1
            if outcome == "skipped" and reason:
                skip_reasons[name].append(reason)
    return [_row(plan, tally[name], skip_reasons[name], name in allow_untested) for name, plan in plans.items()]


def _row(plan: CapabilityPlan, counts: Mapping[str, int], skip_reasons: list[str], allowed: bool) -> CapabilityRow:
    name = plan.name
    passed, known = counts.get("passed", 0), counts.get("known_defect", 0)
    failed = counts.get("failed", 0) + counts.get("stale_record", 0)
    ran = passed + known + failed
    skipped = counts.get("skipped", 0)
    first_skip = skip_reasons[0] if skip_reasons else "no reason given"
    failure = None
    result = ""
    if plan.required and plan.discovered == "not_served":
        failure = f"required capability {name!r} is not served: {plan.evidence}"
    elif plan.required and ran == 0:
        why = f" ({skipped} skipped: {first_skip})" if skipped else " (none selected in this run)"
        failure = f"required capability {name!r} was not tested: none of its checks ran{why}"
    elif plan.required and not passed and not failed:
        # Failed checks already fail the gate; a required capability known only as broken must too.
        failure = (f"required capability {name!r} is known broken: all {known} of its executed checks failed as "
                   "expected-failure records describe, none passed")
    elif plan.tested and ran == 0 and skipped and not allowed:
        failure = (f"capability {name!r} is {_meant(plan)} but was not tested: all {skipped} of its selected checks "
                   f"were skipped ({first_skip}); if that is intended, run with --allow-untested {name}")
    if failure:
        result = "FAIL: " + failure
    elif ran == 0 and not plan.tested:
        result = f"not tested: {plan.reason}"
    elif ran == 0 and skipped:
        result = f"not tested (allowed with --allow-untested): all {skipped} skipped ({first_skip})"
    elif ran == 0:
        result = "not selected in this run"
    elif failed:
        result = f"{failed} failed" + (f", {passed} passed" if passed else "") + (f", {known} known" if known else "")
    elif not passed:
        result = f"known broken ({known} record{'s' if known != 1 else ''}): no check passed"
    elif known:
        result = f"passed ({known} known defect(s))"
    else:
        result = "passed"
    return CapabilityRow(name, plan.declared, plan.discovered, plan.evidence, plan.required, ran, skipped, failed,
                         result, failure, passed=passed, known=known, tested=passed > 0, allowed_untested=allowed)


def _meant(plan: CapabilityPlan) -> str:
    """Why the run meant to test the capability, for a gate failure."""
    if plan.discovered == "broken":
        # What the probe found, in the engine's words: the checks that would have shown it were skipped.
        return f"broken by the deployment ({plan.evidence})"
    if plan.discovered == "served":
        return "served by the deployment"
    if plan.declared:
        return "declared by the model profile"
    if plan.required:
        return "required"
    return "tested on every deployment"
