"""The evaluation's statistics on synthetic figures (image/bootstrap.py): an image against itself
never reports a difference, a 1.5x slowdown is always a regression, an interval too wide to
decide says so and how many rounds would decide it, and the same figures always give the same
interval."""

from __future__ import annotations

import math
import random
from typing import Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xpu_release.image.bootstrap import MAX_RATIO, Incomparable, Verdict, interval, judge, ratio_of_medians
from xpu_release.manifest.evaluation import MAX_ROUNDS

from ...conftest import examples

TRIALS = 200
ROUNDS = 5


def noisy(rng: random.Random, centre: float, spread: float, rounds: int = ROUNDS) -> list[float]:
    """Figures of one arm: log-normal noise around ``centre`` (a shared machine's spread)."""
    return [centre * rng.lognormvariate(0, spread) for _ in range(rounds)]


def test_an_image_against_itself_never_reports_a_difference() -> None:
    rng = random.Random(1)
    verdicts = [judge(noisy(rng, 1000, 0.05), noisy(rng, 1000, 0.05), better="higher", threshold=0.1).verdict
                for _ in range(TRIALS)]  # fmt: skip
    assert not {Verdict.REGRESSION, Verdict.IMPROVEMENT} & set(verdicts)  # never a difference, either way
    assert sum(v.decided for v in verdicts) > TRIALS / 2  # five rounds of 5 % noise mostly decide it


def test_a_slowdown_of_one_and_a_half_is_always_a_regression() -> None:
    rng = random.Random(2)
    for _ in range(TRIALS):
        found = judge(noisy(rng, 1000 / 1.5, 0.05), noisy(rng, 1000, 0.05), better="higher", threshold=0.1)
        assert found.verdict == Verdict.REGRESSION, found
        assert found.high < 0.9
        assert found.low <= found.ratio <= found.high


def test_a_speedup_is_an_improvement_never_a_regression() -> None:
    rng = random.Random(3)
    found = judge(noisy(rng, 1500, 0.02), noisy(rng, 1000, 0.02), better="higher", threshold=0.1)
    assert found.verdict == Verdict.IMPROVEMENT
    assert found.verdict != Verdict.REGRESSION


def test_a_wide_interval_is_undecided_and_says_how_many_rounds_would_decide() -> None:
    # A 15 % slowdown on a very noisy machine: the interval reaches past 0.9 on both sides.
    subject = [850.0, 600.0, 1150.0, 700.0, 990.0]
    reference = [1000.0, 1100.0, 900.0, 1050.0, 950.0]
    found = judge(subject, reference, better="higher", threshold=0.1)
    assert found.low < 0.9 < found.high
    assert found.verdict == Verdict.UNDECIDED
    assert found.rounds_needed is None  # more than the manifest takes: no number is said
    # A 22 % slowdown as noisy: decided within the rounds a manifest may ask.
    closer = judge([780.0, 700.0, 960.0, 720.0, 880.0], reference, better="higher", threshold=0.1)
    assert closer.verdict == Verdict.UNDECIDED
    assert closer.rounds_needed is not None
    assert ROUNDS < closer.rounds_needed <= MAX_ROUNDS


def test_the_rounds_said_to_decide_do_decide_more_often() -> None:
    # What "about N rounds would decide it" promises: with that many rounds of the same machine,
    # most comparisons of a real 25 % slowdown are decided.
    rng = random.Random(4)
    tries = (judge(noisy(rng, 750, 0.25), noisy(rng, 1000, 0.25), better="higher", threshold=0.1)
             for _ in range(50))  # fmt: skip
    first = next(j for j in tries if j.verdict == Verdict.UNDECIDED and j.rounds_needed is not None)
    more = max(first.rounds_needed, ROUNDS + 1)
    decided = sum(
        judge(noisy(rng, 750, 0.25, more), noisy(rng, 1000, 0.25, more), better="higher",
              threshold=0.1).verdict != Verdict.UNDECIDED
        for _ in range(40)
    )  # fmt: skip
    assert decided >= 20


def test_lower_is_better_turns_the_threshold_around() -> None:
    # Step time: the subject takes 1.5x as long per step.
    rng = random.Random(5)
    slower = judge(noisy(rng, 0.15, 0.03), noisy(rng, 0.1, 0.03), better="lower", threshold=0.1)
    assert slower.ratio > 1.4
    assert slower.verdict == Verdict.REGRESSION
    faster = judge(noisy(rng, 0.05, 0.03), noisy(rng, 0.1, 0.03), better="lower", threshold=0.1)
    assert faster.verdict == Verdict.IMPROVEMENT


def test_the_same_figures_give_the_same_interval() -> None:
    rng = random.Random(6)
    subject, reference = noisy(rng, 900, 0.1), noisy(rng, 1000, 0.1)
    assert interval(subject, reference) == interval(list(subject), list(reference))
    assert judge(subject, reference, better="higher", threshold=0.1) == judge(
        subject, reference, better="higher", threshold=0.1
    )


def test_rounds_are_resampled_as_pairs() -> None:
    # A burst of load that slows both arms of a round cancels out: paired figures whose every
    # round has the same ratio give an interval of exactly that ratio.
    reference = [1000.0, 400.0, 1200.0, 300.0, 900.0]
    subject = [r * 0.8 for r in reference]
    low, high = interval(subject, reference)
    assert ratio_of_medians(subject, reference) == pytest.approx(0.8)
    assert (low, high) == (pytest.approx(0.8), pytest.approx(0.8))


@pytest.mark.parametrize(
    ("subject", "reference"),
    [([1.0], [1.0, 2.0]), ([1.0, 2.0], []), ([1.0, -2.0], [1.0, 2.0]), ([1.0, float("nan")], [1.0, 2.0])],
)
def test_figures_a_comparison_cannot_use_are_refused(subject: list[float], reference: list[float]) -> None:
    with pytest.raises(ValueError, match=r"figures|rounds"):
        interval(subject, reference)


POSITIVE = st.floats(
    min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False
)


def paired(n: int) -> st.SearchStrategy[tuple[list[float], list[float]]]:
    return st.tuples(st.lists(POSITIVE, min_size=n, max_size=n), st.lists(POSITIVE, min_size=n, max_size=n))


@settings(max_examples=examples(40), deadline=2000)
@given(st.integers(min_value=2, max_value=8).flatmap(paired), st.sampled_from(["higher", "lower"]))
@example(([1.0e308] * 4, [1.7e308] * 4), "higher")  # the even median's sum overflowed: NaN
@example(([1e-200] * 3, [1e200] * 3), "lower")  # a ratio of 0
@example(([1e200] * 3, [1e-200] * 3), "higher")  # a ratio of infinity
def test_any_finite_figures_give_a_finite_judgement_or_are_refused(
    figures: tuple[list[float], list[float]], better: Literal["higher", "lower"]
) -> None:
    # Figures a workload may print (any finite positive number the guarded reader takes): the
    # comparison is finite and positive, its interval too, or the figures are refused as too
    # far apart to compare (the evaluation then fails as the workload's, exit 18). Never NaN,
    # never a ratio of 0 or infinity.
    subject, reference = figures
    try:
        got = judge(subject, reference, better=better, threshold=0.1)
    except Incomparable:
        return
    for value in (got.ratio, got.low, got.high):
        assert math.isfinite(value)
        assert 1 / MAX_RATIO <= value <= MAX_RATIO
    assert got.low <= got.high
