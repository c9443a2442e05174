"""Runs the acceptance suite in a subprocess through pytester, for end-to-end self-tests.

Every capability's self-tests use it the same way: start the suite against the
built-in reference engine (optionally with ``--inject DEFECT``) and compare the
set of failed test ids with the checks that exist for that defect.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

__all__ = ["REPO", "failed", "run_suite"]

REPO = Path(__file__).resolve().parent.parent


def run_suite(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, str]]:
    """Run the acceptance suite; return the result and each test's outcome by id."""
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO), str(REPO / "tests"),
        "-p", "no:cacheprovider", f"--alluredir={pytester.path / 'allure-results'}",
        f"--junitxml={junit}", *args,
    )
    return result, _outcomes(junit)


def _outcomes(junit: Path) -> dict[str, str]:
    if not junit.exists():
        return {}
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        test_id = f"{module}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[test_id] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds
                             else "passed")
    return outcomes


def failed(outcomes: dict[str, str]) -> set[str]:
    return {test_id for test_id, outcome in outcomes.items() if outcome == "failed"}
