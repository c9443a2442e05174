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

__all__ = ["SUITE_FOLDERS", "SuiteNotFound", "load_prompts", "suite_root", "suite_path"]

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


def load_prompts(name: str) -> Any:
    """The prompts of one capability, ``fixtures/prompts/<name>.yaml``."""
    return yaml.safe_load(suite_path("fixtures", "prompts", f"{name}.yaml").read_text(encoding="utf-8"))
