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
from engine_acceptance.capabilities.registry import CAPABILITIES, PROFILE_VOCABULARY, capability, stated_intent
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.reporting.results import CapabilityRow, CheckOutcome

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
    """Each capability's plan; `stated` maps a capability stated off on purpose to where it was stated.

    ``stated["tokenize"]`` is the local tokenizer the run counts with (``--tokenizer``): the stated
    way around a broken tokenize endpoint (:func:`_probe_only_plan`).
    """
    stated = stated or {}
    plans = {}
    for entry in CAPABILITIES:
        name = entry.name
        probe = discovery.probes.get(name) if discovery is not None else None
        if not entry.core_checks:
            plans[name] = _probe_only_plan(name, probe, discovery, stated.get(name))
            continue
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
        elif state == "not_probed" and probe is not None:
            # The probe said why it could not ask (no way to send a video): that is the row's reason.
            tested, reason = False, f"not probed: {evidence}"
        else:
            tested = False
            reason = (f"model profile {profile.name!r} does not declare {name!r} and no probe found it: "
                      f"{entry.undiscoverable or evidence}")
        plans[name] = CapabilityPlan(name, declared, state, evidence, is_required, tested, reason)
    return plans


def _probe_only_plan(name: str, probe: Any, discovery: Discovery | None, counted_without: str | None
                     ) -> CapabilityPlan:
    """A capability with no checks of its own (tokenize): its plan is what its probe found.

    Nothing is "tested" on it (the measurements that use it fall back without it), so its row
    is the probe's finding; broken fails the gate (:func:`_probe_only_row`) unless the run was
    told how to do without it (`counted_without`, ``--tokenizer PATH``), as ``--not-served``
    states a model capability off. A served one stays served whatever the run was told: the
    measurements still use it.
    """
    state = probe.state if probe is not None else "not_probed"
    evidence = probe.evidence if probe is not None else _unprobed_evidence(name, discovery)
    if state == "broken" and counted_without:
        return CapabilityPlan(name, False, STATED_NOT_SERVED, f"probe: broken: {evidence}", False, False,
                              f"not used (stated with {counted_without}); probe found it broken: {evidence}")
    reasons = {"served": "served: the measurements count prompt tokens with it",
               "not_served": f"not served ({evidence}): the measurements count with --tokenizer where given, "
                             "else estimate",
               "not_probed": f"not probed: {evidence}",
               "broken": f"broken: {evidence}"}
    return CapabilityPlan(name, False, state, evidence, False, False, reasons[state])


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


def coverage_rows(plans: Mapping[str, CapabilityPlan], outcomes: Iterable[CheckOutcome],
                  allow_untested: frozenset[str] = frozenset(), *, stale_warned: bool = False) -> list[CapabilityRow]:
    """Judge each capability from the checks' outcomes (each with what it covers and is core for).

    A capability counts as tested only when one of its *core* checks (the registry's: one that
    exercises the capability itself) passed outright; its other checks count as ran, failed or
    known. One whose core checks failed as records describe is *known broken*, not passed, and a
    required one fails the gate. A capability the run meant to test (served, broken, declared,
    required, or one every server has) whose selected core checks were all skipped fails the
    gate unless `allow_untested` names it; one whose checks `-m` did not select is "not selected
    in this run" (a failure only when required). A capability discovery found broken fails the
    gate unless a check shows the breakage (a failure, or a record that describes it): also when
    its checks were not selected, all skipped, or all passed. With ``stale_warned``
    (``--stale-records=warn``) a check whose record went stale passed and fails nothing: it is
    said apart as warned, never counted as failed.
    """
    tallies = {name: _Tally(stale_warned=stale_warned) for name in plans}
    for outcome in outcomes:
        for name in outcome.covers & plans.keys():
            tallies[name].add(outcome, core=name in outcome.core)
    return [_row(plan, tallies[name], name in allow_untested) for name, plan in plans.items()]


@dataclass
class _Tally:
    """A capability's checks by outcome, all of them and its core checks apart, with the first skip reasons."""

    every: dict[str, int] = dataclasses.field(default_factory=dict)
    core: dict[str, int] = dataclasses.field(default_factory=dict)
    skip_reason: str = ""
    core_skip_reason: str = ""
    stale: int = 0
    # --stale-records=warn: a stale record's check passed (the defect is fixed) and fails nothing.
    stale_warned: bool = False
    warned: int = 0

    def add(self, outcome: CheckOutcome, *, core: bool) -> None:
        kind = outcome.outcome
        if kind == "stale_record":
            # A stale record fails the gate, so it counts as failed; warned, its check passed, said apart.
            kind = "passed" if self.stale_warned else "failed"
            self.warned += self.stale_warned
            self.stale += 1
        self.every[kind] = self.every.get(kind, 0) + 1
        if core:
            self.core[kind] = self.core.get(kind, 0) + 1
        if kind == "skipped" and outcome.reason:
            self.skip_reason = self.skip_reason or outcome.reason
            if core:
                self.core_skip_reason = self.core_skip_reason or outcome.reason

    def count(self, kind: str, *, core: bool = False) -> int:
        return (self.core if core else self.every).get(kind, 0)

    def ran(self, *, core: bool = False) -> int:
        return sum(self.count(kind, core=core) for kind in ("passed", "known_defect", "failed"))


def _row(plan: CapabilityPlan, tally: _Tally, allowed: bool) -> CapabilityRow:
    if not capability(plan.name).core_checks:
        return _probe_only_row(plan)
    name = plan.name
    passed, known, failed = tally.count("passed"), tally.count("known_defect"), tally.count("failed")
    ran, skipped = tally.ran(), tally.count("skipped")
    core_passed, core_known = tally.count("passed", core=True), tally.count("known_defect", core=True)
    core_skipped = tally.count("skipped", core=True)
    first_skip = tally.skip_reason or "no reason given"
    core_skip = tally.core_skip_reason or "no reason given"
    counted = ", ".join(f"{count} {kind}" for count, kind in ((passed, "passed"), (known, "known")) if count)
    others = f" ({ran} other check(s) ran: {counted})" if ran else ""
    failure = short = None
    if plan.required and plan.discovered == "not_served":
        failure = f"required capability {name!r} is not served: {plan.evidence}"
    elif plan.discovered == "broken" and not failed and not known:
        short, failure = _unshown_breakage(plan, ran, skipped, first_skip)
    elif plan.required and ran == 0:
        why = f" ({skipped} skipped: {first_skip})" if skipped else " (none selected in this run)"
        failure = f"required capability {name!r} was not tested: none of its checks ran{why}"
    elif plan.required and not core_passed and not failed and core_known:
        # Failed checks already fail the gate; a required capability known only as broken must too.
        failure = (f"required capability {name!r} is known broken: no core check (one that exercises {name} "
                   f"itself) passed, {core_known} failed as expected-failure records describe"
                   + (f" and {core_skipped} skipped ({core_skip})" if core_skipped else ""))
    elif plan.required and not core_passed and not failed:
        why = (f"all {core_skipped} selected were skipped ({core_skip})" if core_skipped else
               "none was selected in this run")
        failure = (f"required capability {name!r} was not tested: no core check (one that exercises {name} "
                   f"itself) passed: {why}{others}")
    elif plan.tested and ran == 0 and skipped and not allowed:
        failure = (f"capability {name!r} is {_meant(plan)} but was not tested: all {skipped} of its selected checks "
                   f"were skipped ({first_skip}); if that is intended, run with --allow-untested {name}")
    elif plan.tested and not core_passed and not core_known and core_skipped and not failed and not allowed:
        failure = (f"capability {name!r} is {_meant(plan)} but was not tested: all {core_skipped} of its selected "
                   f"core checks (those that exercise {name} itself) were skipped ({core_skip}){others}; if that is "
                   f"intended, run with --allow-untested {name}")
    if failure:
        result = "FAIL: " + (short or failure)
    elif ran == 0 and not plan.tested:
        result = f"not tested: {plan.reason}"
    elif ran == 0 and skipped:
        result = f"not tested (allowed with --allow-untested): all {skipped} skipped ({first_skip})"
    elif ran == 0:
        result = "not selected in this run"
    elif failed:
        result = f"{failed} failed" + (f", {passed} passed" if passed else "") + (f", {known} known" if known else "")
    elif core_passed:
        result = f"passed ({known} known defect(s))" if known else "passed"
    elif core_known:
        result = f"known broken ({known} record{'s' if known != 1 else ''}): no core check passed"
    elif core_skipped:
        result = (f"not tested (allowed with --allow-untested): its {core_skipped} core check(s) skipped "
                  f"({core_skip}){others}")
    else:
        result = f"not tested: its core checks were not selected in this run{others}"
    if tally.warned and not failure:
        plural = "s" if tally.warned != 1 else ""
        result += f"; {tally.warned} stale record{plural} warned (the check{plural} passed: --stale-records=warn)"
    return CapabilityRow(name, plan.declared, plan.discovered, plan.evidence, plan.required, ran, skipped, failed,
                         result, failure, passed=passed, known=known, tested=core_passed > 0,
                         allowed_untested=allowed, stale=tally.stale)


def _unshown_breakage(plan: CapabilityPlan, ran: int, skipped: int, first_skip: str) -> tuple[str, str]:
    """A capability discovery found broken that no failing or recorded check shows: its row's result, and its
    gate failure (the probe's words, and how to state the capability off on purpose)."""
    if ran:
        what = f"none of the {ran} of its checks that ran failed" + (f" ({skipped} skipped)" if skipped else "")
    elif skipped:
        what = f"all {skipped} of its selected checks were skipped ({first_skip})"
    else:
        what = "its checks were not selected"
    return (f"broken (discovered); {what}",
            f"capability {plan.name!r} is broken (discovered: {plan.evidence}); {what}{_intent_unless_said(plan)}")


def _intent_unless_said(plan: CapabilityPlan) -> str:
    """``; <how to state it off>``, unless the probe's evidence already ends with it (an unrecognized 4xx)."""
    intent = stated_intent(plan.name)
    return "" if intent in plan.evidence else f"; {intent}"


def _probe_only_row(plan: CapabilityPlan) -> CapabilityRow:
    """The row of a capability with no checks of its own (tokenize): the probe's finding; broken fails."""
    if plan.discovered != "broken":
        return CapabilityRow(plan.name, plan.declared, plan.discovered, plan.evidence, plan.required, 0, 0, 0,
                             plan.reason, None)
    failure = f"capability {plan.name!r} is broken (discovered: {plan.evidence}){_intent_unless_said(plan)}"
    return CapabilityRow(plan.name, plan.declared, plan.discovered, plan.evidence, plan.required, 0, 0, 0,
                         f"FAIL: broken (discovered): {plan.evidence}", failure)


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
