"""Expected-failure records: known defects of an engine or model as strict xfails.

A record names a check (a test id, ``*`` as wildcard), the engine kind and
version range, a model pattern, the reason and where the defect was seen, and
what the failure looks like (``failure``: a regular expression searched in the
failure message and/or the report's failure category). A matching test is
marked ``xfail(strict=True)``: while the defect lasts the gate stays green, and
the day it is fixed the test passes, the strict xfail fails, and the stale
record is noticed instead of hiding a regression forever. A failure the record
does not describe is not covered by it (record_hooks.py makes it a failure again).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from engine_acceptance.profiles.profile import DATA_ROOT, ProfileError
from engine_acceptance.pytest_plugin.allure_report import FAILURE_CATEGORIES, failure_category

__all__ = ["ExpectedFailure", "FailureDescription", "load_expectations", "matching_records"]

EXPECTATIONS_DIR = DATA_ROOT / "expectations"
SCHEMA_PATH = DATA_ROOT / "schemas" / "expectations.schema.json"


@dataclass(frozen=True)
class FailureDescription:
    """What a recorded failure looks like; every field given must hold."""

    # Searched (re.search) in the failure message: the exception as pytest prints it,
    # ``AssertionError: ...`` or ``Failed: ...`` (ExceptionInfo.exconly()).
    message: str | None = None
    # One of reporting.FAILURE_CATEGORIES, decided by reporting.failure_category().
    category: str | None = None

    def matches(self, message: str, status: str = "failed") -> bool:
        """Whether a failure with this message (and Allure status, failed or broken) is this one."""
        if self.message is not None and not re.search(self.message, message):
            return False
        return self.category is None or self.category == failure_category(message, status)

    def describe(self, limit: int = 80) -> str:
        """``category 'X' and a message matching /re/``, the regex cut at `limit` characters."""
        parts = []
        if self.category is not None:
            parts.append(f"category {self.category!r}")
        if self.message is not None:
            shown = self.message if len(self.message) <= limit else self.message[:limit] + "…"
            parts.append(f"a message matching /{shown}/")
        return " and ".join(parts)


@dataclass(frozen=True)
class ExpectedFailure:
    check: str
    engine: str
    model: str
    reason: str
    source: str
    date: str
    failure: FailureDescription
    versions: str | None = None
    evidence: str | None = None
    origin: str = ""

    def applies_to(self, test_id: str, engine: str, version: str | None, model: str) -> bool:
        if not _check_pattern(self.check).fullmatch(test_id):
            return False
        if self.engine not in ("*", engine):
            return False
        if not re.search(self.model, model):
            return False
        if self.versions:
            try:
                return version is not None and Version(version) in SpecifierSet(self.versions)
            except InvalidVersion:
                return False
        return True

    def xfail_reason(self) -> str:
        return f"known defect ({self.source}, {self.date}): {self.reason} [record {self.origin}]"


def _check_pattern(check: str) -> re.Pattern[str]:
    # Only * is a wildcard: test ids contain [ ] which glob would read as classes.
    return re.compile(".*".join(re.escape(part) for part in check.split("*")))


def load_expectations(paths: list[Path] | None = None) -> list[ExpectedFailure]:
    """Load and validate every record file; a bad file is a ProfileError naming it."""
    files = paths if paths is not None else sorted(EXPECTATIONS_DIR.glob("*.yaml"))
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    records: list[ExpectedFailure] = []
    for path in files:
        if not path.is_file():
            raise ProfileError(f"expectation file not found: {path}")
        try:
            data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
            raise ProfileError(f"{path}: field {where}: {errors[0].message}")
        for index, raw in enumerate(data["records"]):
            try:
                re.compile(raw["model"])
                if raw.get("versions"):
                    SpecifierSet(raw["versions"])
            except (re.error, InvalidSpecifier) as exc:
                raise ProfileError(f"{path}: field records/{index}: {exc}") from exc
            failure = FailureDescription(**raw["failure"])
            if failure.message is not None:
                try:
                    re.compile(failure.message)
                except re.error as exc:
                    raise ProfileError(f"{path}: field records/{index}/failure/message: {failure.message!r} is not "
                                       f"a valid regular expression: {exc}") from exc
            if failure.category is not None and failure.category not in FAILURE_CATEGORIES:
                raise ProfileError(f"{path}: field records/{index}/failure/category: {failure.category!r} is not "
                                   f"one of the report's failure categories: {', '.join(FAILURE_CATEGORIES)}")
            records.append(ExpectedFailure(**{**raw, "failure": failure}, origin=f"{path.name}#{index}"))
    return records


def matching_records(records: list[ExpectedFailure], test_id: str, *, engine: str, version: str | None,
                     model: str) -> list[ExpectedFailure]:
    return [record for record in records if record.applies_to(test_id, engine, version, model)]
