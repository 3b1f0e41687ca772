"""CLI start-up benchmark (a script, not a timed test): `validate` and `render --all --check`
over the whole repository, each in a fresh process, as a release engineer runs them.

    python bench/cli.py [--repeat 10]

Goal: both together under 0.5 s wall. Prints a table and writes bench/results/cli.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.5


def wall(*args: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "xpu_release", "--root", str(ROOT), *args], check=True,
                   capture_output=True)  # fmt: skip
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    runs = {"validate": [], "render --all --check": [], "both": []}  # type: dict[str, list[float]]
    for _ in range(args.repeat):
        v = wall("validate")
        r = wall("render", "--all", "--check")
        runs["validate"].append(v)
        runs["render --all --check"].append(r)
        runs["both"].append(v + r)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{'command (fresh process)':<26} {'median':>8} {'max':>8}")
    for k, v in runs.items():
        print(f"{k:<26} {med[k]:>7.3f}s {max(v):>7.3f}s")
    print(f"goal: both ≤ {GOAL_S} s → {'met' if med['both'] <= GOAL_S else 'NOT met'}")
    out = ROOT / "bench" / "results" / "cli.json"
    out.write_text(json.dumps({"median_s": med, "runs_s": runs, "goal_s": GOAL_S,
                               "goal_met": med["both"] <= GOAL_S}, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
