"""The diff's statistics: intervals that cover no change as often as they claim, and find a real one.

Each is checked against what it must do, not against its own output: the bootstrap's
interval covers 0 for two samples of one distribution about 95% of the time and excludes
it for a 30% shift; the order-statistic shortcut draws the same distribution as resampling
and sorting; Newcombe's interval is his published one; F1 from counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine_acceptance.diff.statistics import (
    _bootstrap_percentile,
    f1_difference,
    f1_score,
    mean_change,
    newcombe_difference,
    percentile_change,
    rounds_change,
    samples_for_interval,
    share_difference,
)


def _latencies(seed: int, size: int = 200, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(40), 0.2, size) * scale


def test_two_samples_of_one_distribution_give_intervals_covering_zero_about_95_percent_of_the_time() -> None:
    covered = {50: 0, 95: 0}
    pairs = 200
    for seed in range(pairs):
        changes = percentile_change(_latencies(2 * seed), _latencies(2 * seed + 1), seed=0, name="ttft")
        for q in covered:
            covered[q] += not changes[q].excludes_zero
    # 95% nominal; 200 pairs put the share within about +-3 points of it.
    assert all(0.90 <= count / pairs <= 0.99 for count in covered.values()), covered


def test_a_30_percent_slower_sample_is_a_change_whose_interval_excludes_zero() -> None:
    changes = percentile_change(_latencies(1, size=500), _latencies(2, size=500, scale=1.3), seed=0, name="ttft")
    for q, interval in changes.items():
        assert interval.excludes_zero and interval.low > 0.05, (q, interval)
        assert interval.low < 0.3 < interval.high, (q, interval)


def test_the_same_seed_gives_the_same_interval_and_the_interval_does_not_depend_on_other_figures() -> None:
    first = percentile_change(_latencies(1), _latencies(2), seed=7, name="cell ttft_ms")
    rounds_change([1, 2, 3], [1, 2, 3], seed=7, name="something else")
    assert percentile_change(_latencies(1), _latencies(2), seed=7, name="cell ttft_ms") == first


@pytest.mark.parametrize("q", [50, 90, 95, 99])
def test_the_order_statistic_shortcut_draws_the_bootstrap_distribution_of_a_percentile(q: int) -> None:
    values = np.sort(_latencies(3, size=57))
    rng = np.random.default_rng(0)
    # Rounded: the two interpolate between the same two values with other float rounding.
    resampled = np.percentile(values[rng.integers(0, values.size, (20000, values.size))], q, axis=1).round(9)
    shortcut = _bootstrap_percentile(values, q, rng, 20000).round(9)
    # The largest gap between the two empirical distribution functions (Kolmogorov-Smirnov): two
    # samples of 20,000 from one distribution stay under 0.025 but about once in 30,000.
    points = np.union1d(resampled, shortcut)
    gap = np.abs(np.searchsorted(np.sort(resampled), points, side="right")
                 - np.searchsorted(np.sort(shortcut), points, side="right")).max() / 20000
    assert gap < 0.025


def test_a_percentile_gets_an_interval_only_with_five_samples_beyond_it() -> None:
    assert [samples_for_interval(q) for q in (50, 90, 95, 99)] == [10, 50, 100, 500]
    changes = percentile_change(_latencies(1, size=99), _latencies(2, size=99, scale=2), seed=0, name="ttft")
    assert changes[90].excludes_zero
    for q in (95, 99):
        assert changes[q].change > 0.5 and changes[q].low is None and not changes[q].excludes_zero
        assert f"too few samples for a P{q} interval (99 and 99; it needs {samples_for_interval(q)} a side)" == \
            changes[q].basis


def test_too_few_samples_or_rounds_give_no_interval_and_say_why() -> None:
    assert "too few samples" in percentile_change([1.0], [1.0, 2.0], seed=0, name="x")[50].basis
    two = rounds_change([100, 101], [80, 81], seed=0, name="x")
    assert two.low is None and not two.excludes_zero and "too few rounds" in two.basis
    assert math.isclose(two.change, 80.5 / 100.5 - 1)
    three = rounds_change([100, 101, 99], [80, 81, 79], seed=0, name="x")
    assert three.excludes_zero and "3 and 3 rounds" in three.basis


def test_newcombe_method_10_matches_his_published_example() -> None:
    # Newcombe 1998, Statistics in Medicine 17:873-890, Table II example (a): 56/70 - 48/80,
    # estimate 0.2000, method 10 (hybrid score, no continuity correction): 0.0524 to 0.3339.
    interval = newcombe_difference(48, 80, 56, 70)
    assert math.isclose(interval.change, 0.2)
    assert round(interval.low, 4) == 0.0524 and round(interval.high, 4) == 0.3339
    assert interval.excludes_zero


def test_equal_rates_give_an_interval_around_zero_even_at_k_equal_n() -> None:
    interval = newcombe_difference(626, 626, 626, 626)
    assert interval.change == 0 and interval.low < 0 < interval.high


def test_f1_difference_is_bootstrapped_from_the_confusion_counts() -> None:
    assert f1_score(564, 0, 0) == 1.0 and f1_score(0, 0, 0) == 1.0
    assert math.isclose(f1_score(8, 2, 2), 16 / 20)
    same = f1_difference([560, 2, 4, 72], [560, 2, 4, 72], seed=0, name="f1")
    assert same.change == 0 and not same.excludes_zero
    worse = f1_difference([560, 2, 4, 72], [480, 40, 44, 74], seed=0, name="f1")
    assert worse.change < 0 and worse.high < 0


def _tokens(seed: int, size: int = 200, mean: float = 400.0) -> np.ndarray:
    return np.random.default_rng(seed).poisson(mean, size).astype(float)


def test_a_mean_of_counts_covers_no_change_about_95_percent_of_the_time_and_finds_a_real_one() -> None:
    pairs = 200
    covered = sum(not mean_change(_tokens(2 * seed), _tokens(2 * seed + 1), seed=0, name="tokens").excludes_zero
                  for seed in range(pairs))
    assert 0.90 <= covered / pairs <= 0.99, covered
    more = mean_change(_tokens(1), _tokens(2, mean=440.0), seed=0, name="tokens")
    assert more.excludes_zero and more.low < 0.10 < more.high, more
    assert mean_change([0.0] * 20, [5.0] * 20, seed=0, name="t").basis.startswith("a base mean of 0")
    assert mean_change([1.0] * 5, [2.0] * 5, seed=0, name="t").low is None  # too few requests


def test_a_share_of_summed_counts_is_a_difference_bootstrapped_over_requests() -> None:
    rng = np.random.default_rng(3)
    prompts = rng.integers(100, 200, 100).astype(float)
    # BASE: a cache that serves about half of every prompt; NEW: none of it, then the same.
    half = np.floor(prompts / 2)
    lost = share_difference(half, prompts, np.zeros(100), prompts, seed=0, name="cached")
    assert lost.excludes_zero and lost.high < -0.4, lost
    same = share_difference(half, prompts, half, prompts, seed=0, name="cached")
    assert same.change == 0 and not same.excludes_zero
    # A cache that serves all of some prompts and none of others: the requests move together, so the
    # interval is as wide as the requests' spread, not as narrow as a count of independent tokens.
    all_or_none = np.where(rng.random(100) < 0.5, prompts, 0.0)
    again = np.where(rng.random(100) < 0.5, prompts, 0.0)
    spread = share_difference(all_or_none, prompts, again, prompts, seed=0, name="cached")
    assert spread.high - spread.low > 0.2, spread
    with pytest.raises(ValueError, match="parts"):
        share_difference([1.0], [1.0, 2.0], [1.0], [1.0], seed=0, name="x")
