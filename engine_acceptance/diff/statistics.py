"""The change of a figure between two runs, with its 95% interval: bootstrap and Newcombe.

Three kinds of figure, three intervals, all reproducible (the bootstrap is seeded from
the diff's seed and the figure's name, so the same two bundles give the same intervals):

* **A percentile of per-request samples** (TTFT, TPOT, E2E, ITL at P50/P90/P95/P99): the
  relative change ``new/base - 1`` of the percentile, by numpy.percentile's default linear
  method (the suite's), with a percentile-bootstrap interval: both runs' samples are
  resampled with replacement ``RESAMPLES`` times, each pair of resamples giving one ratio.
  Only with ``MIN_TAIL`` samples beyond the percentile: nearer the extreme the bootstrap
  cannot see past the largest sample, and its interval would be too narrow.
* **A per-round throughput** (output tok/s, requests/s): the relative change of the mean
  of the rounds, bootstrapped over the rounds. A run has few rounds (the default three),
  so the interval is coarse and says so; with fewer than ``MIN_ROUNDS`` on a side there
  is no interval at all ("too few rounds"), and no significance.
* **A mean of per-request counts** (reasoning and content tokens per request): the relative
  change of the mean, with a bootstrap of the requests (``MIN_MEAN_SAMPLES`` a side at least).
* **A share of summed per-request counts** (the cached share of the prompt tokens: the
  cached tokens over the prompt tokens of the requests that reported them): the difference of
  the two shares, with a bootstrap that resamples requests, each with its two counts, so the
  tokens of one request move together (they are not independent trials).
* **A rate** (k of n): the difference of proportions with Newcombe's hybrid score interval
  (his method 10, from the two Wilson intervals; Newcombe 1998, Statistics in Medicine
  17:873-890). **Tool-call F1** from confusion counts: the difference of F1, bootstrapped
  by resampling each run's counts from their multinomial.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine_acceptance.proportions import wilson_interval

__all__ = ["MIN_MEAN_SAMPLES", "MIN_ROUNDS", "MIN_TAIL", "PERCENTILES", "RESAMPLES", "Interval", "f1_difference",
           "f1_score", "mean_change", "newcombe_difference", "percentile_change", "rounds_change",
           "share_difference"]

RESAMPLES = 2000
PERCENTILES = (50, 90, 95, 99)
# Samples a percentile's interval needs beyond it: the bootstrap of an order statistic near the
# extreme is unreliable (it cannot see past the largest sample: P99 of 48 is nearly the maximum).
# So an interval for P50 needs 10 samples, P90 50, P95 100, P99 500.
MIN_TAIL = 5
# A bootstrap over one or two values per side cannot tell a change from noise.
MIN_ROUNDS = 3
# Requests a side for an interval of a mean or a share of per-request counts: as many as a P50 needs.
MIN_MEAN_SAMPLES = 10


@dataclass(frozen=True)
class Interval:
    """A change and its 95% interval; ``low``/``high`` are None when no interval could be made."""

    change: float | None
    low: float | None
    high: float | None
    # What the interval rests on, said in the outputs ("bootstrap of 812 and 809 samples").
    basis: str

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def _rng(seed: int, name: str) -> np.random.Generator:
    """A generator of its own per figure, so one figure's interval does not depend on which others ran."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def _bootstrap_percentile(ordered: np.ndarray, q: float, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The q-th percentile (linear method) of ``resamples`` bootstrap resamples of ``ordered`` (sorted).

    Drawn without building the resamples: a resample is F_n^-1 of n uniforms, so its k-th
    smallest value is F_n^-1(U_(k)), U_(k) ~ Beta(k, n-k+1), and the next one F_n^-1 of
    U_(k) + (1-U_(k)) Beta(1, n-k). The same distribution as resampling and sorting (checked
    against it in the self-tests), at a cost independent of n: ITL has a sample per token.
    """
    n = ordered.size
    position = (n - 1) * q / 100  # numpy's linear method interpolates between ranks k and k+1
    k = math.floor(position) + 1
    fraction = position - (k - 1)
    lower_u = rng.beta(k, n - k + 1, size=resamples)
    lower = ordered[np.minimum((lower_u * n).astype(int), n - 1)]
    if k >= n or fraction == 0:
        return lower
    upper_u = lower_u + (1 - lower_u) * rng.beta(1, n - k, size=resamples)
    upper = ordered[np.minimum((upper_u * n).astype(int), n - 1)]
    return (1 - fraction) * lower + fraction * upper


def samples_for_interval(q: float) -> int:
    """The fewest samples a side for an interval of the q-th percentile: MIN_TAIL beyond it."""
    return math.ceil(MIN_TAIL * 100 / min(q, 100 - q) - 1e-9)


def percentile_change(base: Sequence[float], new: Sequence[float], *, seed: int, name: str,
                      resamples: int = RESAMPLES) -> dict[int, Interval]:
    """Each percentile's relative change new/base - 1, with a bootstrap interval of the samples.

    No interval (and so no significance) for a percentile with fewer than MIN_TAIL samples beyond it.
    """
    base_values = np.asarray(base, dtype=float)
    new_values = np.asarray(new, dtype=float)
    basis = f"bootstrap of {base_values.size} and {new_values.size} samples"
    if base_values.size < 2 or new_values.size < 2:
        return {q: Interval(None, None, None, f"too few samples ({base_values.size} and {new_values.size})")
                for q in PERCENTILES}
    base_sorted, new_sorted = np.sort(base_values), np.sort(new_values)
    changes = {}
    for q in PERCENTILES:
        base_point = float(np.percentile(base_values, q))
        change = float(np.percentile(new_values, q)) / base_point - 1 if base_point > 0 else None
        needed = samples_for_interval(q)
        if min(base_values.size, new_values.size) < needed:
            changes[q] = Interval(change, None, None, f"too few samples for a P{q} interval ({base_values.size} and "
                                                      f"{new_values.size}; it needs {needed} a side)")
            continue
        rng = _rng(seed, f"{name} P{q}")
        base_boot = _bootstrap_percentile(base_sorted, q, rng, resamples)
        new_boot = _bootstrap_percentile(new_sorted, q, rng, resamples)
        if change is None or np.any(base_boot <= 0):
            changes[q] = Interval(None, None, None, "a base percentile of 0: no relative change")
            continue
        low, high = np.percentile(new_boot / base_boot - 1, [2.5, 97.5])
        changes[q] = Interval(change, float(low), float(high), basis)
    return changes


def rounds_change(base: Sequence[float], new: Sequence[float], *, seed: int, name: str,
                  resamples: int = RESAMPLES) -> Interval:
    """The relative change of the mean of the rounds, bootstrapped over the rounds (none under MIN_ROUNDS)."""
    return _mean_ratio(base, new, what="rounds", minimum=MIN_ROUNDS, seed=seed, name=name, resamples=resamples,
                       caveat=" (coarse: few values)")


def mean_change(base: Sequence[float], new: Sequence[float], *, seed: int, name: str,
                resamples: int = RESAMPLES) -> Interval:
    """The relative change of the mean per request, new/base - 1, bootstrapped over the requests."""
    return _mean_ratio(base, new, what="requests", minimum=MIN_MEAN_SAMPLES, seed=seed, name=name,
                       resamples=resamples)


def _mean_ratio(base: Sequence[float], new: Sequence[float], *, what: str, minimum: int, seed: int, name: str,
                resamples: int, caveat: str = "") -> Interval:
    """new mean / base mean - 1 of values (``what``: rounds, requests), bootstrapped over them (``minimum`` a side)."""
    base_values = np.asarray(base, dtype=float)
    new_values = np.asarray(new, dtype=float)
    if base_values.size == 0 or new_values.size == 0:
        return Interval(None, None, None, f"no {what} to compare ({base_values.size} and {new_values.size})")
    if base_values.mean() <= 0:
        return Interval(None, None, None, f"a base mean of 0 (NEW {new_values.mean():.4g}): no relative change")
    change = float(new_values.mean() / base_values.mean() - 1)
    if min(base_values.size, new_values.size) < minimum:
        return Interval(change, None, None, f"too few {what} ({base_values.size} and {new_values.size}; "
                                            f"an interval needs {minimum} a side)")
    rng = _rng(seed, name)
    base_means = base_values[rng.integers(0, base_values.size, size=(resamples, base_values.size))].mean(axis=1)
    new_means = new_values[rng.integers(0, new_values.size, size=(resamples, new_values.size))].mean(axis=1)
    if np.any(base_means <= 0):
        return Interval(change, None, None, "a base resample with a mean of 0: no interval of a relative change")
    low, high = np.percentile(new_means / base_means - 1, [2.5, 97.5])
    return Interval(change, float(low), float(high),
                    f"bootstrap of {base_values.size} and {new_values.size} {what}{caveat}")


def share_difference(base_parts: Sequence[float], base_totals: Sequence[float], new_parts: Sequence[float],
                     new_totals: Sequence[float], *, seed: int, name: str, resamples: int = RESAMPLES) -> Interval:
    """new share - base share, each the sum of the parts over the sum of the totals, bootstrapped over requests.

    ``parts[i]`` and ``totals[i]`` are one request's (its cached and its prompt tokens): a resample
    draws requests, so the tokens of one request stay together.
    """
    sides = []
    for parts, totals in ((base_parts, base_totals), (new_parts, new_totals)):
        part, total = np.asarray(parts, dtype=float), np.asarray(totals, dtype=float)
        if part.size != total.size:
            raise ValueError(f"{name}: {part.size} parts for {total.size} totals")
        sides.append((part, total))
    (base_part, base_total), (new_part, new_total) = sides
    if base_total.sum() <= 0 or new_total.sum() <= 0:
        return Interval(None, None, None, f"no totals to compare ({base_total.size} and {new_total.size} requests)")
    change = float(new_part.sum() / new_total.sum() - base_part.sum() / base_total.sum())
    if min(base_total.size, new_total.size) < MIN_MEAN_SAMPLES:
        return Interval(change, None, None, f"too few requests ({base_total.size} and {new_total.size}; "
                                            f"an interval needs {MIN_MEAN_SAMPLES} a side)")
    rng = _rng(seed, name)

    def shares(part: np.ndarray, total: np.ndarray) -> np.ndarray:
        picks = rng.integers(0, total.size, size=(resamples, total.size))
        sums = total[picks].sum(axis=1)
        return np.where(sums > 0, part[picks].sum(axis=1) / np.maximum(sums, 1e-12), 0.0)

    low, high = np.percentile(shares(new_part, new_total) - shares(base_part, base_total), [2.5, 97.5])
    return Interval(change, float(low), float(high),
                    f"bootstrap of {base_total.size} and {new_total.size} requests (their tokens kept together)")


def newcombe_difference(base_k: int, base_n: int, new_k: int, new_n: int) -> Interval:
    """new rate - base rate, with Newcombe's hybrid score interval (method 10) from the Wilson intervals."""
    if base_n <= 0 or new_n <= 0:
        return Interval(None, None, None, f"no trials to compare ({base_k}/{base_n} and {new_k}/{new_n})")
    p_new, p_base = new_k / new_n, base_k / base_n
    new_low, new_high = wilson_interval(new_k, new_n)
    base_low, base_high = wilson_interval(base_k, base_n)
    difference = p_new - p_base
    below = math.sqrt((p_new - new_low) ** 2 + (base_high - p_base) ** 2)
    above = math.sqrt((new_high - p_new) ** 2 + (p_base - base_low) ** 2)
    return Interval(difference, difference - below, difference + above,
                    f"Newcombe hybrid score (method 10), {base_k}/{base_n} and {new_k}/{new_n}")


def f1_score(both: float, only_candidate: float, only_reference: float) -> float:
    """F1 of the candidate's tool calls against the reference's; 1 when neither ever called (nothing to miss)."""
    denominator = 2 * both + only_candidate + only_reference
    return 2 * both / denominator if denominator else 1.0


def _f1_of_counts(counts: np.ndarray) -> np.ndarray:
    both, only_candidate, only_reference = counts[:, 0], counts[:, 1], counts[:, 2]
    denominator = 2 * both + only_candidate + only_reference
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2 * both / np.maximum(denominator, 1), 1.0)


def f1_difference(base: Sequence[int], new: Sequence[int], *, seed: int, name: str,
                  resamples: int = RESAMPLES) -> Interval:
    """new F1 - base F1 from confusion counts (both, only candidate, only reference, neither), bootstrapped.

    Each run's counts are resampled from the multinomial of their own proportions with their total,
    the way a rerun of the same cases would scatter them.
    """
    base_counts = np.asarray(base, dtype=float)
    new_counts = np.asarray(new, dtype=float)
    base_total, new_total = int(base_counts.sum()), int(new_counts.sum())
    if base_total == 0 or new_total == 0:
        return Interval(None, None, None, f"no cases to compare ({base_total} and {new_total})")
    change = f1_score(*new_counts[:3]) - f1_score(*base_counts[:3])
    rng = _rng(seed, name)
    base_boot = _f1_of_counts(rng.multinomial(base_total, base_counts / base_total, size=resamples))
    new_boot = _f1_of_counts(rng.multinomial(new_total, new_counts / new_total, size=resamples))
    low, high = np.percentile(new_boot - base_boot, [2.5, 97.5])
    return Interval(float(change), float(low), float(high),
                    f"multinomial bootstrap of {base_total} and {new_total} cases")
