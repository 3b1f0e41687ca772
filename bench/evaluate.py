"""Benchmark of the evaluation's method itself (a script, not a timed test): does it keep quiet
when nothing changed, and does it find a real slowdown?

    python bench/evaluate.py --mode synthetic                      # no engine, no PyTorch: seconds
    python bench/evaluate.py --mode local --python /path/to/python  # the workload as local processes
    python bench/evaluate.py --mode engine [--image training-cpu-pytorch:25.03] [--trials 20]
    python bench/evaluate.py --mode sequential [--trials 1000]      # the sequential rule, simulated

Each case repeated ``--trials`` times with the very method the ``evaluate`` stage uses
(interleaved rounds, warm-up discarded, the median of the rounds' ratios, seeded paired bootstrap,
threshold 10 %; in ``engine`` mode the stage's sequential rule too, look after look up to 20
rounds, and its served arms: each trial starts its own):

- **A/A**: the image against itself. Goal: no difference reported (neither a regression nor an
  improvement) in at least 95 % of the trials.
- **a known slowdown**: the same image with each step made 1.25x as long
  (``XPU_BENCH_SLOWDOWN=1.25``; goal: found in at least 95 %), and with half the threads
  (``XPU_BENCH_THREADS=1`` against the two CPUs of the CPU set; goal: found in every trial); in
  ``synthetic`` mode exactly 1.5x slower. ``--label quiet`` or ``busy`` names the conditions
  (bench/results/evaluate-engine-<label>.json).

``sequential`` simulates the stage's sequential rule (looks at 5, 7, 10, 14 and 20 rounds, each
at the confidence that splits 5 % over them) over ``--trials`` synthetic trials per case, at the
noise measured here (per run, a shared load factor per round, and now and then a round in which
one arm was starved by the machine's other work): the false-alarm rate (a regression called in
A/A; goal at most 5 %), A/A decided as no difference, a 1.25x and a 2x slowdown found, and the
rounds used.

Modes: ``synthetic`` draws figures from a shared machine's noise (a per-round load factor both
arms share, and each run's own noise, at three levels); ``local`` runs xpu-bench
(``image/workloads/xpu_bench.py``) as local processes pinned to the CPU set with ``taskset``, with
a Python that has PyTorch; ``engine`` runs it in throwaway containers of ``--image`` through the
Docker engine (the stack's), exactly as the stage does. Prints a table and writes
bench/results/evaluate-<mode>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from xpu_release.guard.writing import write_bytes  # noqa: E402
from xpu_release.image.bootstrap import Judgement, Verdict, judge, looks, per_look  # noqa: E402
from xpu_release.image.bounded import Finished, Limits  # noqa: E402
from xpu_release.image.evaluation import confidence_of  # noqa: E402
from xpu_release.image.experiment import Arm, Measurement, Runner, measure  # noqa: E402
from xpu_release.manifest.evaluation import EvaluationSpec  # noqa: E402

THRESHOLD = 0.10
GOAL_AA = 0.95  # share of A/A trials that report no difference
LIMITS = Limits(cpuset="0-1", memory_mb=2048)


@dataclass(frozen=True)
class Case:
    name: str
    slow_env: tuple[tuple[str, str], ...]  # the B arm's environment (() for A/A)
    factor: float  # the B arm's true slowdown (synthetic mode)
    found: float = 1.0  # the share of trials in which a slowdown must be found (its goal)


def verdicts_synthetic(trials: int, rounds: int, noise: float, factor: float, seed: int) -> list[Verdict]:
    rng = random.Random(seed)
    out = []
    for _ in range(trials):
        a, b = [], []
        for _ in range(rounds):
            load = rng.lognormvariate(0, 0.3)  # the machine's load in this round, both arms alike
            a.append(1000 / load * rng.lognormvariate(0, noise))
            b.append(1000 / factor / load * rng.lognormvariate(0, noise))
        out.append(judge(b, a, better="higher", threshold=THRESHOLD).verdict)
    return out


SEQUENTIAL_NOISE = (0.05, 0.15)  # per run: this machine quiet, and with the engine-free tier beside it
STARVED = 0.05  # the share of rounds in which one arm is starved (its figure halved)


def trial_sequential(rng: random.Random, noise: float, factor: float) -> tuple[Verdict, int]:
    """One sequential evaluation of an arm ``factor`` times slower than its reference: the
    verdict at the first look that decides (or the last), and the rounds it took."""
    planned = looks(5, 20)
    confidence = per_look(len(planned))
    a: list[float] = []
    b: list[float] = []
    verdict = Verdict.UNDECIDED
    for n in planned:
        while len(a) < n:
            load = rng.lognormvariate(0, 0.3)  # the machine's load in this round, both arms alike
            starve_a, starve_b = (rng.random() < STARVED / 2 for _ in range(2))
            a.append(1000 / load * rng.lognormvariate(0, noise) * (0.5 if starve_a else 1.0))
            b.append(1000 / factor / load * rng.lognormvariate(0, noise) * (0.5 if starve_b else 1.0))
        verdict = judge(b, a, better="higher", threshold=THRESHOLD, confidence=confidence).verdict
        if verdict.decided:
            return verdict, n
    return verdict, planned[-1]


def sequential_rows(trials: int) -> list[dict[str, Any]]:
    rows = []
    for noise in SEQUENTIAL_NOISE:
        for name, factor in (("A/A", 1.0), ("1.25x slower", 1.25), ("2x slower (half the threads)", 2.0)):
            rng = random.Random(int(noise * 1000) + int(factor * 100))
            got = [trial_sequential(rng, noise, factor) for _ in range(trials)]
            verdicts = [v for v, _ in got]
            rounds = sorted(n for _, n in got)
            alarms = sum(v == Verdict.REGRESSION for v in verdicts) if factor == 1.0 else None
            found = sum(v == Verdict.REGRESSION for v in verdicts)
            quiet = sum(v in (Verdict.WITHIN, Verdict.NO_REGRESSION) for v in verdicts)
            if factor == 1.0:
                goal, met = "false alarms at most 5 %", (alarms or 0) / trials <= 0.05
            else:
                goal, met = "found in at least 95 %", found / trials >= 0.95
            rows.append({"case": f"{name}, {noise:.0%} noise", "noise": noise, "factor": factor,
                         "trials": trials, "no_difference": quiet, "regression": found,
                         "false_alarms": alarms, "undecided": sum(v == Verdict.UNDECIDED for v in verdicts),
                         "median_rounds": rounds[len(rounds) // 2],
                         "mean_rounds": round(sum(rounds) / trials, 1),
                         "goal": goal, "met": met})  # fmt: skip
    return rows


class LocalRunner:
    """xpu-bench as local processes, pinned to the CPU set with taskset when there is one."""

    def __init__(self, python: str) -> None:
        self.python = python
        self.taskset = shutil.which("taskset")

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        script = ROOT / "src" / "xpu_release" / "image" / "workloads" / "xpu_bench.py"
        cmd = [self.python, str(script), *argv[1:]]
        if self.taskset:
            cmd = [self.taskset, "-c", limits.cpuset, *cmd]
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_BENCH_", "OMP_"))}
        try:
            done = subprocess.run(
                cmd, capture_output=True, timeout=timeout, env={**clean, **env}, check=False
            )
        except subprocess.TimeoutExpired:
            return Finished(exit_code=None, stdout=b"", stderr="")
        return Finished(
            exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr.decode(errors="replace")
        )

    def prepare(
        self, image: str, argv: list[str], *, env: dict[str, str], purpose: str, limits: Limits, arm: str = ""
    ) -> None:
        pass  # each run is a process of its own

    def cpu_count(self) -> int:
        return os.cpu_count() or 1

    def now(self) -> float:
        return time.monotonic()


def verdicts_measured(
    runs: Callable[[], AbstractContextManager[Runner]],
    image: str,
    case: Case,
    trials: int,
    spec: EvaluationSpec,
) -> list[dict[str, Any]]:
    """Each trial an evaluation of its own: its arms started anew (served arms too)."""
    out = []
    for i in range(trials):
        # The arm under test is "this" (B), the reference "base" (A): B's env is the slowdown.
        arms = [Arm(image="this", ref=image, image_id=image, variant="plain", env=case.slow_env),
                Arm(image="base", ref=image, image_id=image, variant="plain")]  # fmt: skip
        started = time.monotonic()

        def judged(so_far: Measurement) -> Judgement:
            # The stage's sequential rule: each look at the confidence that splits 5 % over them.
            b, a = (so_far.of(r, "plain") for r in ("this", "base"))
            assert a is not None
            assert b is not None
            warm = so_far.warmup_rounds
            return judge(b.figures(spec.metric, warm), a.figures(spec.metric, warm), better="higher",
                         threshold=THRESHOLD, confidence=confidence_of(spec))  # fmt: skip

        with runs() as runner:
            got = measure(runner, arms, spec, LIMITS, on_line=lambda _: None,
                          decided=lambda so_far: judged(so_far).verdict.decided)  # fmt: skip
        b, a = (got.of(r, "plain") for r in ("this", "base"))
        assert a is not None
        assert b is not None
        j = judged(got)
        figures = {
            "a": a.figures(spec.metric, got.warmup_rounds),
            "b": b.figures(spec.metric, got.warmup_rounds),
        }
        took = round(time.monotonic() - started, 1)
        out.append({"trial": i, "verdict": str(j.verdict), "ratio": round(j.ratio, 4), "low": round(j.low, 4),
                    "high": round(j.high, 4), "rounds": got.rounds, "seconds": took, **figures})  # fmt: skip
        print(f"  {case.name} trial {i + 1}/{trials}: {j.ratio:.2f}x [{j.low:.2f}, {j.high:.2f}] {j.verdict}",
              file=sys.stderr)  # fmt: skip
    return out


def summary(name: str, verdicts: list[str], slowdown: bool, share: float = 1.0) -> dict[str, Any]:
    n = len(verdicts)
    differs = sum(v in ("regression", "improvement") for v in verdicts)
    found = sum(v == "regression" for v in verdicts)
    undecided = sum(v == "undecided" for v in verdicts)
    if slowdown and share >= 1.0:
        goal, met = "a regression in every trial", found == n
    elif slowdown:
        goal, met = f"a regression in at least {share:.0%}", found / n >= share
    else:
        goal, met = f"no difference in at least {GOAL_AA:.0%}", (n - differs) / n >= GOAL_AA
    return {"case": name, "trials": n, "no_difference": n - differs, "regression": found,
            "undecided": undecided, "goal": goal, "met": met}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=("synthetic", "sequential", "local", "engine"), default="synthetic")
    parser.add_argument("--trials", type=int, default=0,
                        help="default: 200 synthetic, 1000 sequential, 8 local, 20 engine")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15, help="xpu-bench --steps (local, engine)")
    parser.add_argument("--python", default=sys.executable, help="a Python with PyTorch (local mode)")
    parser.add_argument("--image", default="training-cpu-pytorch:25.03", help="the image (engine mode)")
    parser.add_argument(
        "--label", default="", help="a name for the run's conditions (quiet, busy): the JSON's suffix"
    )
    args = parser.parse_args()
    trials = args.trials or {"synthetic": 200, "sequential": 1000, "local": 8, "engine": 20}[args.mode]
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    label = f"-{args.label}" if args.label else ""
    out = ROOT / "bench" / "results" / f"evaluate-{args.mode}{label}.json"

    def keep() -> None:
        """The figures so far (after each case: a run stopped half-way keeps what it measured)."""
        result = {"mode": args.mode, "label": args.label, "rounds": args.rounds, "trials": trials,
                  "threshold": THRESHOLD, "when": time.strftime("%Y-%m-%d"), "rows": rows,
                  "trials_detail": details}  # fmt: skip
        write_bytes(out, (json.dumps(result, indent=2) + "\n").encode(), what="the benchmark's figures")

    if args.mode == "sequential":
        rows = sequential_rows(trials)
        planned = looks(5, 20)
        print(
            f"\nThe sequential rule, simulated: looks at {', '.join(map(str, planned))} rounds, "
            f"each at {per_look(len(planned)):.1%}; threshold {THRESHOLD:.0%}; {trials} trials a case"
        )
        print(f"{'case':<40} {'no diff':>8} {'regr.':>6} {'undec.':>7} {'rounds':>7}  goal")
        for r in rows:
            print(f"{r['case']:<40} {r['no_difference']:>8} {r['regression']:>6} {r['undecided']:>7} "
                  f"{r['mean_rounds']:>7}  {r['goal']}: {'met' if r['met'] else 'NOT MET'}")  # fmt: skip
    elif args.mode == "synthetic":
        for noise in (0.05, 0.10, 0.20):
            for name, factor in (("A/A", 1.0), ("1.5x slower", 1.5)):
                got = [
                    str(v)
                    for v in verdicts_synthetic(trials, args.rounds, noise, factor, seed=int(noise * 100))
                ]
                rows.append(
                    {**summary(f"{name}, {noise:.0%} noise per run", got, factor > 1), "noise": noise}
                )
    else:
        command = ["xpu-bench", "--steps", str(args.steps)]
        declared = {"carry": "xpu-bench", "command": command, "metric": "tokens_per_second",
                    "better": "higher", "rounds": args.rounds, "budget_seconds": 3600}  # fmt: skip
        spec = EvaluationSpec.from_dict(declared)
        runs: Callable[[], AbstractContextManager[Runner]]
        if args.mode == "local":
            local = LocalRunner(args.python)
            runs, image = (lambda: nullcontext(local)), "xpu-bench (local process)"
        else:
            from xpu_release.image.engine import Engine
            from xpu_release.release.run.evaluate import runner_for

            engine = Engine.connect()
            # As a release runs it: the carried workload served, one container an arm.
            runs, image = (lambda: runner_for(engine.client, spec)), engine.require_image(args.image).id
        cases = (
            Case("A/A", (), 1.0),
            Case("1.25x slower (XPU_BENCH_SLOWDOWN)", (("XPU_BENCH_SLOWDOWN", "1.25"),), 1.25, found=0.95),
            Case("half the threads (1 of 2)", (("XPU_BENCH_THREADS", "1"),), 0),
        )
        for case in cases:
            trial_rows = verdicts_measured(runs, image, case, trials, spec)
            details[case.name] = trial_rows
            rows.append(
                summary(case.name, [g["verdict"] for g in trial_rows], bool(case.slow_env), case.found)
            )
            ratios = sorted(g["ratio"] for g in trial_rows)
            rounds = sorted(g["rounds"] for g in trial_rows)
            seconds = sorted(g["seconds"] for g in trial_rows)
            rows[-1].update(median_ratio=ratios[len(ratios) // 2], median_rounds=rounds[len(rounds) // 2],
                            median_seconds=seconds[len(seconds) // 2])  # fmt: skip
            keep()
    if args.mode != "sequential":
        print(f"\nThe evaluation's method, {args.mode} mode: {args.rounds} rounds (+1 warm-up), threshold "
              f"{THRESHOLD:.0%}, {trials} trials per case")  # fmt: skip
        print(f"{'case':<34} {'no difference':>14} {'regression':>11} {'undecided':>10}  goal")
        for r in rows:
            print(f"{r['case']:<34} {r['no_difference']:>14} {r['regression']:>11} {r['undecided']:>10}  "
                  f"{r['goal']}: {'met' if r['met'] else 'NOT MET'}")  # fmt: skip
    keep()
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
