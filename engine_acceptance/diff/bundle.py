"""Reading a run bundle: the folder or its ``run.json``, checked before anything is compared.

A bundle is what one run of the suite left (docs/diff.md, format version 1). The diff
accepts the folder or the file itself; anything it cannot read stops it with the path and
what is wrong (missing, not JSON, another format version, not a bundle at all), never a
traceback: the user gave a wrong path or a file from another tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_acceptance.errors import UsageError
from engine_acceptance.run_bundle import BUNDLE_FILE, BUNDLE_VERSION

__all__ = ["Bundle", "BundleError", "read_bundle"]

# The sections the comparison reads; each must have its JSON type when present.
_LISTS = ("capabilities", "checks", "rates", "confusions", "cells")
# What every entry of a list section must hold for the comparison to match and read it.
_ENTRY_KEYS = {"capabilities": ("name",), "checks": ("id", "outcome"), "rates": ("name", "k", "n"),
               "confusions": ("name",), "cells": ("workload", "key")}
_OBJECTS = ("engine", "options", "tolerances", "verdict")


class BundleError(UsageError):
    """A run bundle the diff cannot read: missing, not JSON, or of another format version."""


@dataclass(frozen=True)
class Bundle:
    """One run's bundle: where it was read from and its document (run.json as parsed)."""

    path: Path
    document: Mapping[str, Any]

    def section(self, name: str) -> Any:
        """A top-level section, or an empty one of its type when the run left it out."""
        default: Any = [] if name in _LISTS else {}
        value = self.document.get(name)
        return default if value is None else value

    @property
    def suite_version(self) -> str:
        return str(self.document.get("suite_version", "?"))

    @property
    def label(self) -> str:
        """How the outputs name the run: its engine, version and when it was written."""
        engine = self.section("engine")
        what = " ".join(str(engine[key]) for key in ("engine.kind", "engine.version") if engine.get(key))
        written = self.document.get("written_at")
        return ", ".join(part for part in (what, f"written {written}" if written else "") if part) or str(self.path)


def read_bundle(given: str | Path) -> Bundle:
    """The bundle at ``given`` (its folder or its run.json); a :class:`BundleError` saying what is wrong."""
    path = Path(given)
    file = path / BUNDLE_FILE if path.is_dir() else path
    if not file.is_file():
        where = f"no {BUNDLE_FILE} in the folder {path}" if path.is_dir() else f"{path} does not exist"
        raise BundleError(f"run bundle {path}: {where} (give a run's bundle folder, by default run-bundle/, "
                          f"or its {BUNDLE_FILE})")
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise BundleError(f"run bundle {file}: not UTF-8 text ({error})") from None
    except json.JSONDecodeError as error:
        raise BundleError(f"run bundle {file}: not JSON ({error})") from None
    except OSError as error:
        raise BundleError(f"run bundle {file}: cannot be read ({error.strerror or error})") from None
    if not isinstance(document, dict):
        raise BundleError(f"run bundle {file}: a JSON {type(document).__name__}, not a run bundle's object")
    if "bundle_version" not in document:
        raise BundleError(f"run bundle {file}: no bundle_version, not a run bundle (a gate.json or another "
                          f"tool's file?)")
    version = document["bundle_version"]
    # The format this reader understands (the writer's); another version is refused, not guessed at.
    if version != BUNDLE_VERSION:
        raise BundleError(f"run bundle {file}: bundle_version {version!r}, but this diff reads version "
                          f"{BUNDLE_VERSION} (use the suite version that wrote it)")
    for name, kind in [*((n, list) for n in _LISTS), *((n, dict) for n in _OBJECTS)]:
        value = document.get(name)
        if value is not None and not isinstance(value, kind):
            raise BundleError(f"run bundle {file}: {name!r} is a JSON {type(value).__name__}, "
                              f"not {'an array' if kind is list else 'an object'}")
    for name, keys in _ENTRY_KEYS.items():
        for index, entry in enumerate(document.get(name) or ()):
            missing = [key for key in keys if not isinstance(entry, dict) or key not in entry]
            if missing:
                raise BundleError(f"run bundle {file}: {name}[{index}] has no {', '.join(map(repr, missing))}")
    return Bundle(file, document)
