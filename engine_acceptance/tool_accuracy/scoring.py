"""The figures of a tool-accuracy run, and the confusion of its triggers against a baseline.

- schema-valid arguments: calls whose arguments are JSON that fits the named tool's
  schema, out of all calls (a call to a tool that was not offered is invalid);
- finish_reason consistency: replies whose ``finish_reason`` is "tool_calls" exactly
  when they call tools, out of the replies judged: answered (an HTTP error is the
  "answered" check's finding, counted there once) and ended before max_tokens (a cut
  reply's "length" says nothing about its calls; it is counted in ``finish_cut``);
- streamed = non-streamed: cases whose streamed calls reassemble to the non-streamed
  calls (names and parsed arguments), out of the cases whose two replies both ran to
  their end: a reply cut by max_tokens streams the part of a call it had written, while
  a non-streamed parser sees an unfinished call and keeps it as text, so cut replies
  differ by construction (their broken arguments are the schema check's finding);
- trigger precision / recall / F1: "did it call a tool?" per case and mode, against
  the same case and mode of a baseline recorded from a trusted deployment (K2's
  tool-call trigger similarity), and against the set's intended labels for reference.

Each rate is a :class:`~engine_acceptance.proportions.Proportion` (k/n with its Wilson bounds).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.proportions import Proportion
from engine_acceptance.tool_accuracy.dataset import ToolCase
from engine_acceptance.tool_accuracy.runner import CaseOutcome

__all__ = ["Confusion", "ToolScore", "confusion", "score"]


@dataclass(frozen=True)
class Confusion:
    """Trigger decisions of a candidate against a reference: did each call a tool?"""

    both: int        # true positives
    only_candidate: int  # false positives
    only_reference: int  # false negatives
    neither: int     # true negatives

    @property
    def total(self) -> int:
        return self.both + self.only_candidate + self.only_reference + self.neither

    @property
    def precision(self) -> float | None:
        called = self.both + self.only_candidate
        return self.both / called if called else None

    @property
    def recall(self) -> float | None:
        expected = self.both + self.only_reference
        return self.both / expected if expected else None

    @property
    def f1(self) -> float | None:
        """None when neither side ever called: F1 is undefined, and agreement says it all."""
        positives = 2 * self.both + self.only_candidate + self.only_reference
        return 2 * self.both / positives if positives else None

    @property
    def agreement(self) -> Proportion:
        return Proportion(self.both + self.neither, self.total)

    def as_dict(self) -> dict[str, Any]:
        return {"both_called": self.both, "only_candidate_called": self.only_candidate,
                "only_reference_called": self.only_reference, "neither_called": self.neither,
                "precision": _round(self.precision), "recall": _round(self.recall), "f1": _round(self.f1),
                "agreement": _round(self.agreement.rate)}


def confusion(candidate: Mapping[tuple[str, bool], bool], reference: Mapping[tuple[str, bool], bool]) -> Confusion:
    """Compare triggers on the (case id, streamed) keys both sides have."""
    tally = Counter((candidate[key], reference[key]) for key in candidate.keys() & reference.keys())
    return Confusion(tally[(True, True)], tally[(True, False)], tally[(False, True)], tally[(False, False)])


@dataclass(frozen=True)
class ToolScore:
    cases: int
    replies: int
    errors: int
    calls: int
    schema_valid: Proportion
    finish_consistent: Proportion  # over the judged replies: answered, not cut by max_tokens
    stream_agreement: Proportion
    # Cases left out of stream_agreement: an error or a reply cut by max_tokens on either side.
    stream_left_out: int
    intended: Confusion
    by_shape: dict[str, dict[str, Any]]
    triggers: dict[tuple[str, bool], bool]
    # Answered replies cut by max_tokens: left out of finish_consistent.
    finish_cut: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "replies": self.replies, "http_errors": self.errors, "calls": self.calls,
                "schema_valid": _proportion(self.schema_valid),
                "finish_reason_consistent": _proportion(self.finish_consistent),
                "finish_reason_cut_not_judged": self.finish_cut,
                "streamed_equals_non_streamed": _proportion(self.stream_agreement),
                "streamed_equals_non_streamed_left_out": self.stream_left_out,
                "trigger_vs_intended": self.intended.as_dict(), "by_shape": self.by_shape}


def score(cases: Sequence[ToolCase], outcomes: Iterable[CaseOutcome]) -> ToolScore:
    outcomes = list(outcomes)
    by_key = {(o.case_id, o.stream): o for o in outcomes}
    calls = [call for o in outcomes for call in o.calls]
    answered = [o for o in outcomes if o.error is None]
    judged = [o for o in answered if o.finish_judged]
    pairs = [(by_key.get((case.id, False)), by_key.get((case.id, True))) for case in cases]
    finished = [(plain, streamed) for plain, streamed in pairs if _ran_to_the_end(plain) and _ran_to_the_end(streamed)]
    agree = sum(1 for plain, streamed in finished if plain.signature() == streamed.signature())
    triggers = {key: o.triggered for key, o in by_key.items()}
    intended = confusion(triggers, {(case.id, stream): case.expect == "call"
                                    for case in cases for stream in (False, True)})
    return ToolScore(
        cases=len(cases), replies=len(outcomes), errors=sum(1 for o in outcomes if o.error),
        calls=len(calls), schema_valid=Proportion(sum(1 for call in calls if call.valid), len(calls)),
        finish_consistent=Proportion(sum(1 for o in judged if o.finish_consistent), len(judged)),
        finish_cut=len(answered) - len(judged),
        stream_agreement=Proportion(agree, len(finished)), stream_left_out=len(cases) - len(finished),
        intended=intended,
        by_shape=_by_shape(cases, by_key), triggers=triggers,
    )


def _ran_to_the_end(outcome: CaseOutcome | None) -> bool:
    return outcome is not None and outcome.error is None and outcome.finish_reason != "length"


def _by_shape(cases: Sequence[ToolCase], by_key: Mapping[tuple[str, bool], CaseOutcome]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for case in cases:
        row = table.setdefault(case.shape, {"cases": 0, "replies_calling": 0, "calls": 0, "valid_calls": 0,
                                            "finish_inconsistent": 0, "errors": 0})
        row["cases"] += 1
        for stream in (False, True):
            outcome = by_key.get((case.id, stream))
            if outcome is None:
                continue
            row["replies_calling"] += outcome.triggered
            row["calls"] += len(outcome.calls)
            row["valid_calls"] += sum(call.valid for call in outcome.calls)
            row["finish_inconsistent"] += outcome.finish_judged and not outcome.finish_consistent
            row["errors"] += outcome.error is not None
    return table


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _proportion(value: Proportion) -> dict[str, Any]:
    return {"k": value.successes, "n": value.total, "rate": _round(value.rate), "wilson_lower": _round(value.lower),
            "wilson_upper": _round(value.upper)}
