"""Small assertion helpers shared by the acceptance checks.

Each turns a failed expectation into one readable message that says what the
engine did, so a report reader does not have to open the attachments.

A check that finds several problems at once (several throughput cells, several usage
fields, several failing samples of a trial) raises :class:`SeveralProblems`: the problems
stay a list, one line each in the message, so an expected-failure record is matched
against each problem on its own (pytest_plugin/records.py) and cannot excuse a second
problem it does not describe.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Iterable

from engine_acceptance.errors import EngineAcceptanceError
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.reassembly import Reply

__all__ = ["ObservationWarning", "SeveralProblems", "assert_no_problems", "integers_in", "markers_found",
           "problems_failure", "problems_of", "reply_of", "unclosed_reasoning"]


class ObservationWarning(UserWarning):
    """What a check saw and reports without failing (a seed that did not repeat, say).

    Defined here, in an importable module, so pytest-xdist can send it from a worker to the
    controller (a class defined in a test module cannot be unpickled there).
    """


def reply_of(exchange: Exchange) -> Reply:
    """The reply of a successful exchange; fails the check with the reason otherwise."""
    if not exchange.ok or exchange.reply is None:
        # Hidden from pytest's traceback: the failure is the engine's, shown as one sentence.
        __tracebackhide__ = True
        mode = "streamed" if exchange.stream else "non-streamed"
        raise AssertionError(f"{mode} request to {exchange.url} failed: {exchange.describe_failure()}")
    return exchange.reply


def markers_found(text: str, markers: Iterable[str]) -> list[str]:
    return [marker for marker in markers if marker in text]


def integers_in(text: str) -> list[int]:
    return [int(match.replace(",", "")) for match in re.findall(r"-?\d[\d,]*", text)]


def unclosed_reasoning(reply: Reply) -> str:
    """Why content is empty when the reply is all reasoning cut at its token limit, else "".

    A model that never closes its reasoning (never writes ``</think>``) leaves the parser in
    reasoning until the limit: no answer reaches content. That is the finding, so a check whose
    content is empty says so instead of only "empty".
    """
    if reply.content.strip() or not reply.reasoning.strip() or reply.finish_reason != "length":
        return ""
    return ("; the reply ended at its token limit (finish_reason 'length') inside its reasoning, which the model "
            "never closed, so no answer reached content")


def short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class SeveralProblems(EngineAcceptanceError, AssertionError):
    """A failed check that found more than one problem; ``problems`` keeps them apart.

    The message's first line is the header and the problems' first lines (cut), then each
    problem whole, one a line (its own further lines indented under it), then the detail
    (what all problems share: the answer, the counts):
    ``problems (2): 128/128@1: ... | 128/128@4: ...\n  - 128/128@1: ...\n  - 128/128@4: ...``.
    """

    def __init__(self, problems: Sequence[str], header: str | None = None, detail: str | None = None) -> None:
        self.problems = tuple(problems)
        self.header = header
        self.detail = detail
        super().__init__(_several_message(self.problems, header, detail))

    def __reduce__(self):  # type: ignore[override]
        # Pickled (a process pool, say) it is rebuilt from its parts, not from its message.
        return (type(self), (self.problems, self.header, self.detail))


# The first line (what the gate and pytest's summary show) names the problems up to this length.
_FIRST_LINE_LIMIT = 400


def _several_message(problems: Sequence[str], header: str | None, detail: str | None) -> str:
    # The first line alone must say what failed (gate.json and the summary read only it): the
    # problems' first lines, cut; the whole of each follows, one a line.
    named = " | ".join((problem.splitlines() or [""])[0] for problem in problems)
    if len(named) > _FIRST_LINE_LIMIT:
        named = named[:_FIRST_LINE_LIMIT] + "…"
    lines = [f"{header or 'problems'} ({len(problems)}): {named}"]
    for problem in problems:
        first, *rest = problem.splitlines() or [""]
        lines.append(f"  - {first}")
        lines.extend(f"    {line}" for line in rest)
    if detail:
        # On a line of its own, without the separator that joins it to a single problem.
        lines.append(detail.lstrip("; "))
    return "\n".join(lines)


def problems_failure(problems: Sequence[str], *, header: str | None = None,
                     detail: str | None = None) -> AssertionError:
    """The failure for these problems (at least one).

    One problem is a plain AssertionError worded as the checks always worded it,
    ``header: problem`` then ``detail`` as given (with its own leading separator, `` [...]``
    or ``; the answer was ...``), so a record written for it reads it as before; more than
    one is a :class:`SeveralProblems`. A record is matched in each problem's own words, so a
    problem says what it is about (its cell, its key), not only the header.
    """
    if not problems:
        raise ValueError("a failure needs at least one problem")
    if len(problems) == 1:
        return AssertionError(f"{header}: " * (header is not None) + problems[0] + (detail or ""))
    return SeveralProblems(problems, header, detail)


def assert_no_problems(problems: Sequence[str], *, header: str | None = None, detail: str | None = None) -> None:
    """Fail the check when ``problems`` is not empty, each problem kept apart (see :func:`problems_failure`)."""
    __tracebackhide__ = True
    if problems:
        raise problems_failure(problems, header=header, detail=detail)


def problems_of(failure: BaseException) -> tuple[str, ...]:
    """The separate problems of a failure: a :class:`SeveralProblems`' list, else the failure's own words."""
    if isinstance(failure, SeveralProblems):
        return failure.problems
    return (str(failure),)
