"""Reads the Allure results an end-to-end self-test run wrote: status, message, attachments.

The hardening self-tests check what a report reader would see for a failed check:
its message, the raw bytes attached (and that they are capped), and the elapsed
time the client recorded for each request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

__all__ = ["AllureTest", "read_results"]


@dataclass
class AllureTest:
    name: str
    status: str
    message: str
    raw: dict[str, Any]
    directory: Path

    def attachments(self) -> Iterator[tuple[str, Path]]:
        """(name, file) of every attachment, in steps at any depth too."""
        def walk(node: dict[str, Any]) -> Iterator[tuple[str, Path]]:
            for attachment in node.get("attachments", []):
                yield attachment["name"], self.directory / attachment["source"]
            for step in node.get("steps", []):
                yield from walk(step)

        return walk(self.raw)

    def attachment_texts(self, suffix: str) -> list[str]:
        return [path.read_text(encoding="utf-8", errors="replace")
                for name, path in self.attachments() if name.endswith(suffix)]

    def responses(self) -> list[dict[str, Any]]:
        """The client's record of each request: status, elapsed_s, error_kind, error."""
        return [json.loads(text) for text in self.attachment_texts("response (streamed)")
                + self.attachment_texts("response (non-streamed)")]


def read_results(directory: Path) -> dict[str, AllureTest]:
    """Every ``*-result.json`` by test name (``test_x[param]``)."""
    tests = {}
    for path in directory.glob("*-result.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        details = data.get("statusDetails") or {}
        tests[data["name"]] = AllureTest(data["name"], data.get("status", ""), details.get("message", ""), data,
                                         directory)
    return tests
