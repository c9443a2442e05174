"""Measurements run smaller than declared, as data the verdict states.

A pass at a smaller size than the deployment declares is still a pass, but it is not
the pass its name promises: recall at 7,000 tokens on a model declaring 32,768, the
"million-token" check at 7,000 (or at the 131,072 tokens a model declares, when that is
all it has), throughput at two rounds instead of three, a thinking check judged on one
sample instead of five (``--trials``). Each such
:class:`Shortfall` is computed once, in the controller, from the options and the
model profile (so it is known even when the checks are skipped), and shown in the
capability row, in ``gate.json`` under ``shortfalls``, in the terminal gate table and
in the Allure environment. A shortfall does not by itself fail the gate; the checks
it concerns say the size they ran at.

This module imports no pytest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.media.cells import MediaCell, select_media_cells
from engine_acceptance.load.closed_loop.settings import DEFAULT_ROUNDS, DEFAULT_SHAPES, full_matrix, select_cells
from engine_acceptance.proportions import Proportion
from engine_acceptance.recall.haystack import ANSWER_ROOM_TOKENS, TEMPLATE_ROOM_TOKENS, RecallBudget, recall_budget
from engine_acceptance.trials import DEFAULT_SAMPLES

__all__ = ["DEFAULT_MEDIA_SHAPES", "MILLION_TOKENS", "SIZE_PROPERTY", "TRIAL_KIND_PROPERTY", "Shortfall",
           "million_note", "media_shortfalls", "recall_shortfalls", "throughput_shortfalls", "tool_accuracy_shortfalls",
           "trials_shortfalls"]

# The context the million-token checks are named for (MiniMax-M3's, seed 000).
MILLION_TOKENS = 1_048_576
# What --media-shapes measures unless told otherwise.
DEFAULT_MEDIA_SHAPES = "full"
_ROOM = ANSWER_ROOM_TOKENS + TEMPLATE_ROOM_TOKENS
# The user property a check records when it ran smaller than its name says ("ran at 7,000 tokens,
# not 1,048,576"): the terminal's status word and gate.json's figures carry it.
SIZE_PROPERTY = "size_shortfall"
# The user property (set at collection) naming the kind of trial a check samples (``thinking``): a
# ``--trials`` shortfall concerns the checks of its kind, wherever they are.
TRIAL_KIND_PROPERTY = "engine_acceptance.trial_kind"


@dataclass(frozen=True)
class Shortfall:
    """One measurement run smaller than declared or asked."""

    # Model-profile vocabulary (long_context), else the check group (throughput); "trials" for a --trials cut,
    # whose row notes go to the capabilities its checks cover.
    capability: str
    check: str  # the marker of the checks it concerns (recall, recall_1m, throughput), or the kind of trial
    module: str  # the test module of those checks (throughput has two: fixed-length and media); "" for trials
    measure: str  # what is smaller: prompt tokens, rounds per cell, cells, requests per round, samples per check
    declared: int  # what the model profile declares or the default asks
    ran: int  # what this run measured
    option: str | None  # the option that asked for less; None when the engine's own limit or the profile did
    why: str  # what the smaller size means, without the option: "a 7,000-token prompt"
    at: str  # the size as a check's result reads it: "at 7,000 of 32,768 declared tokens"
    summary: str  # the phrase for the capability row and the terminal: "recall at 7,000 of 32,768 declared tokens"
    # The parameter id of the one check a cell's shortfall concerns (the media input, the workload); "" for all.
    param: str = ""
    # The kind of trial (engine_acceptance.trials) whose checks a --trials cut concerns; "" for a measurement.
    trial_kind: str = ""

    def concerns(self, nodeid: str, marker: str, *, trial_kind: str = "", outcome: str = "") -> bool:
        """Whether a check (its node id, capability marker, kind of trial and outcome) ran under this shortfall.

        A measurement's shortfall is known before its checks run, so it concerns them even when they
        skip; a trials cut concerns only the checks of its kind that ran: a skipped one sent no sample.
        """
        if self.trial_kind:
            return trial_kind == self.trial_kind and outcome != "skipped"
        path, _, name = nodeid.partition("::")
        return (marker == self.check and path.endswith(self.module)
                and (not self.param or name.endswith(f"[{self.param}]")))

    def check_result(self, outcome: str) -> str:
        """A check's outcome as it reads under this shortfall: ``passed at 7,000 tokens, not 1,048,576``."""
        return f"{outcome} {self.at}"

    def reason(self) -> str:
        """``--recall-tokens=7000: a 7,000-token prompt``: who asked for less, and what it means."""
        return f"{self.option}: {self.why}" if self.option else self.why

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "reason": self.reason()}


def million_note(budget: RecallBudget) -> str | None:
    """How a million-token check of this prompt size reads when it fills less than 1M, else None.

    ``ran at 7,000 tokens, not 1,048,576``; or, when the model's own context is smaller than a
    million (the profile's, else the engine's), against that: ``ran at 7,000 of the 131,072
    tokens the model declares``.
    """
    if budget.tokens + _ROOM >= MILLION_TOKENS:
        return None
    return f"ran {_million_at(budget)}"


def _million_at(budget: RecallBudget) -> str:
    """The size of a million-token check against the context it could have had."""
    if budget.context is not None and budget.context < MILLION_TOKENS:
        return f"at {budget.tokens:,} of the {budget.context:,} tokens {budget.context_by}"
    return f"at {budget.tokens:,} tokens, not {MILLION_TOKENS:,}"


def recall_shortfalls(*, requested: int | None, profile_context: int | None, max_model_len: int | None,
                      profile_name: str, field_tokens: int) -> list[Shortfall]:
    """The recall (``field_tokens`` at most, seed 001's 32K) and million-token checks below their size.

    Recall falls short when its prompt is smaller than the one the declared context takes
    (the profile's, else the engine's advertised ``max_model_len``); the million-token
    checks whenever their prompt fills less than :data:`MILLION_TOKENS` of context, said
    against the model's own context when that is smaller than a million.
    """
    try:
        budget = recall_budget(requested=requested, profile_context=profile_context, max_model_len=max_model_len,
                               profile_name=profile_name)
    except ValueError:
        return []  # nothing runs: the usage error or the recall checks' skip says why
    option = None if requested is None else f"--recall-tokens={requested}"
    context = budget.context
    stated = "declared" if profile_context is not None else "advertised"
    source = f"model profile {profile_name!r} declares" if profile_context is not None else "the engine advertises"
    declared_by = (f"declared by model profile {profile_name!r}" if profile_context is not None
                   else "advertised by the engine (max_model_len)")
    found = []
    if context is not None:
        full = min(field_tokens, context - _ROOM)
        ran = min(field_tokens, budget.tokens)
        if ran < full:
            why = (f"less than the {full:,}-token prompt of the {context:,}-token context {declared_by}" if option
                   else f"{budget.shortfall}: the checks that need that context fail")
            at = f"at {ran:,} of {context:,} {stated} tokens"
            found.append(Shortfall("long_context", "recall", "test_recall.py", "prompt tokens", context, ran, option,
                                   why, at, f"recall {at}"))
    if million_note(budget) is not None:
        if option:
            why = f"a {budget.tokens:,}-token prompt"
        elif budget.shortfall:
            why = f"{budget.shortfall}: the million-token checks fail"
        elif context is not None:
            why = f"{source} {context:,} tokens of context, less than a million"
        else:
            why = budget.explanation
        at = _million_at(budget)
        # What the check is named for: a million, or the model's own context when that is all it has.
        declared = context if context is not None and context < MILLION_TOKENS else MILLION_TOKENS
        summary = f"million-token recall {at}" if declared < MILLION_TOKENS else f"million-token recall ran {at}"
        found.append(Shortfall("long_context", "recall_1m", "test_recall.py", "prompt tokens", declared,
                               budget.tokens, option, why, at, summary))
    return found


def trials_shortfalls(*, requested: int | None, profile_trials: Mapping[str, int],
                      profile_name: str) -> list[Shortfall]:
    """Each kind of trial judged on fewer samples (``--trials=K``) than the model profile or the default asks.

    What the cut costs is said as the 95% Wilson lower bound a check's all-pass proves: 1/1 bounds
    the pass rate at 20.7%, 5/5 at 56.6%, so an engine fault hitting one request in five passes.
    """
    if requested is None:
        return []
    found = []
    for kind, default in DEFAULT_SAMPLES.items():
        asked = profile_trials.get(kind, default)
        if requested >= asked:
            continue
        source = (f"model profile {profile_name!r} asks (trials: {kind}: {asked})" if kind in profile_trials
                  else "the default asks")
        why = (f"each {kind} check sends {requested} sample(s), not the {asked} {source}: all passing bounds its "
               f"pass rate at {_all_pass_bound(requested)} (95% Wilson lower bound), not {_all_pass_bound(asked)}")
        at = f"at {requested} of {asked} samples"
        found.append(Shortfall("trials", kind, "", "samples per check", asked, requested, f"--trials={requested}",
                               why, at, f"{kind} trials {at} per check", trial_kind=kind))
    return found


def _all_pass_bound(samples: int) -> str:
    return f"{100 * Proportion(samples, samples).lower:.1f}%"


def throughput_shortfalls(*, shapes: str, rounds: int, cells: Iterable[Any],
                          threshold_cells: Iterable[str] = ()) -> list[Shortfall]:
    """Fixed-length throughput measured with fewer rounds, cells or requests than the default asks.

    ``cells`` are the selected :class:`~engine_acceptance.load.generator.Cell` s (``--throughput-shapes``);
    ``threshold_cells`` the cells the thresholds (model profile and command line) name.
    """
    cells = list(cells)
    module, option = "test_throughput.py", f"--throughput-shapes={shapes}"
    found = _rounds("throughput", module, rounds)
    default = select_cells(DEFAULT_SHAPES)
    found += _fewer_cells("throughput", module, option, DEFAULT_SHAPES, default, cells)
    # A cell's requests per round: the default's where it names the cell, else the seeds' matrix.
    reference = {**{c.key: c for c in full_matrix()}, **{c.key: c for c in default}}
    found += _fewer_requests("throughput", module, option, cells, reference,
                             param=lambda cell: "in{}-out{}".format(*cell.workload.split("/")))
    named = sorted(set(threshold_cells))
    missing = [key for key in named if key not in {c.key for c in cells}]
    if missing:
        found.append(Shortfall("throughput", "throughput", module, "cells the thresholds name", len(named),
                               len(named) - len(missing), option,
                               f"the thresholds name {', '.join(missing)}, which this run did not measure: "
                               f"their limits were not checked",
                               f"with {len(named) - len(missing)} of the {len(named)} cells the thresholds name",
                               f"throughput measured {len(named) - len(missing)} of the {len(named)} cells "
                               f"the thresholds name"))
    return found


def media_shortfalls(*, shapes: str, rounds: int, cells: Iterable[MediaCell]) -> list[Shortfall]:
    """Media throughput measured with fewer rounds, cells or requests per round than seed 001's (the default)."""
    cells = list(cells)
    module, option = "test_media_throughput.py", f"--media-shapes={shapes}"
    found = _rounds("media throughput", module, rounds)
    default = select_media_cells(DEFAULT_MEDIA_SHAPES)
    found += _fewer_cells("media throughput", module, option, DEFAULT_MEDIA_SHAPES, default, cells)
    found += _fewer_requests("media throughput", module, option, cells, {c.key: c for c in default},
                             param=lambda cell: cell.input.name)
    return found


def tool_accuracy_shortfalls(*, requested: int | None, set_size: int) -> list[Shortfall]:
    """The tool-accuracy set sent in part (``--tool-accuracy-cases``): every figure is of the sample."""
    if requested is None or requested >= set_size:
        return []
    at = f"at {requested} of {set_size} cases"
    return [Shortfall("tools", "tool_accuracy", "test_tool_accuracy.py", "cases", set_size, requested,
                      f"--tool-accuracy-cases={requested}",
                      f"{requested} cases picked evenly from each shape of the {set_size}-case set",
                      at, f"tool accuracy {at}")]


def _fewer_cells(name: str, module: str, option: str, default_shapes: str, default: list[Any],
                 cells: list[Any]) -> list[Shortfall]:
    """A shortfall when the run measured fewer of the default's cells than the default does.

    Counted by cell, not by number: other cells in their place (CI's 128/32 for the smoke's 128/128)
    measure something else, and the default's cells went unmeasured.
    """
    selected = {c.key for c in cells}
    measured = sum(1 for c in default if c.key in selected)
    if measured >= len(default):
        return []
    others = [c.key for c in cells if c.key not in {d.key for d in default}]
    instead = f"; this run measured {', '.join(others)} instead" if others else ""
    return [Shortfall("throughput", "throughput", module, "cells", len(default), measured, option,
                      f"the default ({default_shapes}) measures {', '.join(c.key for c in default)}{instead}",
                      f"at {measured} of {len(default)} cells", f"{name} at {measured} of {len(default)} cells")]


def _rounds(name: str, module: str, rounds: int) -> list[Shortfall]:
    if rounds >= DEFAULT_ROUNDS:
        return []
    return [Shortfall("throughput", "throughput", module, "rounds per cell", DEFAULT_ROUNDS, rounds,
                      f"--throughput-rounds={rounds}",
                      f"each figure is the median of {rounds} round(s) instead of {DEFAULT_ROUNDS}",
                      f"at {rounds} of {DEFAULT_ROUNDS} rounds per cell",
                      f"{name} at {rounds} of {DEFAULT_ROUNDS} rounds per cell")]


def _fewer_requests(name: str, module: str, option: str, cells: list[Any], reference: dict[str, Any], *,
                    param: Callable[[Any], str]) -> list[Shortfall]:
    """A shortfall per cell sending fewer requests per round than ``reference``; ``param`` names its check."""
    found = []
    for cell in cells:
        asked = reference.get(cell.key)
        if asked is not None and cell.requests < asked.requests:
            found.append(Shortfall("throughput", "throughput", module, f"requests per round of {cell.key}",
                                   asked.requests, cell.requests, option,
                                   f"the default sends {asked.requests} requests per round in {cell.key}",
                                   f"with {cell.key} at {cell.requests} of {asked.requests} requests per round",
                                   f"{name} {cell.key} at {cell.requests} of {asked.requests} requests per round",
                                   param(cell)))
    return found
