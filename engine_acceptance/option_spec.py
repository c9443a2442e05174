"""A command-line option as plain data, declared by the feature that reads it.

Only ``pytest_plugin/`` imports pytest, and the feature libraries sit below it, so a
feature (throughput, the SLO check, the soak, ...) cannot register its own options with
pytest's parser. It declares them instead as a tuple of :class:`OptionSpec`, next to the
``from_options`` that turns their parsed values into the feature's settings;
``pytest_plugin/option_catalog.py`` puts every feature's tuple in the order ``pytest --help``
shows, ``pytest_plugin/options.py`` registers them, and the compare driver reads from the same
declarations which options it sets for each run (:attr:`OptionSpec.driver_sets`).

The ``type=`` functions shared by several features are here too: argparse calls them as it
reads a value, so a bad one stops pytest with the option named, before anything starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["OptionSpec", "number", "positive_seconds", "seconds_or_zero", "whole_number_at_least_one"]

# "No default given": argparse's own default then applies, and the keyword is not passed at all,
# so the registration is exactly what it was when each option was written as an addoption call.
_UNSET: Any = object()


@dataclass(frozen=True)
class OptionSpec:
    """One long option: its flag, argparse keywords, and whether the compare driver sets it per run."""

    name: str
    help: str
    default: Any = _UNSET
    type: Callable[[str], Any] | None = None
    action: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    # The compare driver gives this option to each engine's run itself (python -m engine_acceptance.compare);
    # given after its -- it would make the runs differ, so the driver refuses it there.
    driver_sets: bool = False

    @property
    def dest(self) -> str:
        """The attribute the parsed value lands on (``config.option.<dest>``)."""
        return self.name.lstrip("-").replace("-", "_")

    def addoption_kwargs(self) -> dict[str, Any]:
        """The keywords of ``addoption``: only those the declaration gives."""
        given = {"type": self.type, "action": self.action, "metavar": self.metavar, "choices": self.choices}
        kwargs = {key: value for key, value in given.items() if value is not None}
        if self.default is not _UNSET:
            # A fresh list each time: argparse's "append" must never share one between parsers.
            kwargs["default"] = list(self.default) if isinstance(self.default, list) else self.default
        kwargs["help"] = self.help
        return kwargs


def number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None


def positive_seconds(raw: str) -> float:
    value = number(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be a positive number of seconds")
    return value


def seconds_or_zero(raw: str) -> float:
    value = number(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be zero or a positive number of seconds")
    return value


def whole_number_at_least_one(raw: str, unit: str, what: str) -> int:
    """A count of ``unit`` (plural), at least 1; the error says what needs one."""
    try:
        count = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of {unit}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{raw!r}: {what} needs at least 1 {unit[:-1]}")
    return count
