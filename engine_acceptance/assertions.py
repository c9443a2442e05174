"""Small assertion helpers shared by the acceptance checks.

Each turns a failed expectation into one readable message that says what the
engine did, so a report reader does not have to open the attachments.
"""

from __future__ import annotations

import re
from typing import Iterable

from engine_acceptance.wire.client import Exchange
from engine_acceptance.wire.reassembly import Reply

__all__ = ["ObservationWarning", "markers_found", "reply_of", "integers_in"]


class ObservationWarning(UserWarning):
    """What a check saw and reports without failing (a seed that did not repeat, say).

    Defined here, in an importable module, so pytest-xdist can send it from a worker to the
    controller (a class defined in a test module cannot be unpickled there).
    """


def reply_of(exchange: Exchange) -> Reply:
    """The reply of a successful exchange; fails the check with the reason otherwise."""
    if not exchange.ok or exchange.reply is None:
        # Hidden from pytest's traceback: the failure is the engine's, shown as one sentence.
        __tracebackhide__ = True
        mode = "streamed" if exchange.stream else "non-streamed"
        raise AssertionError(f"{mode} request to {exchange.url} failed: {exchange.describe_failure()}")
    return exchange.reply


def markers_found(text: str, markers: Iterable[str]) -> list[str]:
    return [marker for marker in markers if marker in text]


def integers_in(text: str) -> list[int]:
    return [int(match.replace(",", "")) for match in re.findall(r"-?\d[\d,]*", text)]


def short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
