"""How a check failed, in a few named categories: the rules Allure's ``categories.json`` uses,
and the one reading of them (:func:`failure_category`).

An expected-failure record may name a category (``failure.category``) beside its message
pattern (which is required); the report files each failure under the same rules, so a record's category and the
report's can never disagree. The rules rely on the wording the checks and clients use:
"HTTP 5xx", "timeout", stream framing problems.
"""

from __future__ import annotations

import re

__all__ = ["CATEGORIES", "FAILURE_CATEGORIES", "FAILURE_RULES", "failure_category"]

# Allure groups failures by these rules, first match wins.
# How a check failed: the categories an expected-failure record's `failure.category` may
# name (profiles/expectations.py). failure_category() below is the one reading of these rules, so
# a record's category and the report's can never disagree.
FAILURE_RULES = [
    {"name": "Engine error (5xx)", "matchedStatuses": ["failed", "broken"],
     "messageRegex": r"(?s).*(HTTP 5\d\d|server error).*"},
    {"name": "Timeout or hang", "matchedStatuses": ["failed", "broken"],
     "messageRegex": r"(?is).*(timeout|timed out|did not answer|hang).*"},
    {"name": "Engine unreachable", "matchedStatuses": ["failed", "broken"],
     "messageRegex": r"(?is).*(unreachable|connection refused|connection: ).*"},
    # Before "Protocol violation", whose words (finish_reason) its message holds: a model still thinking when
    # max_tokens ran out is a budget to raise or a model that thinks too long, not a broken reply.
    {"name": "Reasoning used up max_tokens", "matchedStatuses": ["failed"],
     "messageRegex": r"(?is).*reasoning used up max_tokens.*"},
    {"name": "Protocol violation", "matchedStatuses": ["failed", "broken"],
     "messageRegex": r"(?is).*(\[DONE\]|not JSON|finish_reason|usage|chunk|protocol|HTTP 4\d\d|markers).*"},
    {"name": "Wrong answer", "matchedStatuses": ["failed"]},
]
FAILURE_CATEGORIES = tuple(rule["name"] for rule in FAILURE_RULES)
CATEGORIES = [
    {"name": "Stale record: a known defect now passes", "matchedStatuses": ["failed", "broken"],
     "messageRegex": r"(?s).*XPASS\(strict\).*"},
    *FAILURE_RULES,
    {"name": "Known defect (expected failure record)", "matchedStatuses": ["skipped"],
     "messageRegex": r"(?s).*known defect.*"},
    {"name": "Broken test (suite error)", "matchedStatuses": ["broken"]},
]


def failure_category(message: str, status: str = "failed") -> str | None:
    """The category Allure files a failure under, as Allure reads categories.json.

    `message` is what allure-pytest puts in the result (pytest's ``ExceptionInfo.exconly()``:
    ``AssertionError: ...``, ``Failed: ...``); the first rule whose statuses hold `status`
    and whose ``messageRegex`` matches the whole message wins (Java's ``String.matches``).
    """
    for rule in CATEGORIES:
        if status not in rule["matchedStatuses"]:
            continue
        regex = rule.get("messageRegex")
        if regex is None or re.fullmatch(regex, message):
            return rule["name"]
    return None
