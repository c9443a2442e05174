"""Allure's results folder, written directly: the environment page, the categories, the executor,
and a test result of our own with its attachments (the engine comparison's).

allure-pytest writes each check's result; what the run adds around them, and what a tool
with no pytest run (``python -m engine_acceptance.compare``) writes, goes through here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from engine_acceptance import __version__
from engine_acceptance.failure_categories import CATEGORIES

__all__ = ["write_categories", "write_environment", "write_executor", "write_result"]

# An attachment's file ending by its MIME type (Allure shows it by the type, opens it by the name).
_EXTENSIONS = {"text/markdown": "md", "text/csv": "csv", "text/html": "html", "application/json": "json"}


def write_environment(alluredir: str | Path, facts: Mapping[str, str]) -> Path:
    """Write Allure's ``environment.properties`` (one ``key = value`` per line)."""
    path = Path(alluredir) / "environment.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{key} = {_escape(str(value))}" for key, value in facts.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _escape(value: str) -> str:
    # .properties files treat backslash and line ends specially.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def write_categories(alluredir: str | Path) -> Path:
    """Write ``categories.json``: how Allure files a failure (``failure_categories.CATEGORIES``)."""
    path = Path(alluredir) / "categories.json"
    path.write_text(json.dumps(CATEGORIES, indent=2), encoding="utf-8")
    return path


def write_executor(alluredir: str | Path, build_name: str) -> Path:
    """Write ``executor.json``: the suite's name and version, and the build name the dashboard shows."""
    path = Path(alluredir) / "executor.json"
    executor = {"name": f"engine-acceptance {__version__}", "type": "pytest", "buildName": build_name}
    path.write_text(json.dumps(executor, indent=2), encoding="utf-8")
    return path


def write_result(alluredir: Path, *, name: str, full_name: str, history_id: str, labels: Sequence[Mapping[str, str]],
                 files: Mapping[str, tuple[str, str]], description_html: str, status: str, started_ms: int) -> Path:
    """One Allure test result named ``name`` carrying ``files`` (attachment name -> (text, MIME type))."""
    alluredir.mkdir(parents=True, exist_ok=True)
    attachments = []
    for attachment, (text, mime) in files.items():
        source = f"{uuid.uuid4()}-attachment.{_EXTENSIONS.get(mime, 'txt')}"
        (alluredir / source).write_text(text, encoding="utf-8")
        attachments.append({"name": attachment, "source": source, "type": mime})
    result_id = str(uuid.uuid4())
    result = {
        "uuid": result_id,
        "historyId": history_id,
        "name": name,
        "fullName": full_name,
        "status": status,
        "stage": "finished",
        "start": started_ms,
        "stop": int(time.time() * 1000),
        "descriptionHtml": description_html,
        "attachments": attachments,
        "labels": [dict(label) for label in labels],
    }
    path = alluredir / f"{result_id}-result.json"
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return path
