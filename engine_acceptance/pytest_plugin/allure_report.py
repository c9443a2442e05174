"""Allure output: the environment page, and each request and reply, redacted.

Attachments go through ``allure.attach``, which does nothing when no Allure
results directory is configured, so checks can attach unconditionally.
"""

from __future__ import annotations

import doctest
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import allure
import pytest

from engine_acceptance import __version__
from engine_acceptance.capabilities.registry import GROUP_MARKERS
from engine_acceptance.failure_categories import CATEGORIES, FAILURE_CATEGORIES, FAILURE_RULES, failure_category
from engine_acceptance.wire.client import Exchange
from engine_acceptance.wire.redaction import Redactor

if TYPE_CHECKING:
    from engine_acceptance.session import AcceptanceSession

__all__ = [
    "CATEGORIES",
    "FAILURE_CATEGORIES",
    "allure_status",
    "attach_exchange",
    "attach_json",
    "engine_title",
    "failure_category",
    "label_for_allure",
    "reference_banner",
    "shortfall_facts",
    "write_categories",
    "write_environment",
    "write_executor",
]


def allure_status(exception: BaseException) -> str:
    """The status allure-pytest gives a check that raised `exception`: failed, or broken."""
    return "failed" if isinstance(exception, (AssertionError, pytest.fail.Exception, doctest.DocTestFailure)) \
        else "broken"


RAW_ATTACH_LIMIT = 64 * 1024


def write_environment(alluredir: str | Path, facts: dict[str, str]) -> Path:
    """Write Allure's ``environment.properties`` (one ``key = value`` per line)."""
    path = Path(alluredir) / "environment.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{key} = {_escape(str(value))}" for key, value in facts.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shortfall_facts(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The environment page's line per shortfall (gate.json's ``shortfalls``): ``shortfall.1.recall = ...``."""
    return {f"shortfall.{number}.{entry['check']}": f"{entry['summary']} ({entry['reason']})"
            for number, entry in enumerate(entries, start=1)}


def write_categories(alluredir: str | Path) -> Path:
    path = Path(alluredir) / "categories.json"
    path.write_text(json.dumps(CATEGORIES, indent=2), encoding="utf-8")
    return path


def write_executor(alluredir: str | Path, session: "AcceptanceSession", *, now: datetime | None = None) -> Path:
    """Write Allure's ``executor.json``: which engine release this run tested, and when.

    The build name is what tells runs apart on the dashboard: ``allure_history seed``
    prefixes it with the run's number in the engine's history (``#3 · ...``).
    """
    finished = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    path = Path(alluredir) / "executor.json"
    executor = {
        "name": f"engine-acceptance {__version__}",
        "type": "pytest",
        "buildName": f"{engine_title(session)} serving {session.engine.model!r}, {finished}",
    }
    path.write_text(json.dumps(executor, indent=2), encoding="utf-8")
    return path


def engine_title(session: "AcceptanceSession") -> str:
    """The engine as the dashboard names it: kind and version, and whether it is the built-in one."""
    title = f"{session.engine.kind} {session.engine.version or ''}".strip()
    return f"{title} (built-in reference engine)" if session.reference else title


def _escape(value: str) -> str:
    # .properties files treat backslash and line ends specially.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


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


def attach_json(name: str, data: Any, redactor: Redactor) -> None:
    allure.attach(
        json.dumps(redactor.value(data), ensure_ascii=False, indent=2, default=str),
        name=name,
        attachment_type=allure.attachment_type.JSON,
    )


def attach_exchange(exchange: Exchange, redactor: Redactor, label: str = "") -> None:
    """Attach one request, its reply (reassembled) and the raw response bytes, redacted."""
    prefix = f"{label} " if label else ""
    mode = "streamed" if exchange.stream else "non-streamed"
    attach_json(f"{prefix}request ({mode})", {"method": exchange.method, "url": exchange.url,
                                                "body": exchange.request}, redactor)
    outcome = {
        "status": exchange.status,
        "elapsed_s": round(exchange.elapsed_s, 4) if exchange.elapsed_s is not None else None,
        "error_kind": exchange.error_kind,
        "error": exchange.error,
    }
    if exchange.reply is not None:
        outcome["reply"] = exchange.reply.summary()
    elif exchange.body is not None:
        outcome["body"] = exchange.body
    attach_json(f"{prefix}response ({mode})", outcome, redactor)
    if exchange.raw:
        raw = exchange.raw[:RAW_ATTACH_LIMIT].decode("utf-8", "replace")
        note = "" if len(exchange.raw) <= RAW_ATTACH_LIMIT and not exchange.raw_truncated else "\n…[truncated]"
        allure.attach(redactor.with_limit(RAW_ATTACH_LIMIT).text(raw) + note, name=f"{prefix}raw response bytes",
                      attachment_type=allure.attachment_type.TEXT)


def label_for_allure(item: "pytest.Item", session: "AcceptanceSession") -> None:
    """Epic = engine, feature = capability, story = check: how a release manager reads the dashboard."""
    capability = next((name for name in GROUP_MARKERS if item.get_closest_marker(name)), "other")
    for label_type, value in (("epic", engine_title(session)), ("feature", capability),
                              ("story", getattr(item, "originalname", item.name))):
        item.add_marker(pytest.mark.allure_label(value, label_type=label_type))

