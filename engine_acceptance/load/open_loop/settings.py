"""The open-loop and SLO options, parsed once, and merged with the model profile's ``slo``.

Command line (declared in :data:`OPTIONS` below): ``--request-rate R[,R...]`` (one cell per
rate; ``inf`` sends all at once), ``--burstiness B`` (gamma shape; 1 = Poisson),
``--load-seed N`` (the schedule's seed, fixed by default), ``--slo ttft=MS,tpot=MS,e2e=MS``
(any subset), ``--slo-target F``, ``--slo-min-goodput RPS``, ``--slo-requests N``,
``--slo-shape IN/OUT``, ``--slo-endpoint completions|chat`` and ``--slo-search``. The model profile's ``slo`` section carries
the same figures (``ttft_ms``, ``tpot_ms``, ``e2e_ms``, ``target``, ``min_goodput_rps``,
``request_rate``, ``requests``), so a release gate can live with the model: what the
command line gives wins, limit by limit replaced as a whole (``--slo`` names every limit
in force), the rest from the profile. A bad value is a :class:`SettingsError` (exit 4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engine_acceptance.load.arrivals import DEFAULT_LOAD_SEED, parse_rates
from engine_acceptance.load.closed_loop.settings import SettingsError
from engine_acceptance.load.open_loop.cells import RateCell
from engine_acceptance.load.open_loop.slo import DEFAULT_TARGET, SLO_METRICS, SloSpec, parse_slo_limits
from engine_acceptance.option_spec import OptionSpec

T = TypeVar("T")

__all__ = ["DEFAULT_RATE", "DEFAULT_REQUESTS", "DEFAULT_SHAPE", "OPTIONS", "OpenLoopSettings", "from_options",
           "open_loop_settings_from_options"]

# One request a second: a CPU test model (15 tok/s per request) keeps up with a 32-token reply.
DEFAULT_RATE = 1.0
DEFAULT_REQUESTS = 32
DEFAULT_SHAPE = (128, 32)
_SHAPE = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class OpenLoopSettings:
    """What the command line said; ``None`` where the model profile or the default decides."""

    rates: tuple[float, ...] | None = None
    burstiness: float = 1.0
    seed: int = DEFAULT_LOAD_SEED
    limits_ms: Mapping[str, float] | None = None
    target: float | None = None
    min_goodput_rps: float | None = None
    requests: int | None = None
    shape: tuple[int, int] = DEFAULT_SHAPE
    search: bool = False
    # Where the cells' requests go: completions (the default, as the throughput smoke) or chat.
    endpoint: str = "completions"

    def spec(self, profile_slo: Mapping[str, Any], profile_source: str) -> SloSpec | None:
        """The SLO in force, or None when neither the command line nor the profile gives a limit."""
        profile_limits = {name: float(profile_slo[f"{name}_ms"]) for name in SLO_METRICS
                          if profile_slo.get(f"{name}_ms") is not None}
        limits = dict(self.limits_ms) if self.limits_ms else profile_limits
        if not limits:
            return None
        target = self.target if self.target is not None else float(profile_slo.get("target", DEFAULT_TARGET))
        goodput = self.min_goodput_rps if self.min_goodput_rps is not None else profile_slo.get("min_goodput_rps")
        from_cli = [name for name, given in (("--slo", self.limits_ms), ("--slo-target", self.target),
                                             ("--slo-min-goodput", self.min_goodput_rps)) if given]
        from_profile = bool(profile_slo) and (not self.limits_ms or self.target is None
                                              or self.min_goodput_rps is None)
        source = " and ".join(filter(None, [" ".join(from_cli), profile_source if from_profile else ""]))
        return SloSpec(limits, target, None if goodput is None else float(goodput), source or "--slo")

    def cells(self, profile_slo: Mapping[str, Any]) -> list[RateCell]:
        """One open-loop cell per rate: the command line's rates, else the profile's, else 1 req/s."""
        rates = self.rates or (float(profile_slo.get("request_rate", DEFAULT_RATE)),)
        requests = self.requests or int(profile_slo.get("requests", DEFAULT_REQUESTS))
        return [RateCell(self.shape[0], self.shape[1], rate, requests, burstiness=self.burstiness, seed=self.seed,
                         warmup_requests=min(4, requests), endpoint=self.endpoint) for rate in rates]


def _number(option: str, raw: str | None, *, above: float | None = None, at_most: float | None = None
            ) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(option, f"{raw!r} is not a number") from None
    if math.isnan(value) or (above is not None and value <= above) or (at_most is not None and value > at_most):
        bounds = " and ".join(filter(None, [f"above {above:g}" if above is not None else "",
                                            f"at most {at_most:g}" if at_most is not None else ""]))
        raise SettingsError(option, f"{raw!r} must be {bounds}")
    return value


def _min_goodput(raw: str | None) -> float | None:
    value = _number("--slo-min-goodput", raw)
    if value is not None and value < 0:
        raise SettingsError("--slo-min-goodput", f"{raw!r} must be at least 0 requests per second")
    return value


def _parsed(option: str, parse: Callable[[str], T], text: str | None) -> T | None:
    """``parse(text)`` unless the option was not given; its ValueError as a SettingsError naming the option."""
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise SettingsError(option, str(exc)) from None


def open_loop_settings_from_options(*, request_rate: str | None, burstiness: str, load_seed: int, slo: str | None,
                                    slo_target: str | None, slo_min_goodput: str | None, slo_requests: int | None,
                                    slo_shape: str, slo_search: bool, slo_endpoint: str = "completions"
                                    ) -> OpenLoopSettings:
    """Validate every open-loop option; SettingsError names the option and the value."""
    rates = _parsed("--request-rate", parse_rates, request_rate)
    shape_burst = _number("--burstiness", burstiness, above=0)
    assert shape_burst is not None
    limits = _parsed("--slo", parse_slo_limits, slo)
    if slo_requests is not None and slo_requests < 1:
        raise SettingsError("--slo-requests", f"{slo_requests!r} must be at least 1")
    match = _SHAPE.match(slo_shape.strip())
    if not match or min(int(match.group(1)), int(match.group(2))) < 1:
        raise SettingsError("--slo-shape", f"{slo_shape!r} is not IN/OUT tokens, each at least 1 (e.g. 128/32)")
    return OpenLoopSettings(
        rates=rates, burstiness=shape_burst, seed=load_seed, limits_ms=limits,
        target=_number("--slo-target", slo_target, above=0, at_most=1),
        min_goodput_rps=_min_goodput(slo_min_goodput),
        requests=slo_requests, shape=(int(match.group(1)), int(match.group(2))), search=slo_search,
        endpoint=slo_endpoint)


# The open-loop and SLO options (pytest -m slo), in the order pytest --help shows them.
OPTIONS = (
    OptionSpec("--request-rate", default=None, metavar="R[,R...]",
               help="Open-loop arrivals for the SLO check (pytest -m slo): requests per second, one cell per rate, "
                    "inf sends all at once (default: the model profile's slo.request_rate, else 1)"),
    OptionSpec("--burstiness", default="1", metavar="B",
               help="Gamma shape of the open-loop gaps as vllm bench serve's: 1 Poisson, below 1 burstier, inf a "
                    "constant gap (default: 1)"),
    OptionSpec("--load-seed", type=int, default=0, metavar="N",
               help="Seed of the open-loop arrival schedule, so runs send at the same times (default: 0)"),
    OptionSpec("--slo", default=None, metavar="ttft=MS,tpot=MS,e2e=MS",
               help="Service-level objective, any subset of the three limits in milliseconds; with it the SLO check "
                    "runs (default: the model profile's slo, else the check skips)"),
    OptionSpec("--slo-target", default=None, metavar="F",
               help="Share of requests that must meet the SLO, e.g. 0.99 (default: the model profile's, else 0.99)"),
    OptionSpec("--slo-min-goodput", default=None, metavar="RPS",
               help="Lowest goodput, requests per second meeting the SLO (default: the model profile's, else none)"),
    OptionSpec("--slo-requests", type=int, default=None, metavar="N",
               help="Requests per open-loop cell (default: the model profile's slo.requests, else 32)"),
    OptionSpec("--slo-shape", default="128/32", metavar="IN/OUT",
               help="Input and output tokens of the open-loop requests (default: 128/32)"),
    OptionSpec("--slo-endpoint", default="completions", choices=("completions", "chat"),
               help="Where the open-loop requests go: completions (token-id prompts of exact length, as the "
                    "throughput smoke) or chat (text prompts of an estimated length, one user message each: a "
                    "reasoning model's first reasoning and first content token apart) (default: completions)"),
    OptionSpec("--slo-search", action="store_true",
               help="Also search the highest rate whose attainment stays at the target (doubling, then bisecting)"),
)


def from_options(values: Any) -> OpenLoopSettings:
    """The open-loop settings from the parsed options (``config.option``); merged with the profile later."""
    return open_loop_settings_from_options(
        request_rate=values.request_rate, burstiness=values.burstiness, load_seed=values.load_seed, slo=values.slo,
        slo_target=values.slo_target, slo_min_goodput=values.slo_min_goodput, slo_requests=values.slo_requests,
        slo_shape=values.slo_shape, slo_search=values.slo_search, slo_endpoint=values.slo_endpoint)
