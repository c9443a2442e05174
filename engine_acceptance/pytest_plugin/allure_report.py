"""Allure and the pytest run: a check's status and labels, the engine's title, the executor's build name.

The files around the checks' results (environment page, categories, executor) are written
by :mod:`engine_acceptance.reporting.allure_files`; what a check attaches (a request and its
reply, a JSON value) is :mod:`engine_acceptance.report_attachments`. Neither needs pytest.
"""

from __future__ import annotations

import doctest
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

from engine_acceptance.capabilities.registry import GROUP_MARKERS
from engine_acceptance.failure_categories import CATEGORIES, FAILURE_CATEGORIES, FAILURE_RULES, failure_category

if TYPE_CHECKING:
    from engine_acceptance.session import AcceptanceSession

__all__ = [
    "CATEGORIES",
    "FAILURE_CATEGORIES",
    "allure_status",
    "engine_title",
    "executor_build_name",
    "failure_category",
    "label_for_allure",
    "reference_banner",
    "shortfall_facts",
]


def allure_status(exception: BaseException) -> str:
    """The status allure-pytest gives a check that raised `exception`: failed, or broken."""
    return "failed" if isinstance(exception, (AssertionError, pytest.fail.Exception, doctest.DocTestFailure)) \
        else "broken"


def shortfall_facts(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The environment page's line per shortfall (gate.json's ``shortfalls``): ``shortfall.1.recall = ...``."""
    return {f"shortfall.{number}.{entry['check']}": f"{entry['summary']} ({entry['reason']})"
            for number, entry in enumerate(entries, start=1)}


def executor_build_name(session: "AcceptanceSession", *, now: datetime | None = None) -> str:
    """The name ``executor.json`` gives this run: which engine release it tested, and when.

    It is what tells runs apart on the dashboard: ``allure_history seed`` prefixes it with
    the run's number in the engine's history (``#3 · ...``).
    """
    finished = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    return f"{engine_title(session)} serving {session.engine.model!r}, {finished}"


def engine_title(session: "AcceptanceSession") -> str:
    """The engine as the dashboard names it: kind and version, and whether it is the built-in one."""
    title = f"{session.engine.kind} {session.engine.version or ''}".strip()
    return f"{title} (built-in reference engine)" if session.reference else title


def reference_banner(session: "AcceptanceSession") -> list[str]:
    defects = ", ".join(session.reference.defects) if session.reference and session.reference.defects else "none"
    convention = session.reference.convention if session.reference else "?"
    rule = "=" * 78
    return [
        rule,
        "TARGET: THE BUILT-IN REFERENCE ENGINE, NOT A REAL DEPLOYMENT",
        f"  convention: {convention}; injected defects: {defects}",
        "  Give --engine-url=http://host:port to test a real engine.",
        rule,
    ]


def label_for_allure(item: "pytest.Item", session: "AcceptanceSession") -> None:
    """Epic = engine, feature = capability, story = check: how a release manager reads the dashboard."""
    capability = next((name for name in GROUP_MARKERS if item.get_closest_marker(name)), "other")
    for label_type, value in (("epic", engine_title(session)), ("feature", capability),
                              ("story", getattr(item, "originalname", item.name))):
        item.add_marker(pytest.mark.allure_label(value, label_type=label_type))

