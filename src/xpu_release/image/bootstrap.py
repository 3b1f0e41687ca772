"""The statistics of the ``evaluate`` stage, pure: the median of the rounds' own ratios with a
bootstrap confidence interval, and what it says against a regression threshold.

Each arm of an evaluation (an image running one variant of the workload) gives one figure per
round, and the rounds run the arms interleaved, so figure ``i`` of two arms were measured side by
side. The figure compared is the median of each round's own ratio, and the bootstrap resamples
those: a load on a shared machine that slows both arms of a round cancels out of their ratio
(simulated at 5 % noise a run: a 1.25x slowdown found in 99.5 % of trials where a ratio of the
arms' medians found it in 83 %, bench/evaluate.py --mode sequential). The resampling is seeded: the same
figures always give the same interval, so notes rendered again from a record never change.

A noisy machine must not decide a release: a comparison is a regression only when its whole
interval lies beyond the threshold; an interval that straddles the threshold is undecided and
says how many rounds would likely decide it (the interval narrows as one over the square root
of the rounds).

**Sequential.** The stage looks at its comparisons after the manifest's ``rounds`` and again at
each later look of ``looks`` (every look about 40 % more rounds, up to ``max_rounds``), and stops
at the first look where every gated comparison is decided. Peeking many times would raise the
false-alarm rate, so each look uses the confidence ``per_look`` gives: each one-sided error
rate split evenly over the planned looks (Bonferroni), which holds it under 1 - ``CONFIDENCE``
in all (simulated: bench/evaluate.py --mode sequential).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from ..manifest.evaluation import MAX_ROUNDS

Better = Literal["higher", "lower"]

SEED = 41  # the bootstrap's seed: fixed, so the same figures give the same interval
RESAMPLES = 2000
CONFIDENCE = 0.95
MAX_ROUNDS_SAID = MAX_ROUNDS  # "about N rounds would decide it": only a number the manifest takes
# Figures of two arms further apart than this either way are not one metric measured twice (a
# workload that printed seconds in one image and microseconds in another): no ratio is said of
# them. It also keeps every ratio, resampled or not, a finite number the record writes with meaning.
MAX_RATIO = 1e4


class Incomparable(ValueError):
    """Two arms' figures too far apart for a ratio (``MAX_RATIO``)."""


class Verdict(StrEnum):
    REGRESSION = "regression"  # the whole interval is worse than the threshold allows
    UNDECIDED = "undecided"  # the interval straddles the threshold: more rounds could tell
    WITHIN = "within"  # the whole interval lies within the threshold, both ways: no difference
    NO_REGRESSION = "no regression"  # not worse than the threshold, but maybe better: not "within"
    IMPROVEMENT = "improvement"  # the whole interval is better by more than the threshold

    @property
    def decided(self) -> bool:
        """Whether the gate's question (is it a regression?) has its answer."""
        return self is not Verdict.UNDECIDED


GROWTH = 1.4  # each look of a sequential evaluation has about this many times the rounds before it


def looks(first: int, most: int) -> tuple[int, ...]:
    """The rounds after which a sequential evaluation looks: ``first``, then about ``GROWTH``
    times the rounds before, up to ``most`` (5 and 20: 5, 7, 10, 14, 20)."""
    out = [first]
    while out[-1] < most:
        out.append(min(most, max(out[-1] + 1, math.ceil(out[-1] * GROWTH))))
    return tuple(out)


def per_look(planned: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided confidence of each of ``planned`` looks. Each question the gate asks of an
    interval is one-sided (is its whole interval worse than the threshold? is none of it?), so a
    look at two-sided ``c`` errs on each at most (1 - c) / 2; split over the planned looks
    (Bonferroni), every look together errs on each at most 1 - ``confidence``: 5 looks at 98 %."""
    return 1 - 2 * (1 - confidence) / max(planned, 1)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """One comparison: the ratio of the subject's median to the reference's, its interval, and
    what they say against the threshold."""

    ratio: float
    low: float
    high: float
    verdict: Verdict
    rounds: int
    rounds_needed: int | None = None  # for an undecided one: about how many rounds would decide


def median(values: Sequence[float]) -> float:
    """The median; of an even count, the middle two's midpoint taken without their sum (two
    figures near the largest float would overflow it to infinity)."""
    return _middle(sorted(values))


def _middle(ordered: list[float]) -> float:
    """The median of figures already in order."""
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    low, high = ordered[mid - 1], ordered[mid]
    return float(low + (high - low) / 2)


def ratio_of_medians(subject: Sequence[float], reference: Sequence[float]) -> float:
    return median(subject) / median(reference)


def ratio(subject: Sequence[float], reference: Sequence[float]) -> float:
    """The comparison's figure: with one figure per round in each arm, the median of the rounds'
    own ratios (a load on the machine that slows both arms of a round cancels out of it); else
    the ratio of the arms' medians."""
    if len(subject) == len(reference):
        return median([s / r for s, r in zip(subject, reference, strict=True)])
    return ratio_of_medians(subject, reference)


def interval(
    subject: Sequence[float],
    reference: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``ratio``: with one figure per round in each arm,
    the rounds' own ratios resampled; else each arm on its own (a ratio of medians)."""
    _check(subject, reference)
    draw = random.Random(seed).random
    n, m = len(subject), len(reference)
    ratios = []
    rounds_n, rounds_m = range(n), range(m)
    own = [s / r for s, r in zip(subject, reference, strict=True)] if n == m else []
    for _ in range(resamples):
        # One draw per figure, as rng.choices(range(n), k=n) draws (floor(random() * n)), without
        # its call and its list of rounds: the same resamples in two thirds of the time
        # (randrange per figure: 5x the CPU).
        if own:
            ratios.append(_middle(sorted([own[int(draw() * n)] for _ in rounds_n])))
            continue
        ours = sorted([subject[int(draw() * n)] for _ in rounds_n])
        theirs = sorted([reference[int(draw() * m)] for _ in rounds_m])
        ratios.append(_middle(ours) / _middle(theirs))
    ratios.sort()
    tail = (1 - confidence) / 2
    low = ratios[math.floor(tail * (resamples - 1))]
    high = ratios[math.ceil((1 - tail) * (resamples - 1))]
    return low, high


def judge(
    subject: Sequence[float],
    reference: Sequence[float],
    *,
    better: Better,
    threshold: float,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> Judgement:
    """The subject against the reference: a regression is worse by more than ``threshold`` (a
    fraction: 0.1 is 10 %), over the whole interval."""
    figure = ratio(subject, reference)
    low, high = interval(subject, reference, confidence=confidence, seed=seed)
    worse, good = (1 - threshold, 1 + threshold) if better == "higher" else (1 + threshold, 1 - threshold)
    rounds = min(len(subject), len(reference))

    def beyond(value: float, edge: float, *, bad: bool) -> bool:
        """``value`` is past ``edge`` on the bad (or good) side, for this direction."""
        lower_is_bad = (better == "higher") == bad
        return value < edge if lower_is_bad else value > edge

    # The interval's end nearest the bad side, and the one nearest the good side.
    bad_end, good_end = (low, high) if better == "higher" else (high, low)
    if beyond(good_end, worse, bad=True):
        verdict = Verdict.REGRESSION
    elif beyond(bad_end, worse, bad=True):
        verdict = Verdict.UNDECIDED
    elif beyond(bad_end, good, bad=False):
        verdict = Verdict.IMPROVEMENT
    elif beyond(good_end, good, bad=False):
        verdict = Verdict.NO_REGRESSION
    else:
        verdict = Verdict.WITHIN
    needed = _rounds_needed(figure, low, high, worse, rounds) if verdict == Verdict.UNDECIDED else None
    return Judgement(ratio=figure, low=low, high=high, verdict=verdict, rounds=rounds, rounds_needed=needed)


def _rounds_needed(ratio: float, low: float, high: float, edge: float, rounds: int) -> int | None:
    """About how many rounds would put the interval on one side of ``edge``: the half-width
    that crosses the edge must shrink to the distance from the ratio to the edge, and a
    half-width shrinks as one over the square root of the rounds. None: the ratio sits on the
    edge, or more than ``MAX_ROUNDS_SAID`` would be needed."""
    distance = abs(ratio - edge)
    half = (ratio - low) if edge < ratio else (high - ratio)
    if distance <= 0 or half <= 0:
        return None
    needed = math.ceil(rounds * (half / distance) ** 2)
    return needed if needed <= MAX_ROUNDS_SAID else None


def _check(subject: Sequence[float], reference: Sequence[float]) -> None:
    for name, values in (("subject", subject), ("reference", reference)):
        if len(values) < 2:
            msg = f"the {name} has {len(values)} figures; a comparison needs at least 2 rounds"
            raise ValueError(msg)
        if any(not math.isfinite(v) or v <= 0 for v in values):
            msg = f"the {name}'s figures must be positive numbers: {list(values)[:6]}"
            raise ValueError(msg)
    # Every median of a resample lies between its arm's least and greatest figure: so does every
    # ratio, between these two (an overflow is inf, an underflow 0: both beyond the bound).
    widest = (max(subject) / min(reference), min(subject) / max(reference))
    if any(not 1 / MAX_RATIO <= r <= MAX_RATIO for r in widest):
        msg = (
            f"their figures are more than {MAX_RATIO:g} times apart ({_few(subject)} against "
            f"{_few(reference)}): not one metric measured twice, no ratio is said"
        )
        raise Incomparable(msg)


def _few(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in list(values)[:3]) + (", ...]" if len(values) > 3 else "]")
