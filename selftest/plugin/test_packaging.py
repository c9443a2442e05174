"""The wheel carries the whole suite: every package, and every file of tests/, fixtures/ and media/.

``pyproject.toml`` lists the packages by hand (the suite's folders are mapped into the
package, which rules out automatic discovery), so a new subpackage or data file that the
list misses would be absent from an installed plugin while every run in the checkout
still passes. These tests compare the list and the built wheel with the tree.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from suite_runner import REPO

from engine_acceptance.resources import SUITE_FOLDERS

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SUITE_PACKAGE = "engine_acceptance.suite"


def _tracked(folder: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def test_every_subpackage_is_listed_in_pyproject() -> None:
    listed = {name for name in PYPROJECT["tool"]["setuptools"]["packages"] if not name.startswith(SUITE_PACKAGE)}
    on_disk = {".".join(path.parent.relative_to(REPO).parts) for path in (REPO / "engine_acceptance").rglob("__init__.py")}
    assert listed == on_disk


def test_the_suite_folders_are_mapped_into_the_package() -> None:
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert mapping == {f"{SUITE_PACKAGE}.{name}": name for name in SUITE_FOLDERS}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (path,) = out.glob("engine_acceptance-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.e2e
def test_the_wheel_holds_every_tracked_file_of_the_suite(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    missing = [path for folder in SUITE_FOLDERS for path in _tracked(folder)
               if f"engine_acceptance/suite/{path}" not in names]
    assert not missing, f"tracked suite files absent from the wheel: {missing}"
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


@pytest.mark.e2e
def test_the_wheel_declares_the_plugin_and_the_console_script(wheel: zipfile.ZipFile) -> None:
    entry_points = next(name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt"))
    text = wheel.read(entry_points).decode()
    assert "[pytest11]\nengine_acceptance = engine_acceptance.pytest_plugin.plugin" in text
    assert "engine-acceptance = engine_acceptance.cli:main" in text
