"""Where the shipped suite lives: the checks (``tests/``), the fixture modules and the data
they serve (``fixtures/``), and the committed media (``media/``).

In a checkout, and in an editable install of one, they are the repository's top-level
folders. In an installed wheel they are package data under ``engine_acceptance/suite/``,
put there by the build (``[tool.setuptools.package-dir]`` in ``pyproject.toml``). The
lookup tries the wheel's place, then the checkout's, and says where it looked when
neither holds the suite; it never guesses.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from engine_acceptance.errors import UsageError

__all__ = ["SUITE_FOLDERS", "SuiteNotFound", "load_prompts", "read_yaml", "suite_root", "suite_path"]

SUITE_FOLDERS = ("tests", "fixtures", "media")


class SuiteNotFound(UsageError):
    """Neither the installed package nor a checkout holds the suite's folders."""


@functools.cache
def suite_root() -> Path:
    """The folder holding ``tests/``, ``fixtures/`` and ``media/``."""
    packaged = Path(str(resources.files("engine_acceptance"))) / "suite"
    checkout = Path(__file__).resolve().parent.parent
    for root in (packaged, checkout):
        if all((root / name).is_dir() for name in SUITE_FOLDERS):
            return root
    raise SuiteNotFound(
        f"the engine-acceptance suite ({', '.join(SUITE_FOLDERS)}) is neither in the installed package"
        f" ({packaged}) nor in a checkout ({checkout}); reinstall the package"
    )


def suite_path(*parts: str) -> Path:
    """A path inside the suite, e.g. ``suite_path("fixtures", "profiles")``."""
    return suite_root().joinpath(*parts)


# libyaml's parser when PyYAML was built with it (the wheels are): every run, and every
# self-test's subprocess, reads the suite's YAML files; the 25 under fixtures/ parse in 7 ms
# this way against 76 ms with the pure-Python parser (best of 3, 2026-12-03).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A YAML file's data, read as ``yaml.safe_load`` reads it (errors are ``yaml.YAMLError``)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)


def load_prompts(name: str) -> Any:
    """The prompts of one capability, ``fixtures/prompts/<name>.yaml``."""
    return read_yaml(suite_path("fixtures", "prompts", f"{name}.yaml"))
