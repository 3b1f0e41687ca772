"""Found by review (issue 41): the "95 % bootstrap interval" at the fewest rounds the manifest
allows (``rounds: 3``; also what a budget stop may leave, ``MIN_ROUNDS``). With 3 rounds the
percentile bootstrap of a median can only pick among 3 figures, and its interval is about the
range of the 3 per-round ratios: it holds the true ratio about 70 % of the time, not 95 %, and
lies wholly below it about 15 % of the time, not 2.5 %. The gate stops a release when the whole
interval is beyond the threshold, so on a noisy machine with 3 rounds an image that did not
change is stopped far more often than the stated confidence allows (a regression gate with a
small threshold and `rounds: 3` stops an image against itself in ~9 % of trials at 10 % noise).

The specification: the interval the notes call 95 % holds the true ratio in (about) 95 % of
trials at every number of rounds the evaluation may compare; or the evaluation must not compare
so few."""

from __future__ import annotations

import random

from xpu_release.image.bootstrap import CONFIDENCE, interval
from xpu_release.image.experiment import MIN_ROUNDS

TRIALS = 150
NOISE = 0.10  # a run's own noise on a shared machine (docs/using/evaluation.md: "Limits")


def test_the_interval_holds_the_true_ratio_as_often_as_it_says_with_the_fewest_rounds() -> None:
    rng = random.Random(41)
    held = below = 0
    for _ in range(TRIALS):
        # An image against itself: the true ratio of medians is 1.
        mine = [1000 * rng.lognormvariate(0, NOISE) for _ in range(MIN_ROUNDS)]
        theirs = [1000 * rng.lognormvariate(0, NOISE) for _ in range(MIN_ROUNDS)]
        low, high = interval(mine, theirs)
        held += low <= 1.0 <= high
        below += high < 1.0
    # Nominal 95 %: with 150 trials, at least 88 % held and at most 6 % wholly below is generous.
    assert held / TRIALS >= CONFIDENCE - 0.07, f"held the true ratio in {held}/{TRIALS} trials"
    assert below / TRIALS <= 0.06, f"wholly below the true ratio in {below}/{TRIALS} trials"
