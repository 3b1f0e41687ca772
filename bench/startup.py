"""What the record's reader pays at start (a script, not a timed test): ``import jsonschema`` as
every command that reads a release record does it (``status``, ``verify``, ``notes``, ``promote``,
``withdraw``), with rfc3987's IRI grammars deferred (``release/model/iri.py``, what the commands
do) and without (what plain ``import jsonschema`` costs here), each in a fresh process,
interleaved pair by pair.

    python bench/startup.py [--trials 7]

The deferral is a speed trick in product code; it stays only while a user sees the gain: the
goal is at least 0.5 s less per command. Prints a table and writes bench/results/startup.json.
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
ARMS = {
    "deferred (the commands)": (
        "from xpu_release.release.model.iri import defer_iri_grammars\n"
        "defer_iri_grammars()\nimport jsonschema"
    ),
    "plain import jsonschema": "import jsonschema",
}
GOAL_S = 0.5


def once(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.trials):  # interleaved: a busy moment slows both arms of a pair
        for name, code in ARMS.items():
            times[name].append(once(code))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    saved = medians["plain import jsonschema"] - medians["deferred (the commands)"]
    print(f"{'arm':<26} {'median':>8} {'min':>8} {'max':>8}")
    for name, ts in times.items():
        print(f"{name:<26} {medians[name]:>7.2f}s {min(ts):>7.2f}s {max(ts):>7.2f}s")
    verdict = "met" if saved >= GOAL_S else "NOT met"
    print(f"saved per command: {saved:.2f} s (goal: at least {GOAL_S} s) -> {verdict}")
    out = ROOT / "bench" / "results" / "startup.json"
    out.write_text(json.dumps({"trials": args.trials, "seconds": times, "median": medians,
                               "saved_s": round(saved, 3), "goal_s": GOAL_S, "met": saved >= GOAL_S},
                              indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
