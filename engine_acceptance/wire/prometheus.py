"""Reading an engine's Prometheus ``/metrics``: the text format, and a gauge by its names.

vLLM serves Prometheus text at ``/metrics``, SGLang too with ``--enable-metrics``. The soak
reads memory and queue series there at its start and its end (:func:`pick_series`); the
cancellation checks read the running and waiting requests and the KV-cache usage while they
wait for the engine to return to idle (:func:`read_gauge`). A gauge is named by a list of
candidate names from the engine profile (``features.metric_names``), newest first, because
engines rename them (vLLM's ``vllm:gpu_cache_usage_perc`` became ``vllm:kv_cache_usage_perc``):
the first name the engine serves is read, and the result says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Gauge", "parse_prometheus", "pick_series", "read_gauge", "series_name"]

_SAMPLE = re.compile(r"^(?P<series>[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?)\s+(?P<value>\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Series (name with its labels, as written) -> value, from Prometheus text exposition."""
    series: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        try:
            series[match["series"]] = float(match["value"])
        except ValueError:
            continue
    return series


def series_name(series: str) -> str:
    """The metric name of a series, its labels left out."""
    return series.split("{", 1)[0]


def pick_series(series: dict[str, float], patterns: Iterable[str]) -> dict[str, float]:
    """The series whose name (labels aside) matches one of the patterns, in name order."""
    compiled = [re.compile(p) for p in patterns]
    return {name: value for name, value in sorted(series.items())
            if any(p.search(series_name(name)) for p in compiled)}


@dataclass(frozen=True)
class Gauge:
    """One gauge as the engine serves it: the name found, and its value over all its label sets."""

    name: str
    value: float
    # How many series (label sets: engines, data-parallel ranks) were combined.
    series: int


def read_gauge(series: dict[str, float], names: Sequence[str], *, combine: str = "sum") -> Gauge | None:
    """The first of ``names`` the engine serves, its series combined; None when it serves none.

    ``combine``: ``sum`` for counts (requests running on each engine add up), ``max`` for
    fractions (the fullest KV cache of several engines; usages do not add).
    """
    if combine not in ("sum", "max"):
        raise ValueError(f"combine must be 'sum' or 'max', not {combine!r}")
    for name in names:
        values = [value for key, value in series.items() if series_name(key) == name]
        if values:
            return Gauge(name, sum(values) if combine == "sum" else max(values), len(values))
    return None
