"""The evaluation decides (issue 52): rounds are added, look after look, while a gated comparison
is undecided and the budget allows, and stop at the first look where each is decided; each look
is judged at the confidence that keeps the false-alarm rate of all the looks together under 5 %;
a verdict says what it means ("no regression shown" is not "within the threshold"); and an
undecided comparison at the end does what the manifest says (``evaluation.undecided``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from xpu_release.image.bootstrap import CONFIDENCE, Verdict, judge, looks, per_look
from xpu_release.image.bounded import Finished
from xpu_release.image.evaluation import Reference, compare, conclusion, decided
from xpu_release.image.experiment import Measurement, measure

from .test_experiment import ARMS, LIMITS, FakeRunner, line, spec

BASE = (Reference(role="base", ref="b:1", image_id="old"),)


def noisy(spread: float, slower: float = 1.0, seed: int = 0) -> Callable[[str, dict[str, str]], Finished]:
    """Each run's figure: 1000 tokens/s (``slower`` times fewer for the new image) with
    log-normal noise of ``spread``, the same draws for the same seed."""
    rng = random.Random(seed)

    def answer(image: str, env: dict[str, str]) -> Finished:
        figure = 1000 * rng.lognormvariate(0, spread) / (slower if image == "new" else 1.0)
        return Finished(exit_code=0, stdout=line(tokens_per_second=figure), stderr="")

    return answer


def evaluated(runner: FakeRunner, **changes: Any) -> tuple[Measurement, Any]:
    ev = spec(**{"budget_seconds": 10_000, **changes})
    got = measure(runner, ARMS, ev, LIMITS, on_line=lambda _: None,
                  decided=lambda so_far: decided(compare(so_far, ev, BASE)))  # fmt: skip
    return got, compare(got, ev, BASE)


def test_the_looks_grow_by_about_two_fifths_up_to_the_most() -> None:
    assert looks(5, 20) == (5, 7, 10, 14, 20)
    assert looks(5, 5) == (5,)
    assert looks(5, 6) == (5, 6)


def test_each_look_spends_an_even_share_of_the_error_rate() -> None:
    # Each question is one-sided: a 90 % interval errs 5 % on each side; five looks, 1 % each.
    assert per_look(1) == pytest.approx(2 * CONFIDENCE - 1)
    assert per_look(5) == pytest.approx(0.98)


def test_a_quiet_machine_decides_at_the_first_look() -> None:
    runner = FakeRunner(noisy(0.01))

    got, comparisons = evaluated(runner, rounds=5, max_rounds=20)

    assert got.rounds == 5
    assert got.looked == (5,)
    assert all(c.judgement is not None and c.judgement.verdict == Verdict.WITHIN for c in comparisons)


def test_a_noisy_machine_gets_more_rounds_until_it_decides() -> None:
    runner = FakeRunner(noisy(0.12, seed=3))

    got, comparisons = evaluated(runner, rounds=5, max_rounds=20)

    assert got.rounds > 5, got.looked  # five rounds of 12 % noise do not decide 10 %
    assert got.looked == looks(5, 20)[: len(got.looked)]  # only at the planned looks
    assert decided(comparisons)
    assert got.rounds == got.looked[-1]


def test_without_a_question_the_rounds_are_the_manifests() -> None:
    runner = FakeRunner(noisy(0.12, seed=3))

    got = measure(runner, ARMS, spec(rounds=5, max_rounds=20), LIMITS, on_line=lambda _: None)

    assert got.rounds == 5


def test_the_budget_ends_the_rounds_and_the_last_look_is_what_was_measured() -> None:
    runner = FakeRunner(noisy(0.3, seed=5), seconds_per_run=10)  # 20 s a round

    got, _ = evaluated(runner, rounds=5, max_rounds=50, budget_seconds=190)

    assert got.stopped_early is not None
    assert "budget of 190 s" in got.stopped_early
    assert got.looked[-1] == got.rounds
    assert runner.clock[0] <= 190


def test_a_clear_regression_is_found_at_the_first_look() -> None:
    runner = FakeRunner(noisy(0.03, slower=1.5, seed=7))

    got, comparisons = evaluated(runner)

    assert got.rounds == 5
    assert comparisons[0].stops


@pytest.mark.parametrize(
    ("subject", "verdict"),
    [([1000, 1010, 990, 1005, 995], Verdict.WITHIN),
     ([1000, 1400, 1100, 1600, 1200], Verdict.NO_REGRESSION),
     ([700, 1300, 900, 1200, 800], Verdict.UNDECIDED)],
    ids=["within both ways", "not worse, maybe better", "straddles the threshold"],
)  # fmt: skip
def test_a_verdict_says_what_the_interval_shows(subject: list[float], verdict: Verdict) -> None:
    got = judge(subject, [1000.0] * 5, better="higher", threshold=0.1)

    assert got.verdict == verdict, (got.low, got.high)


@pytest.mark.parametrize(("policy", "status"), [("pass", "passed"), ("fail", "failed")])
def test_an_undecided_comparison_does_what_the_manifest_says(policy: str, status: str) -> None:
    runner = FakeRunner(noisy(0.4, seed=11), seconds_per_run=10)

    _, comparisons = evaluated(runner, budget_seconds=150, undecided=policy)

    assert any(c.undecided for c in comparisons)
    said, why = conclusion(comparisons)
    assert said == status
    assert ("UNDECIDED" in why) if policy == "pass" else ("undecided (evaluation.undecided: fail)" in why)


def test_the_false_alarm_rate_of_every_look_together_stays_under_five_percent() -> None:
    """A/A under heavy noise, looking at every planned look (the worst case for peeking): a
    regression is called in at most 5 % of the trials (bench/evaluate.py --mode sequential runs
    the thousand-trial version; this is its quick form)."""
    rng = random.Random(13)
    trials, alarms = 200, 0
    planned = looks(5, 20)
    for _ in range(trials):
        a = [rng.lognormvariate(0, 0.15) for _ in range(planned[-1])]
        b = [rng.lognormvariate(0, 0.15) for _ in range(planned[-1])]
        for n in planned:
            j = judge(a[:n], b[:n], better="higher", threshold=0.1, confidence=per_look(len(planned)))
            if j.verdict.decided:
                alarms += j.verdict == Verdict.REGRESSION
                break

    assert alarms / trials <= 0.05


def _starved_at(run: int) -> Callable[[str, dict[str, str]], Finished]:
    """Every run 1000 tokens/s (1 % noise) but the ``run``-th, starved to a tenth."""
    counter = iter(range(10_000))
    steady = noisy(0.01, seed=17)

    def answer(image: str, env: dict[str, str]) -> Finished:
        if next(counter) == run:
            return Finished(exit_code=0, stdout=line(tokens_per_second=100.0), stderr="")
        return steady(image, env)

    return answer


def test_a_round_in_which_an_arm_was_starved_is_named_and_run_again() -> None:
    runner = FakeRunner(_starved_at(4))  # the warm-up is runs 0 and 1: run 4 is round 2's first arm

    got, comparisons = evaluated(runner)

    assert len(got.starved) == 1, got.starved
    assert got.starved[0].startswith("round 2: ")
    assert "0.10 of its median" in got.starved[0]
    assert got.rounds == 5  # run again: five rounds, none starved
    assert all(min(a.figures("tokens_per_second", 1)) > 900 for a in got.arms)
    assert comparisons[0].judgement is not None
    assert comparisons[0].judgement.verdict == Verdict.WITHIN


def test_an_image_slower_in_every_round_is_not_starved_but_a_regression() -> None:
    runner = FakeRunner(noisy(0.01, slower=2.5, seed=19))

    got, comparisons = evaluated(runner)

    assert got.starved == ()
    assert comparisons[0].stops
