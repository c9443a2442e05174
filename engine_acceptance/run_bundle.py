"""What a run keeps for the next one to be compared with: the run bundle's raw records.

A release engineer asks two questions of a run: may this deployment take traffic (the
verdict), and what changed since the run accepted last time (``engine-acceptance diff``,
docs/diff.md). The second needs more than the verdict's figures: the raw per-request
samples of each load cell (for intervals on percentile changes) and every rate as k of n
(for intervals on a difference of proportions). Checks record those here, as two user
properties the gate collects apart from its figures (so ``gate.json`` stays as it was),
and at the end of every run the plugin writes them with the verdict into one file,
``run-bundle/run.json`` (:data:`BUNDLE_VERSION`).

A cell is comparable with another run's only when what was sent is the same: its
``shape`` (lengths, concurrency or rate, requests, rounds, media) and its
``request_set``, a hash of the shape and of whatever else decided the requests (the
prompt source and its seed, the media files).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "BUNDLE_FILE",
    "BUNDLE_VERSION",
    "CELLS_PROPERTY",
    "RATE_PROPERTY",
    "cell_entry",
    "cells_property",
    "rate_property",
    "request_set_id",
]

BUNDLE_VERSION = 1
BUNDLE_FILE = "run.json"
# The user properties the gate collects for the bundle, not as gate.json figures.
RATE_PROPERTY = "engine_acceptance.rate"
CELLS_PROPERTY = "engine_acceptance.cells"
# Samples are kept to the microsecond: finer is clock noise, and the bundle stays small.
SAMPLE_DECIMALS = 3


def rate_property(name: str, successes: int, total: int) -> tuple[str, str]:
    """The user property of one rate of a check: ``successes`` of ``total``."""
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"rate {name!r}: successes must be within 0..total, got {successes}/{total}")
    return RATE_PROPERTY, json.dumps({"name": name, "k": successes, "n": total})


def request_set_id(shape: Mapping[str, Any], parts: Iterable[Any] = ()) -> str:
    """A short hash of what decided a cell's requests: its shape and the given parts."""
    text = json.dumps([dict(shape), list(parts)], sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _rounded(values: Iterable[float | None]) -> list[float]:
    return [round(value, SAMPLE_DECIMALS) for value in values if value is not None]


def cell_entry(workload: str, key: str, shape: Mapping[str, Any], *, samples: Mapping[str, Iterable[float | None]],
               rounds: Mapping[str, Sequence[float | None]] | None = None, figures: Mapping[str, Any] | None = None,
               request_set_parts: Iterable[Any] = ()) -> dict[str, Any]:
    """One load cell for the bundle: what was sent, each successful request's samples (ms), per-round figures."""
    return {
        "workload": workload,
        "key": key,
        "shape": dict(shape),
        "request_set": request_set_id(shape, request_set_parts),
        "samples": {metric: _rounded(values) for metric, values in samples.items()},
        "rounds": {metric: _rounded(values) for metric, values in (rounds or {}).items()},
        "figures": dict(figures or {}),
    }


def cells_property(cells: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The user property carrying a check's load cells (``cell_entry`` each)."""
    return CELLS_PROPERTY, json.dumps(list(cells))
