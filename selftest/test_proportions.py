"""The Wilson interval against published values (Newcombe 1998, Table I; Agresti & Coull 1998)."""

from __future__ import annotations

import pytest

from engine_acceptance.proportions import Proportion, wilson_interval


@pytest.mark.parametrize("successes,total,lower,upper", [
    (81, 263, 0.2553, 0.3662),   # Newcombe's example 1
    (15, 148, 0.0624, 0.1605),   # example 2
    (0, 20, 0.0, 0.1611),        # example 3: none out of 20
    (1, 29, 0.0061, 0.1718),     # example 4
])
def test_wilson_interval_matches_newcombe(successes: int, total: int, lower: float, upper: float) -> None:
    got = wilson_interval(successes, total)
    assert got == pytest.approx((lower, upper), abs=1e-4)


def test_all_successes_keep_an_honest_lower_bound() -> None:
    assert Proportion(3, 3).lower == pytest.approx(0.4385, abs=1e-4)
    assert Proportion(300, 300).lower == pytest.approx(0.9874, abs=1e-4)
    assert str(Proportion(291, 300)) == "291/300 = 97.0% (95% Wilson 94.4-98.4%)"


def test_nothing_counted_is_the_whole_interval_and_bad_counts_are_refused() -> None:
    assert Proportion(0, 0).rate is None and wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(4, 3)
