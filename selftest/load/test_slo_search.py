"""The SLO search on a fake cell runner: which rates it tries, where it stops, and why.

The fake engine meets the target below a known knee and misses it above, so the
search's bracket is checked exactly, with no engine and no clock.
"""

from __future__ import annotations

import asyncio

import pytest

from engine_acceptance.load.open_loop.search import SearchPolicy, Step, search_highest_rate


def knee_engine(knee: float, *, above: float = 0.8, late_above: bool = False):
    """Attainment 1.0 up to ``knee``, ``above`` past it; records every rate asked."""
    asked: list[float] = []

    async def run(rate: float) -> Step:
        asked.append(rate)
        good = rate <= knee
        return Step(rate, 1.0 if good else above, 100, 0 if good or not late_above else 50)

    return run, asked


def search(run, **policy: object):
    return asyncio.run(search_highest_rate(run, SearchPolicy(**policy)))  # type: ignore[arg-type]


def test_doubling_then_bisecting_brackets_the_knee_within_the_resolution() -> None:
    run, asked = knee_engine(20.0)
    result = search(run, start=3.0, resolution=0.1, max_steps=12)
    assert asked[:4] == [3.0, 6.0, 12.0, 24.0]
    assert result.best is not None and result.first_bad is not None
    assert result.best <= 20.0 < result.first_bad <= result.best * 1.1
    assert "bracketed" in result.stopped and len(result.steps) == len(asked)


def test_a_start_above_the_knee_goes_down_until_the_target_is_met() -> None:
    run, asked = knee_engine(5.0)
    result = search(run, start=16.0, resolution=0.2)
    assert asked[:3] == [16.0, 8.0, 4.0]
    assert result.best is not None and result.best <= 5.0 < result.first_bad <= result.best * 1.2


def test_a_plainly_saturated_start_ends_the_search_at_once() -> None:
    run, asked = knee_engine(1.0, above=0.1)
    result = search(run, start=16.0)
    assert asked == [16.0] and result.best is None and "saturated at the start rate 16" in result.stopped


def test_late_sends_alone_do_not_end_the_search_as_saturation() -> None:
    # Attainment 95% with half the sends late: below the target, not plainly saturated, so it goes down.
    run, asked = knee_engine(1.0, above=0.95, late_above=True)
    result = search(run, start=4.0)
    assert asked[:3] == [4.0, 2.0, 1.0] and result.best == 1.0 and "saturated" not in result.stopped


def test_no_rate_above_a_saturated_one_is_ever_tried() -> None:
    run, asked = knee_engine(10.0, above=0.0)
    result = search(run, start=2.0, resolution=0.05, max_steps=20)
    assert max(asked) == 16.0 and result.first_bad is not None and result.first_bad <= 16.0


def test_the_step_budget_bounds_the_search_and_says_so() -> None:
    run, asked = knee_engine(1e9)
    result = search(run, start=1.0, max_steps=5)
    assert len(asked) == 5 and result.best == 16.0 and "step budget (5)" in result.stopped


def test_concurrency_is_searched_in_whole_numbers_without_repeats() -> None:
    run, asked = knee_engine(5.0)
    result = search(run, start=1.0, integer=True, resolution=0.01, max_steps=20)
    assert all(rate == int(rate) for rate in asked) and len(asked) == len(set(asked))
    assert (result.best, result.first_bad) == (5.0, 6.0)


@pytest.mark.parametrize("bad", [{"start": 0.0}, {"factor": 1.0}, {"max_steps": 0}, {"target": 1.5}],
                         ids=lambda v: next(iter(v)))
def test_a_policy_that_cannot_search_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SearchPolicy(**bad)  # type: ignore[arg-type]
