"""The evaluation's measurements: every arm (an image running one variant of the workload) in
throwaway containers under the same limits, interleaved round by round, within a time budget.

- **Interleaved.** Each round runs every arm once, in an order rotated by one from the round
  before (A B C, B C A, C A B …): never all A then all B, so a machine that gets busier or
  quieter over the stage weighs on every arm alike, and no arm always runs first.
- **Warm-up discarded.** The first ``warmup_rounds`` rounds are run and kept in the record, never
  compared. An arm whose first run says ``unsupported`` (a variant this image cannot run) is
  reported as such and run no more.
- **Rounds until the answer is known.** With ``decided`` (the stage's question: is every gated
  comparison decided?), measuring goes on past ``rounds``, look after look
  (``bootstrap.looks``), up to ``max_rounds``, and stops at the first look that answers yes.
- **A budget.** The stage has ``budget_seconds``: no run may go past it (a run still going then
  is killed); a round that would not fit (the longest round so far, with a margin of
  ``FIT_MARGIN``) is not started, and a round the deadline cuts short is dropped whole: the
  comparison uses the rounds done before, if at least ``MIN_ROUNDS`` (``stopped_early`` says
  why). Fewer is the workload failing: a run killed with fewer rounds behind it is said as one
  that hung.

A failing workload (non-zero exit, no line, no figures), or one the engine will not start (the
command is not in the image), is ``EvaluationFailed``, naming the arm; whatever of the workload's
or the engine's words a message quotes is shown escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import EvaluationFailed
from ..guard.shown import shown
from ..manifest.evaluation import MIN_ROUNDS, EvaluationSpec
from ..progress import Sink
from .bootstrap import looks, median
from .bounded import Finished, Limits
from .workload import Figures, read_line

FIT_MARGIN = 1.25  # a round is started only if the longest round so far, times this, fits the budget
# A round in which an arm measured this part of its own median, or less, was starved by the machine's
# other work (a slowdown of the image itself slows every round): dropped and run again, at most
# MAX_STARVED times an evaluation.
STARVED, MAX_STARVED = 0.5, 3
STDERR_LINES, STDERR_CHARS = 3, 200  # what a failure quotes of a workload's stderr


class Runner(Protocol):
    """What the experiment needs of the engine (``bounded.Containers``; a fake in the tests)."""

    def prepare(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                limits: Limits, arm: str = "") -> None: ...  # fmt: skip

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished: ...  # fmt: skip

    def cpu_count(self) -> int: ...

    def now(self) -> float:
        """Its clock (monotonic seconds): what the budget and a run's time are counted by."""
        ...


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One image (``image``: this, base or previous; ``ref`` as people name it, ``image_id`` as
    the engine runs it) running one variant of the workload."""

    image: str
    ref: str
    image_id: str
    variant: str
    env: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.ref} {self.variant}"

    @property
    def key(self) -> str:
        """What tells this arm from every other of its evaluation (two may run the same image)."""
        return f"{self.image}/{self.variant}"


@dataclass(kw_only=True)
class ArmRuns:
    """What one arm gave, round by round (the warm-up rounds first)."""

    arm: Arm
    runs: list[dict[str, float]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    unsupported: str | None = None
    workload_sha256: str | None = None

    def figures(self, metric: str, warmup: int) -> tuple[float, ...]:
        return tuple(run[metric] for run in self.runs[warmup:])


@dataclass(frozen=True, kw_only=True)
class Measurement:
    arms: tuple[ArmRuns, ...]
    rounds: int  # measured rounds done (all arms alike)
    warmup_rounds: int
    limits: Limits
    seconds: float
    stopped_early: str | None = None  # why fewer rounds than asked were measured
    looked: tuple[int, ...] = ()  # the rounds after which the comparisons were looked at
    starved: tuple[str, ...] = ()  # the rounds dropped, each named with why

    def of(self, image: str, variant: str) -> ArmRuns | None:
        return next((a for a in self.arms if (a.arm.image, a.arm.variant) == (image, variant)), None)


def order(arms: list[Any], round_index: int) -> list[Any]:
    """``arms`` rotated by ``round_index``: the interleaving of one round."""
    if not arms:
        return []
    k = round_index % len(arms)
    return arms[k:] + arms[:k]


def measure(runner: Runner, arms: list[Arm], spec: EvaluationSpec, limits: Limits, *, on_line: Sink,
            required: Arm | None = None,
            decided: Callable[[Measurement], bool] | None = None) -> Measurement:  # fmt: skip
    """Run ``arms`` interleaved: ``spec.warmup_rounds`` then ``spec.rounds`` rounds (with
    ``decided``: look after look up to ``spec.max_rounds``, until it says yes), within
    ``spec.budget_seconds``. ``required``: the arm without which nothing is measured (this
    image's plain workload): if it says it cannot run, the evaluation cannot be made."""
    rounds = _Rounds(runner, spec, limits, [ArmRuns(arm=a) for a in arms])
    rounds.prepare()
    schedule = looks(spec.rounds, spec.max_rounds) if decided is not None else (spec.rounds,)
    total = spec.warmup_rounds + schedule[-1]
    index = 0
    while rounds.measured < schedule[-1] and rounds.next(index, total, on_line, required):
        index += 1
        if rounds.measured not in schedule or rounds.drop_starved(on_line):
            continue  # no look yet; or a starved round dropped: run another before looking
        if decided is None:
            break
        rounds.looked.append(rounds.measured)
        if decided(rounds.so_far()):
            break
    measured = rounds.measured
    if measured < MIN_ROUNDS and any(r.unsupported is None for r in rounds.results):
        why = rounds.stopped or f"{measured} rounds were measured"
        msg = (
            f"the evaluation measured {measured} rounds ({why}); at least {MIN_ROUNDS} are needed: raise "
            "evaluation.budget_seconds or make the workload shorter (its command's steps)"
        )
        raise EvaluationFailed(msg)
    if decided is not None and rounds.looked[-1:] != [measured]:
        rounds.looked.append(measured)  # the budget ended it between looks: a last look, at what was measured
    return rounds.so_far()


class _Rounds:
    """The rounds of one ``measure``: what each arm gave, and why measuring stopped early."""

    def __init__(self, runner: Runner, spec: EvaluationSpec, limits: Limits, results: list[ArmRuns]) -> None:
        self.runner, self.spec, self.limits, self.results = runner, spec, limits, results
        self.clock = runner.now
        self.started = self.clock()
        self.deadline = self.started + spec.budget_seconds
        self.longest = 0.0
        self.done = 0  # rounds done, the warm-up ones among them
        self.stopped: str | None = None
        self.looked: list[int] = []
        self.starved: list[str] = []  # each round dropped because an arm in it was starved

    def prepare(self) -> None:
        """Start what each arm's runs need (a served arm's container: all at once, so that their
        starts overlap), within the budget."""
        for r in self.results:
            arm = r.arm
            self.runner.prepare(arm.image_id, list(self.spec.command), env=dict(arm.env), purpose="evaluate",
                                limits=self.limits, arm=arm.key)  # fmt: skip
        if self.clock() >= self.deadline:
            took = self.clock() - self.started
            msg = (f"the engine took {took:.0f} s to start the evaluation's {len(self.results)} "
                   f"containers, past its budget of {self.spec.budget_seconds} s: raise "
                   "evaluation.budget_seconds")  # fmt: skip
            raise EvaluationFailed(msg)

    @property
    def measured(self) -> int:
        return max(self.done - self.spec.warmup_rounds, 0)

    def so_far(self) -> Measurement:
        return Measurement(arms=tuple(self.results), rounds=self.measured,
                           warmup_rounds=self.spec.warmup_rounds, limits=self.limits,
                           seconds=round(self.clock() - self.started, 3), stopped_early=self.stopped,
                           looked=tuple(self.looked), starved=tuple(self.starved))  # fmt: skip

    def next(self, index: int, total: int, on_line: Sink, required: Arm | None) -> bool:
        """Round ``index`` of ``total``; False when there is none to run (every arm unsupported)
        or the budget has no room for it (``stopped`` says so)."""
        active = [r for r in self.results if r.unsupported is None]
        if not active:
            return False
        budget, asked = self.spec.budget_seconds, total - self.spec.warmup_rounds
        if index > 0 and self.clock() + self.longest * FIT_MARGIN > self.deadline:
            self.stopped = f"the budget of {budget} s left room for {self.measured} of {asked} rounds"
            return False
        began = self.clock()
        if not _one_round(self.runner, order(active, index), self.spec, self.limits, deadline=self.deadline,
                          enough=self.measured >= MIN_ROUNDS):  # fmt: skip
            self.stopped = (f"the budget of {budget} s ran out during round {self.measured + 1} of {asked}: "
                            f"it was dropped, the {self.measured} rounds before it are compared")  # fmt: skip
            return False
        _required_ran(self.results, required)
        if index >= self.spec.warmup_rounds:  # a warm-up round also holds every served arm's start
            self.longest = max(self.longest, self.clock() - began)
        self.done += 1
        kind = "warm-up round" if index < self.spec.warmup_rounds else "round"
        on_line(f"    {kind} {self.done}/{total}: {len(active)} arms in {self.clock() - began:.1f} s")
        return True

    def drop_starved(self, on_line: Sink) -> bool:
        """Drop the measured rounds in which an arm was starved (its figure a ``STARVED`` part of
        its own median, or worse: the machine's other work took its CPU, the arm did not get
        slower), naming each; at most ``MAX_STARVED`` in all. Whether one was dropped."""
        warmup, metric, higher = self.spec.warmup_rounds, self.spec.metric, self.spec.better == "higher"
        dropped = False
        for k in reversed(range(self.measured)):
            if len(self.starved) >= MAX_STARVED:
                break
            for r in self.results:
                figures = r.figures(metric, warmup)
                if len(figures) < MIN_ROUNDS or k >= len(figures):
                    continue
                mid, got = median(figures), figures[k]
                part = got / mid if higher else mid / got
                if part <= STARVED:
                    said = (f"round {k + 1}: {r.arm.label} measured {metric} {got:.4g}, {part:.2f} of its "
                            f"median {mid:.4g} (starved by the machine's other work): dropped and run "
                            "again")  # fmt: skip
                    self.starved.append(said)
                    on_line(f"    {said}")
                    for each in self.results:
                        del each.runs[warmup + k : warmup + k + 1], each.seconds[warmup + k : warmup + k + 1]
                    self.done -= 1
                    dropped = True
                    break
        return dropped


def _required_ran(results: list[ArmRuns], required: Arm | None) -> None:
    """Nothing of this image is measured when its plain workload cannot run: no comparison could
    be made, and "passed" would say the image was measured and found fine."""
    got = next((r for r in results if r.arm == required), None)
    if got is not None and got.unsupported is not None:
        msg = (
            f"{got.arm.label}: the workload cannot run in this image ({got.unsupported}): nothing of it "
            "can be measured; give evaluation.command a workload the image runs, or --no-evaluate REASON"
        )
        raise EvaluationFailed(msg)


def _one_round(runner: Runner, arms: list[ArmRuns], spec: EvaluationSpec, limits: Limits, *, deadline: float,
               enough: bool) -> bool:  # fmt: skip
    """Run one round of ``arms``; False when the deadline cut it short and ``enough`` rounds are
    behind it: the round is dropped whole (every arm keeps the runs of the rounds before it)."""
    kept = [(r, len(r.runs), len(r.seconds)) for r in arms]
    for result in arms:
        if not _run_once(runner, result, spec, limits, deadline=deadline, may_stop=enough):
            for r, runs, seconds in kept:
                del r.runs[runs:], r.seconds[seconds:]
            return False
    return True


def _run_once(runner: Runner, result: ArmRuns, spec: EvaluationSpec, limits: Limits, *, deadline: float,
              may_stop: bool) -> bool:  # fmt: skip
    """One run of one arm; False when the deadline cut it and ``may_stop`` (enough rounds were
    measured before it to stop there)."""
    arm, clock = result.arm, runner.now
    left = deadline - clock()
    if left <= 0:
        if may_stop:
            return False
        msg = f"{arm.label}: the evaluation ran out of its budget of {spec.budget_seconds} s"
        raise EvaluationFailed(msg)
    began = clock()
    finished = runner.run_bounded(arm.image_id, list(spec.command), env=dict(arm.env), purpose="evaluate",
                                  limits=limits, timeout=left, arm=arm.key)  # fmt: skip
    took = clock() - began
    if finished.refused is not None:
        msg = (
            f"{arm.label}: the engine would not run the workload `{' '.join(spec.command)}`: "
            f"{shown(finished.refused, 300)} (is the command in the image? is evaluation.cpus more than "
            "the engine has?)"
        )
        raise EvaluationFailed(msg)
    if finished.exit_code is None:
        if may_stop:
            return False
        msg = (
            f"{arm.label}: the workload was still running after {took:.0f} s, past the evaluation's "
            f"budget of {spec.budget_seconds} s; it was stopped (does it hang?)"
        )
        raise EvaluationFailed(msg)
    if finished.exit_code != 0:
        said = finished.stderr.strip().splitlines()[-STDERR_LINES:]
        tail = ("; its stderr ends: " + " | ".join(shown(s, STDERR_CHARS) for s in said)) if said else ""
        msg = f"{arm.label}: the workload `{' '.join(spec.command)}` exited {finished.exit_code}{tail}"
        raise EvaluationFailed(msg)
    got = read_line(finished.stdout, spec.metric, run=arm.label)
    if not isinstance(got, Figures):
        if result.runs:
            msg = f"{arm.label}: the workload measured this variant before, then said it cannot run it"
            raise EvaluationFailed(msg)
        result.unsupported = got.why
        return True
    result.runs.append(got.values)
    result.seconds.append(round(took, 3))
    result.workload_sha256 = result.workload_sha256 or got.workload_sha256
    return True
