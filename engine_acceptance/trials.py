"""Repeated trials of a check of model behaviour: K samples, a rule, and k/K with its Wilson bound.

A model on a batching engine does not answer the same way twice, so a check of model
behaviour that sends one request is either flaky or too lenient, and an engine fault that
hits one request in five is seen one run in five. A trial runs the check's *sample* K times,
concurrently (the K requests go out together, as a deployment's traffic does), counts the
samples that passed and judges the count by the check's rule: every sample (``all 5``) or
at least a rate (``at least 80% of 5``). The count is reported as k/K with its 95% Wilson
lower bound, like the seeds' tables (seed 001: disabled 0/3, enabled 3/3).

A sample fails by raising ``AssertionError``; its message is the sample's reason (a failed
request fails through ``assertions.reply_of``, which raises one). Each failing sample is a
problem of its own (with its number) when the trial fails: an expected-failure record must
describe every failing sample, not only the first (:meth:`TrialResult.failure`); a check that
words its failure from the whole result (a count of answers) lists every problem it finds, each
its own line, never the first alone. Any other exception (a
skip, ``pytest.fail``, a bug in the check) is not a sample's result: it propagates
unchanged once every sample has finished, so no request is left running.

Protocol checks (framing, status codes, field names, usage arithmetic) do not use this:
one violation is a failure. A plain library, no pytest: ``fixtures/trials.py`` wires it
into the checks and the report.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.assertions import SeveralProblems, problems_of
from engine_acceptance.option_spec import OptionSpec, whole_number_at_least_one
from engine_acceptance.proportions import Proportion
from engine_acceptance.reporting.csv_text import rows_csv

__all__ = ["DEFAULT_SAMPLES", "OPTIONS", "TRIAL_KINDS", "SampleResult", "TrialResult", "TrialRule",
           "current_sample", "run_trials", "samples_for", "trial_count"]

# K per kind of check when neither --trials nor the model profile's ``trials:`` says.
DEFAULT_SAMPLES: dict[str, int] = {
    "answers": 3,
    # 5: an engine that ignores the thinking switch one time in five (issue 17) fails every run.
    "thinking": 5,
    "tools": 3,
    "image": 3,
    # 1: a recall sample is a prompt of up to 1M tokens (minutes of prefill on a real engine,
    # and K of them at once would need K times the KV cache); it runs alone in the measurement
    # phase, so K more would multiply the longest part of the run. A profile may ask for more.
    "recall": 1,
}
TRIAL_KINDS = tuple(DEFAULT_SAMPLES)


def trial_count(raw: str) -> int:
    """K, the samples of each model-behaviour check: a whole number, at least 1 (--trials' type)."""
    return whole_number_at_least_one(raw, "samples", "a check")


OPTIONS = (
    OptionSpec("--trials", type=trial_count, default=None, metavar="K",
               help="Samples of every model-behaviour check, sent together and judged by the check's rule; overrides "
                    "the model profile's trials (default: the profile's, else "
                    + ", ".join(f"{kind} {count}" for kind, count in DEFAULT_SAMPLES.items()) + ")"),
)
TRIAL_KINDS = tuple(DEFAULT_SAMPLES)

Sample = Callable[[], Awaitable[Any]]

# (number, K) of the sample running in this task: the chat fixture labels its report steps with it.
_CURRENT_SAMPLE: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("trial_sample",
                                                                                         default=None)
# Reasons in the report's table are cut to this many characters (the failure message keeps the first whole).
_REASON_LIMIT = 160


def current_sample() -> tuple[int, int] | None:
    """``(number, K)`` when called inside a trial's sample (1-based), else None."""
    return _CURRENT_SAMPLE.get()


def samples_for(kind: str, *, override: int | None = None, profile: Mapping[str, int] | None = None) -> int:
    """K for a check of this kind: ``--trials`` first, then the model profile's ``trials:``, then the default."""
    if kind not in DEFAULT_SAMPLES:
        raise ValueError(f"unknown kind of trial {kind!r}; known: {', '.join(TRIAL_KINDS)}")
    if override is not None:
        return override
    return (profile or {}).get(kind, DEFAULT_SAMPLES[kind])


@dataclass(frozen=True)
class TrialRule:
    """K samples, and how many must pass: all of them (``at_least`` None) or at least that share."""

    samples: int
    at_least: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"a trial needs at least one sample, got {self.samples!r}")
        if self.at_least is not None and not 0 < self.at_least <= 1:
            raise ValueError(f"a rate rule needs a share in (0, 1], got {self.at_least!r}")

    @property
    def required(self) -> int:
        """The samples that must pass; a rate is rounded up (80% of 3 needs 3)."""
        if self.at_least is None:
            return self.samples
        # The small epsilon keeps 0.6 * 5 = 3.0000000000000004 from asking for 4.
        return max(1, math.ceil(self.at_least * self.samples - 1e-9))

    def met(self, passed: int) -> bool:
        return passed >= self.required

    def __str__(self) -> str:
        if self.at_least is None:
            return f"all {self.samples}"
        return f"at least {100 * self.at_least:g}% of {self.samples}"


@dataclass(frozen=True)
class SampleResult:
    number: int
    passed: bool
    # The AssertionError's message when the sample failed, else "".
    reason: str
    elapsed_s: float
    # What the sample returned (None when it failed): a check may tabulate it.
    value: Any = None
    # The failure's separate problems (assertions.problems_of): one, or a SeveralProblems' list.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrialResult:
    rule: TrialRule
    samples: tuple[SampleResult, ...]

    @property
    def proportion(self) -> Proportion:
        return Proportion(sum(sample.passed for sample in self.samples), len(self.samples))

    @property
    def met(self) -> bool:
        return self.rule.met(self.proportion.successes)

    @property
    def count(self) -> str:
        """``4/5``."""
        return f"{self.proportion.successes}/{self.proportion.total}"

    def summary(self) -> str:
        """``4/5 passed (rule: all 5; 95% Wilson lower bound 37.6%)``."""
        return f"{self.count} passed (rule: {self.rule}; 95% Wilson lower bound {100 * self.proportion.lower:.1f}%)"

    def first_failure(self) -> SampleResult | None:
        return next((sample for sample in self.samples if not sample.passed), None)

    def failure_message(self, lead: str | None = None) -> str:
        """The first failing sample's own message, its first line followed by ``[trials: 4/5 passed, rule: all 5]``.

        The sample's words come first, unchanged, so an expected-failure record written for
        the single-shot check (a regex searched in the message) still describes it, and the
        figure sits on the first line, which the gate and pytest's summary show. ``lead``
        replaces the sample's words, for a check that words its failure from every sample.
        """
        first = self.first_failure()
        if lead is not None:
            reason = lead
        elif first is not None and first.reason.strip():
            reason = first.reason
        else:
            reason = f"sample {first.number if first else '?'} failed"
        head, newline, rest = reason.partition("\n")
        return f"{head} [trials: {self.count} passed, rule: {self.rule}]{newline}{rest}"

    def problems(self) -> list[str]:
        """Every failing sample's problems, each as ``sample N: <problem>``, in sample order."""
        return [f"sample {sample.number}: {problem}" for sample in self.samples if not sample.passed
                for problem in (sample.problems or (sample.reason,))]

    def failure(self, lead: str | Sequence[str] | None = None) -> AssertionError:
        """The check's failure when the rule is not met.

        One failing problem in all: :meth:`failure_message`, as a single-shot check words it.
        More (a second failing sample, or a sample with several problems): a
        :class:`SeveralProblems` listing each failing sample's problems under the figure, so
        each is matched by an expected-failure record on its own. A ``lead`` words the
        failure from every sample at once: one problem (a text), or several (a list: the count
        of wrong answers and each failed request, say), each matched on its own.
        """
        worded = [] if lead is None else [lead] if isinstance(lead, str) else list(lead)
        # A lead that found nothing to say leaves the samples' own words.
        problems = worded or self.problems()
        if len(problems) <= 1:
            return AssertionError(self.failure_message(worded[0] if worded else None))
        return SeveralProblems(problems, header=f"failing samples [trials: {self.count} passed, rule: {self.rule}]")

    def csv_table(self) -> str:
        """One row per sample: number, passed, reason (shortened), seconds."""
        return rows_csv(["sample", "passed", "reason", "seconds"],
                        ([sample.number, "yes" if sample.passed else "no", _shortened(sample.reason),
                          f"{sample.elapsed_s:.3f}"] for sample in self.samples))


def _shortened(reason: str) -> str:
    line = reason.strip().splitlines()[0] if reason.strip() else ""
    return line if len(line) <= _REASON_LIMIT else line[:_REASON_LIMIT] + "…"


async def _one(sample: Sample, number: int, total: int) -> SampleResult:
    _CURRENT_SAMPLE.set((number, total))
    started = time.monotonic()
    try:
        value = await sample()
    except AssertionError as failure:
        return SampleResult(number, False, str(failure), time.monotonic() - started, problems=problems_of(failure))
    return SampleResult(number, True, "", time.monotonic() - started, value)


async def run_trials(sample: Sample, rule: TrialRule, *, sequential: bool = False) -> TrialResult:
    """Run ``sample`` ``rule.samples`` times and judge the count; never raises for a failed sample.

    Concurrently by default (asyncio.gather: the K requests go out together). ``sequential``
    runs one after the other, for a check whose per-request timing must not include batching.
    Any exception other than AssertionError is raised, unchanged, after every sample ended.
    """
    total = rule.samples
    # Each sample runs in its own task, so each has its own copy of the context (its sample number).
    if sequential:
        # Nothing else runs meanwhile: an exception may leave at once.
        outcomes: list[SampleResult | BaseException] = [
            await asyncio.create_task(_one(sample, number, total)) for number in range(1, total + 1)]
    else:
        outcomes = list(await asyncio.gather(*(_one(sample, number, total) for number in range(1, total + 1)),
                                             return_exceptions=True))
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return TrialResult(rule, tuple(outcome for outcome in outcomes if isinstance(outcome, SampleResult)))
