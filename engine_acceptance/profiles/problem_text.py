"""The words of a problem, as expected-failure records read them.

A failure message carries text that is no part of the problem it reports:

- the exception type that pytest's ``ExceptionInfo.exconly()`` puts first
  (``AssertionError: ``, ``Failed: ``, ``openai.InternalServerError: ``). Every failure has
  one, so a record's pattern that matched it (``Error``, ``Assertion``) excused any failure;
- the discovery lead a failing check of a capability found broken starts with
  (``image found broken by capability discovery (<the probe's evidence>); ``,
  :meth:`engine_acceptance.session.AcceptanceSession.broken_reason`). Every failure of that
  capability's checks carries it, whatever went wrong after it.

:func:`problem_text` removes both, and records (``profiles/expectations.py``,
``pytest_plugin/records.py``) match their patterns against what is left: the check's own words
for the problem. :func:`discovery_lead` writes the lead, so its shape is defined once, here,
next to the code that takes it off again.
"""

from __future__ import annotations

import re

__all__ = ["discovery_lead", "exception_type", "problem_text", "split_problem"]

# ExceptionInfo.exconly() starts with the type's name (qualified unless a builtin; pytest's
# outcomes say Failed), a colon and a space; a type with an empty message is the name alone.
# Only names shaped like exception types are taken off: a problem's own words may start with
# a word and a colon ("function_call.arguments: ...").
_TYPE_PREFIX = re.compile(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Problems|Timeout|Interrupt|Exit)|Failed|XFailed|Skipped)"
    r"(?::[ \t]?|$)")
# The lead's fixed words, after the capability's name; the evidence inside the parentheses
# is the probe's and may hold parentheses of its own.
_LEAD_START = re.compile(r"\b[a-z][a-z0-9_]* found broken by capability discovery \(")
_LEAD_END = "; "


def discovery_lead(capability: str, evidence: str) -> str:
    """``<capability> found broken by capability discovery (<evidence>); ``: what a failing check of it starts with."""
    return f"{capability} found broken by capability discovery ({evidence}){_LEAD_END}"


def exception_type(text: str) -> str | None:
    """The exception type `text` starts with (``Failed: ``), as it is taken off; None when it has none."""
    prefix = _TYPE_PREFIX.match(text)
    return None if prefix is None else prefix.group()


def split_problem(text: str) -> tuple[list[str], str]:
    """The parts of `text` that are no part of its problem (type prefix, discovery leads), and the words left."""
    removed: list[str] = []
    prefix = exception_type(text)
    if prefix is not None:
        removed.append(prefix)
        text = text[len(prefix):]
    kept: list[str] = []
    position = 0
    for start in _LEAD_START.finditer(text):
        if start.start() < position:
            continue  # inside a lead already taken off
        end = _lead_end(text, start.end())
        if end is None:
            continue  # not the lead's shape: the words stay
        kept.append(text[position:start.start()])
        removed.append(text[start.start():end])
        position = end
    kept.append(text[position:])
    return removed, "".join(kept)


def problem_text(text: str) -> str:
    """`text` without the exception type in front and without any discovery lead: what records are matched against."""
    return split_problem(text)[1]


def _lead_end(text: str, after_open: int) -> int | None:
    """Where a lead whose ``(`` ends at `after_open` ends: after the ``); `` that closes it.

    The parenthesis that balances the opening one closes it; evidence cut in the middle of a
    parenthesis of its own never balances, and then the first ``); `` closes it.
    """
    depth = 1
    for index in range(after_open, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                if text.startswith(_LEAD_END, index + 1):
                    return index + 1 + len(_LEAD_END)
                break
    fallback = text.find(")" + _LEAD_END, after_open)
    return None if fallback < 0 else fallback + 1 + len(_LEAD_END)
