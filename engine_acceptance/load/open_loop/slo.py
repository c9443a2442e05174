"""Service-level objectives: which requests met them, attainment and goodput per cell.

Teams accept a deployment on SLOs, not on raw tokens per second: "99% of requests get
their first token within 500 ms and then a token every 50 ms". An SLO here is a
limit in milliseconds on any of TTFT, TPOT and E2E (``--slo ttft=500,tpot=50``,
or the model profile's ``slo``), a target share of requests (0.99 by default) and,
optionally, a lowest goodput.

Per request: it *meets* the SLO when it succeeded and each limited metric is at
or under its limit. A failed request (an HTTP error, a timeout, a broken stream)
never meets it. A reply of one token has no TPOT and cannot miss a TPOT limit.
Per cell: attainment = requests meeting / requests sent, with its 95% Wilson
interval (:mod:`engine_acceptance.proportions`); goodput = requests meeting / the
cell's duration (its start to the end of its last request), in requests per second,
as ``vllm bench serve --goodput`` counts it; and the P50/P90/P99 of TTFT, TPOT and
E2E over the successful requests (linear interpolation, as the throughput figures).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.load.metrics import PERCENTILE_METHOD, RequestRecord, percentile
from engine_acceptance.proportions import Proportion

__all__ = ["DEFAULT_TARGET", "SLO_METRICS", "SLO_PERCENTILES", "SloOutcome", "SloSpec", "evaluate_slo",
           "meets_slo", "missed_metrics", "parse_slo_limits"]

SLO_METRICS = ("ttft", "tpot", "e2e")
# The percentiles each cell reports, as the report states them.
SLO_PERCENTILES = (50, 90, 99)
DEFAULT_TARGET = 0.99


def parse_slo_limits(text: str) -> dict[str, float]:
    """``ttft=500,tpot=50,e2e=8000`` (milliseconds, any subset) as {metric: ms}; ValueError says what is wrong."""
    limits: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition("=")
        name = name.strip().lower().removesuffix("_ms")
        if not sep or name not in SLO_METRICS:
            raise ValueError(f"{part!r} is not METRIC=MS with METRIC one of {', '.join(SLO_METRICS)} "
                             f"(e.g. ttft=500,tpot=50)")
        if name in limits:
            raise ValueError(f"{name} is given twice")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value.strip()!r} is not a number of milliseconds") from None
        if not math.isfinite(ms) or ms <= 0:
            raise ValueError(f"{part!r}: the limit must be a finite number of milliseconds above 0")
        limits[name] = ms
    return limits


@dataclass(frozen=True)
class SloSpec:
    """Limits in ms on some of TTFT/TPOT/E2E, the share of requests that must meet them, a lowest goodput."""

    limits_ms: Mapping[str, float]
    target: float = DEFAULT_TARGET
    min_goodput_rps: float | None = None
    # Where it came from, for the messages: "--slo", "model profile reference (path)".
    source: str = "--slo"

    def __post_init__(self) -> None:
        unknown = set(self.limits_ms) - set(SLO_METRICS)
        if unknown or not self.limits_ms:
            raise ValueError(f"an SLO limits some of {', '.join(SLO_METRICS)}; got {sorted(self.limits_ms)}")
        if not 0 < self.target <= 1:
            raise ValueError(f"the SLO target is a share of requests in (0, 1], got {self.target}")
        if self.min_goodput_rps is not None and self.min_goodput_rps < 0:
            raise ValueError(f"min_goodput_rps must be >= 0, got {self.min_goodput_rps}")

    def describe(self) -> str:
        limits = ", ".join(f"{name} <= {self.limits_ms[name]:g} ms" for name in SLO_METRICS if name in self.limits_ms)
        goodput = f", goodput >= {self.min_goodput_rps:g} req/s" if self.min_goodput_rps is not None else ""
        return f"{limits} for {100 * self.target:g}% of requests{goodput} ({self.source})"

    def as_dict(self) -> dict[str, Any]:
        return {**{f"{name}_ms": value for name, value in self.limits_ms.items()}, "target": self.target,
                "min_goodput_rps": self.min_goodput_rps, "source": self.source}


def _value_ms(record: RequestRecord, metric: str) -> float | None:
    seconds = getattr(record, f"{metric}_s")
    return None if seconds is None else seconds * 1000.0


def missed_metrics(record: RequestRecord, limits_ms: Mapping[str, float]) -> list[str]:
    """What keeps ``record`` from meeting the limits: ``failed`` or the metrics over their limit."""
    if not record.ok:
        return ["failed"]
    missed = []
    for metric, limit in limits_ms.items():
        value = _value_ms(record, metric)
        # No TPOT (a one-token reply): there was no per-token time to miss.
        if value is None and metric == "tpot":
            continue
        if value is None or value > limit:
            missed.append(metric)
    return missed


def meets_slo(record: RequestRecord, limits_ms: Mapping[str, float]) -> bool:
    return not missed_metrics(record, limits_ms)


@dataclass(frozen=True)
class SloOutcome:
    """One cell against the SLO: attainment, goodput, percentiles, and why requests missed."""

    key: str
    rate: float
    attainment: Proportion
    duration_s: float
    percentiles_ms: dict[str, float | None]
    # Requests missing each limit (a request can miss several), and failed ones.
    missed: dict[str, int] = field(default_factory=dict)
    late_sends: int = 0
    max_in_flight: int = 0
    # Client processes that sent the cell (--load-processes).
    client_processes: int = 1

    @property
    def goodput_rps(self) -> float:
        return self.attainment.successes / self.duration_s if self.duration_s > 0 else 0.0

    def problems(self, spec: SloSpec) -> list[str]:
        """Sentences for each way the cell misses the spec; empty when it meets it."""
        problems = []
        rate = self.attainment.rate
        if rate is None or rate < spec.target:
            why = ", ".join(f"{count} {'failed' if name == 'failed' else f'over the {name} limit'}"
                            for name, count in self.missed.items() if count) or "none sent"
            p99 = ", ".join(f"P99 {name.upper()} {self._ms(f'p99_{name}_ms')}" for name in spec.limits_ms)
            problems.append(f"{self.key}: SLO attainment {self.attainment} is below the target "
                            f"{100 * spec.target:g}% ({spec.describe()}); missed: {why}; {p99}")
        if spec.min_goodput_rps is not None and self.goodput_rps < spec.min_goodput_rps:
            problems.append(f"{self.key}: goodput {self.goodput_rps:.3g} req/s ({self.attainment.successes} requests "
                            f"meeting the SLO in {self.duration_s:.1f} s) is below the minimum "
                            f"{spec.min_goodput_rps:g} req/s ({spec.source})")
        return problems

    def _ms(self, name: str) -> str:
        value = self.percentiles_ms.get(name)
        return "-" if value is None else f"{value:.4g} ms"

    def as_dict(self) -> dict[str, Any]:
        rate = self.attainment.rate
        return {"key": self.key, "request_rate": self.rate, "sent": self.attainment.total,
                "meeting": self.attainment.successes, "attainment": rate,
                "attainment_wilson_low": self.attainment.lower, "attainment_wilson_high": self.attainment.upper,
                "goodput_rps": self.goodput_rps, "duration_s": self.duration_s, "missed": dict(self.missed),
                "late_sends": self.late_sends, "max_in_flight": self.max_in_flight,
                "client_processes": self.client_processes, "percentiles": PERCENTILE_METHOD, **self.percentiles_ms}


def evaluate_slo(key: str, rate: float, records: Sequence[RequestRecord], duration_s: float,
                 limits_ms: Mapping[str, float], *, late_sends: int = 0, max_in_flight: int = 0,
                 client_processes: int = 1) -> SloOutcome:
    """A cell's records against the limits; every request sent counts, failed ones as not meeting."""
    missed: dict[str, int] = {name: 0 for name in (*SLO_METRICS, "failed") if name in limits_ms or name == "failed"}
    meeting = 0
    for record in records:
        reasons = missed_metrics(record, limits_ms)
        meeting += not reasons
        for reason in reasons:
            missed[reason] += 1
    done = [record for record in records if record.ok]
    return SloOutcome(key, rate, Proportion(meeting, len(records)), duration_s, _percentiles(done), missed,
                      late_sends, max_in_flight, client_processes)


def _percentiles(records: Iterable[RequestRecord]) -> dict[str, float | None]:
    records = list(records)
    figures: dict[str, float | None] = {}
    for metric in SLO_METRICS:
        values = [value for value in (_value_ms(r, metric) for r in records) if value is not None]
        for p in SLO_PERCENTILES:
            figures[f"p{p}_{metric}_ms"] = percentile(values, p)
    return figures
