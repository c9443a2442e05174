"""Expected-failure records: known defects of an engine or model as strict xfails.

A record names a check as ``module::test[param]`` (``test_text.py::test_x[streamed]``,
``*`` as wildcard): the check's id without the folder, so a record written once
matches whether the suite runs from a checkout (``tests/test_text.py::...``) or
from an installed wheel (``.../site-packages/engine_acceptance/suite/tests/...``);
:func:`check_id` turns any pytest node id into that form, and a legacy
``tests/`` prefix in a record is dropped when it is loaded. It names the engine kind and
version range, a model pattern, the reason and where the defect was seen, and
what the failure looks like (``failure``: a regular expression searched in the
problem's own words, required, and optionally the report's failure category; a failure of
several problems is matched problem by problem, pytest_plugin/records.py). The words are the
failure message without the exception type pytest puts first and without a discovery lead
(profiles/problem_text.py). A matching test is
marked ``xfail(strict=True)``: while the defect lasts the gate stays green, and
the day it is fixed the test passes, the strict xfail fails, and the stale
record is noticed instead of hiding a regression forever. A failure the record
does not describe is not covered by it (pytest_plugin/records.py makes it a failure again).

Record files are read from the user's profiles dirs (``expectations/``), then the
shipped ``fixtures/expectations/`` (sources.py); a user's file named like a shipped one
replaces it.

A record that could excuse what it does not describe is refused when it is loaded, naming
it (``file#index`` and its check), the reason and how to write it:

- its message pattern matches an empty text, the exception type or the discovery lead that
  are taken off, or two or more of the sample problems of profiles/generic_texts.py;
- its pattern starts with an exception type (``Failed: ...``): it would never match;
- its scope is all wildcards: the check must name its module in full (``test_x.py::...``,
  no ``*`` before ``::``), and a record for any engine (``engine: "*"``) must name a model
  (a model pattern that matches an empty or one-character name matches any name).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from engine_acceptance.profiles.generic_texts import record_pattern_over_reach
from engine_acceptance.profiles.problem_text import exception_type, problem_text
from engine_acceptance.profiles.profile import DATA_ROOT
from engine_acceptance.profiles.sources import SHIPPED, ProfileError, data_files
from engine_acceptance.failure_categories import FAILURE_CATEGORIES, failure_category
from engine_acceptance.resources import read_yaml

__all__ = ["EXPECTATIONS_DIR", "ExpectedFailure", "FailureDescription", "check_id", "load_expectations",
           "matching_records"]

# The shipped record files; load_expectations() reads the user's profiles dirs too.
EXPECTATIONS_DIR = SHIPPED.expectations
SCHEMA_PATH = DATA_ROOT / "schemas" / "expectations.schema.json"
# What a record's check used to start with: the checkout's folder, dropped when loading.
LEGACY_PREFIX = "tests/"
# A model pattern that matches one of these names matches any name (see _names_a_model).
_ONE_CHARACTER_NAMES = ("", *"abcxyzABCXYZ0189-_./:")
# How to write a specific pattern, said with every refusal of one.
_HOW_TO_WRITE = ("write the check's own words for the one problem the record excuses, as the failure prints them "
                 "after the exception type and any 'found broken by capability discovery (...); ' lead, like "
                 "'no usage in the reply \\(stream_options.include_usage was set\\)' (docs/profiles-and-records.md)")


@dataclass(frozen=True)
class FailureDescription:
    """What a recorded failure looks like; every field given must hold."""

    # Searched (re.search) in the problem's own words: the failure as pytest prints it
    # (ExceptionInfo.exconly(), ``AssertionError: ...``) without the exception type in front and
    # without a discovery lead (problem_text.problem_text).
    message: str | None = None
    # One of reporting.FAILURE_CATEGORIES, decided by reporting.failure_category() on the same words.
    category: str | None = None

    def matches(self, message: str, status: str = "failed") -> bool:
        """Whether a failure with this message (and Allure status, failed or broken) is this one.

        `message` may carry the exception type and discovery leads (a whole ``exconly()``, or one
        problem of several): they are taken off before the pattern and the category are read.
        """
        words = problem_text(message)
        if self.message is not None and not re.search(self.message, words):
            return False
        return self.category is None or self.category == failure_category(words, status)

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
        """Whether the record covers this check (any node id, see check_id) on this engine and model."""
        if not _check_pattern(self.check).fullmatch(check_id(test_id)):
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


def check_id(nodeid: str) -> str:
    """The check as records name it, ``module::test[param]``, from any pytest node id.

    ``tests/test_text.py::test_x[a]``, ``/venv/.../engine_acceptance/suite/tests/test_text.py::test_x[a]``
    and ``../../x/tests/test_text.py::test_x[a]`` all give ``test_text.py::test_x[a]``: node
    ids are relative to pytest's rootdir, which depends on where the suite is installed and
    where pytest was started, and records must not. Only the file part (before the first
    ``::``) loses its folders; a parameter may hold ``/`` (``[128/128@4]``). Already in
    that form, the id is returned unchanged.
    """
    path, separator, rest = nodeid.partition("::")
    module = re.split(r"[/\\]", path)[-1]
    return f"{module}{separator}{rest}"


@lru_cache(maxsize=1024)
def _check_pattern(check: str) -> re.Pattern[str]:
    # Only * is a wildcard: test ids contain [ ] which glob would read as classes.
    # Cached by the check's text alone, so registering other profiles dirs cannot make it stale.
    return re.compile(".*".join(re.escape(part) for part in check.split("*")))


def load_expectations(paths: Sequence[Path] | None = None) -> list[ExpectedFailure]:
    """Load and validate record files; a bad file is a ProfileError naming it and the field.

    Without ``paths``: every record file in effect, the user's profiles dirs' first, then
    the shipped ones (a user's file named like a shipped one replaces it).
    """
    files = [Path(p) for p in paths] if paths is not None else [found.path for found in data_files("expectations")]
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    records: list[ExpectedFailure] = []
    for path in files:
        if not path.is_file():
            raise ProfileError(f"expectation file not found: {path}")
        try:
            data: Any = read_yaml(path)
        except yaml.YAMLError as exc:
            raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
            if first.validator == "required" and where.endswith("/failure") and "'message'" in first.message:
                raise ProfileError(_no_message(path, first.absolute_path[1], data))
            if first.validator == "pattern" and where.endswith("/check"):
                raise ProfileError(f"{path}: field {where}: {first.instance!r} is not a check id; write the "
                                   f"module and the test, like test_text.py::test_x[*] (the module in full, without "
                                   f"* or a folder, so the record names one module and matches wherever the suite "
                                   f"is installed)")
            raise ProfileError(f"{path}: field {where}: {first.message}")
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
                    pattern = re.compile(failure.message)
                except re.error as exc:
                    raise ProfileError(f"{path}: field records/{index}/failure/message: {failure.message!r} is not "
                                       f"a valid regular expression: {exc}") from exc
                if pattern.search(""):
                    # A pattern that matches the empty text matches every problem: no description at all.
                    raise ProfileError(_no_message(path, index, data, f"{failure.message!r} matches any text"))
                why = _over_reach(pattern)
                if why is not None:
                    raise ProfileError(f"{_record_name(path, index, data)}: field records/{index}/failure/message "
                                       f"{failure.message!r} does not describe one problem: {why}; {_HOW_TO_WRITE}")
            scope = _all_wildcards(raw)
            if scope is not None:
                raise ProfileError(f"{_record_name(path, index, data)}: {scope}")
            if failure.category is not None and failure.category not in FAILURE_CATEGORIES:
                raise ProfileError(f"{path}: field records/{index}/failure/category: {failure.category!r} is not "
                                   f"one of the report's failure categories: {', '.join(FAILURE_CATEGORIES)}")
            check = raw["check"].removeprefix(LEGACY_PREFIX)
            records.append(ExpectedFailure(**{**raw, "check": check, "failure": failure},
                                           origin=f"{path.name}#{index}"))
    return records


def _record_name(path: Path, index: Any, data: Any) -> str:
    """``<path>: record <file>#<index> (<check>)``: how a refusal names the record."""
    try:
        check = data["records"][index]["check"]
    except (KeyError, IndexError, TypeError):
        check = "?"
    return f"{path}: record {path.name}#{index} ({check})"


def _no_message(path: Path, index: Any, data: Any, why: str = "it has none") -> str:
    """The refusal of a record whose failure has no message pattern that describes anything."""
    return (f"{_record_name(path, index, data)}: field records/{index}/failure/message is required and must describe "
            f"the failure ({why}): {_HOW_TO_WRITE}; a category alone, or a pattern that matches anything, would "
            f"excuse every failure of the check")


def _over_reach(pattern: re.Pattern[str]) -> str | None:
    """Why a message pattern (that matches no empty text) does not describe one problem, or None."""
    # The pattern's own text, after inline flags and an anchor: does it begin with a type's name?
    written = exception_type(re.sub(r"^(\(\?[a-zA-Z]+\))?\^?", "", pattern.pattern))
    if written is not None:
        return (f"it starts with the exception type {written.strip()!r}, which is taken off before a record is "
                f"matched, so it would never match; leave it out")
    return record_pattern_over_reach(pattern)


def _all_wildcards(raw: dict[str, Any]) -> str | None:
    """Why a record's scope (check, engine, model) covers everything, or None.

    The check names its module (the schema refuses a * before ``::``); a record for any engine
    must name a model, or it would hold for every deployment the suite ever gates.
    """
    if raw["engine"] == "*" and not _names_a_model(raw["model"]):
        return (f"field model {raw['model']!r} with engine '*' matches any model on any engine: a record for every "
                f"engine names the model whose defect it records (like \"(?i)minimax-m3\"), and one for every model "
                f"names its engine (like engine: vllm)")
    return None


def _names_a_model(model: str) -> bool:
    """Whether a model pattern picks some models out: it matches no empty or one-character name."""
    pattern = re.compile(model)
    return not any(pattern.search(name) for name in _ONE_CHARACTER_NAMES)


def matching_records(records: Sequence[ExpectedFailure], test_id: str, *, engine: str, version: str | None,
                     model: str) -> list[ExpectedFailure]:
    """The records that cover this check; ``test_id`` is any node id (``item.nodeid``) or a check id."""
    return [record for record in records if record.applies_to(test_id, engine, version, model)]
