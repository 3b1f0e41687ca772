"""The evaluation's measurements: every arm (an image running one variant of the workload) in
throwaway containers under the same limits, interleaved round by round, within a time budget.

- **Interleaved.** Each round runs every arm once, in an order rotated by one from the round
  before (A B C, B C A, C A B …): never all A then all B, so a machine that gets busier or
  quieter over the stage weighs on every arm alike, and no arm always runs first.
- **Warm-up discarded.** The first ``warmup_rounds`` rounds are run and kept in the record, never
  compared. An arm whose first run says ``unsupported`` (a variant this image cannot run) is
  reported as such and run no more.
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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import EvaluationFailed
from ..guard.shown import shown
from ..manifest.evaluation import MIN_ROUNDS, EvaluationSpec
from ..progress import Sink
from .bounded import Finished, Limits
from .workload import Figures, read_line

FIT_MARGIN = 1.25  # a round is started only if the longest round so far, times this, fits the budget
STDERR_LINES, STDERR_CHARS = 3, 200  # what a failure quotes of a workload's stderr


class Runner(Protocol):
    """What the experiment needs of the engine (``bounded.Containers``; a fake in the tests)."""

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float) -> Finished: ...  # fmt: skip

    def cpu_count(self) -> int: ...


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

    def of(self, image: str, variant: str) -> ArmRuns | None:
        return next((a for a in self.arms if (a.arm.image, a.arm.variant) == (image, variant)), None)


def order(arms: list[Any], round_index: int) -> list[Any]:
    """``arms`` rotated by ``round_index``: the interleaving of one round."""
    if not arms:
        return []
    k = round_index % len(arms)
    return arms[k:] + arms[:k]


def measure(runner: Runner, arms: list[Arm], spec: EvaluationSpec, limits: Limits, *, on_line: Sink,
            clock: Callable[[], float] = time.monotonic,
            required: Arm | None = None) -> Measurement:  # fmt: skip
    """Run ``arms`` interleaved: ``spec.warmup_rounds`` then up to ``spec.rounds`` rounds, within
    ``spec.budget_seconds``. ``required``: the arm without which nothing is measured (this
    image's plain workload): if it says it cannot run, the evaluation cannot be made."""
    started = clock()
    deadline = started + spec.budget_seconds
    results = [ArmRuns(arm=a) for a in arms]
    total = spec.warmup_rounds + spec.rounds
    longest = 0.0
    stopped = None
    done = 0
    for index in range(total):
        active = [r for r in results if r.unsupported is None]
        if not active:
            break
        if index > 0 and clock() + longest * FIT_MARGIN > deadline:
            room = max(done - spec.warmup_rounds, 0)
            stopped = f"the budget of {spec.budget_seconds} s left room for {room} of {spec.rounds} rounds"
            break
        round_started = clock()
        if not _one_round(runner, order(active, index), spec, limits, deadline=deadline, clock=clock,
                          enough=done - spec.warmup_rounds >= MIN_ROUNDS):  # fmt: skip
            room = done - spec.warmup_rounds
            stopped = (
                f"the budget of {spec.budget_seconds} s ran out during round {room + 1} of {spec.rounds}: "
                f"it was dropped, the {room} rounds before it are compared"
            )
            break
        _required_ran(results, required)
        longest = max(longest, clock() - round_started)
        done = index + 1
        kind = "warm-up round" if index < spec.warmup_rounds else "round"
        on_line(f"    {kind} {index + 1}/{total}: {len(active)} arms in {clock() - round_started:.1f} s")
    measured = max(done - spec.warmup_rounds, 0)
    if measured < MIN_ROUNDS and any(r.unsupported is None for r in results):
        why = stopped or f"{measured} rounds were measured"
        msg = (
            f"the evaluation measured {measured} rounds ({why}); at least {MIN_ROUNDS} are needed: raise "
            "evaluation.budget_seconds or make the workload shorter (its command's steps)"
        )
        raise EvaluationFailed(msg)
    return Measurement(arms=tuple(results), rounds=measured, warmup_rounds=spec.warmup_rounds, limits=limits,
                       seconds=round(clock() - started, 3), stopped_early=stopped)  # fmt: skip


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
               clock: Callable[[], float], enough: bool) -> bool:  # fmt: skip
    """Run one round of ``arms``; False when the deadline cut it short and ``enough`` rounds are
    behind it: the round is dropped whole (every arm keeps the runs of the rounds before it)."""
    kept = [(r, len(r.runs), len(r.seconds)) for r in arms]
    for result in arms:
        if not _run_once(runner, result, spec, limits, deadline=deadline, clock=clock, may_stop=enough):
            for r, runs, seconds in kept:
                del r.runs[runs:], r.seconds[seconds:]
            return False
    return True


def _run_once(runner: Runner, result: ArmRuns, spec: EvaluationSpec, limits: Limits, *, deadline: float,
              clock: Callable[[], float], may_stop: bool) -> bool:  # fmt: skip
    """One run of one arm; False when the deadline cut it and ``may_stop`` (enough rounds were
    measured before it to stop there)."""
    arm = result.arm
    left = deadline - clock()
    if left <= 0:
        if may_stop:
            return False
        msg = f"{arm.label}: the evaluation ran out of its budget of {spec.budget_seconds} s"
        raise EvaluationFailed(msg)
    began = clock()
    finished = runner.run_bounded(arm.image_id, list(spec.command), env=dict(arm.env), purpose="evaluate",
                                  limits=limits, timeout=left)  # fmt: skip
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
