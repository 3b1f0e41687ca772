"""CLI benchmark at scale (a script, not a timed test): every command a release engineer or CI
runs on every push, each in a fresh process, over repositories of 2 to 1,000 manifests.

    python bench/cli.py [--repeat 3]

Shapes, generated in a temporary copy of this repository (nothing is committed):
  repo        this repository as it is (2 manifests)
  20x12       20 families x 12 monthly releases = 240 manifests, `extends` chains of 12
  2x100       2 families x 100 chained releases = 200 manifests, chains of 100
  10x100      10 families x 100 chained releases = 1,000 manifests
Families alternate the CPU and xpu manifests; each release extends the one before and bumps
one pin. Dockerfiles are rendered first (not measured), so `render --all --check` checks them.

Goals: 240 manifests under 1 s for each command; 1,000 under 3 s; a chain of 100 no slower per
manifest than a chain of 12. Prints a table and writes bench/results/cli.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"repo": None, "20x12": (20, 12), "2x100": (2, 100), "10x100": (10, 100)}
GOALS_S = {"20x12": 1.0, "10x100": 3.0}
SOURCES = [("training-cpu-pytorch", "accelerate", "1.5"), ("training-xpu-pytorch", "vllm", "0.7")]


def make_shape(dst: Path, families: int, releases: int) -> Path:
    for name in ("templates", "schema", "images"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("tests", "25.03"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    for f in range(families):
        source, pin, series = SOURCES[f % 2]
        image = f"family-{f:02d}-{source.split('-')[1]}"
        folder = dst / "manifests" / image
        folder.mkdir(parents=True)
        first = (ROOT / "manifests" / source / "25.03.yaml").read_text()
        first = first.replace(f"image: {source}", f"image: {image}").replace(
            'version: "25.03"', 'version: "1.0"'
        )
        (folder / "1.0.yaml").write_text(first)
        for r in range(1, releases):
            (folder / f"1.{r}.yaml").write_text(
                f'image: {image}\nversion: "1.{r}"\nextends: "1.{r - 1 if r > 1 else 0}"\n'
                f'components:\n  {pin}: {{version: "{series}.{100 + r}"}}\nrelease: {{}}\n'
            )
    return dst


def git_init(root: Path) -> None:
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=bench", "-c", "user.email=b@b", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def wall(root: Path, *args: str) -> float:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "xpu_release", "--root", str(root), *args],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        sys.exit(f"xpu-release {' '.join(args)} failed in {root}:\n{proc.stderr[-2000:]}")
    return time.monotonic() - started


def count(root: Path) -> int:
    return sum(1 for _ in (root / "manifests").glob("*/*.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, dict[str, float | int]] = {}
    with tempfile.TemporaryDirectory(prefix="xpu-bench-cli-") as tmp:
        for shape, dims in SHAPES.items():
            if dims is None:
                root = ROOT
                plan_ref = "training-cpu-pytorch:25.03"
            else:
                root = make_shape(Path(tmp) / shape, *dims)
                plan_ref = f"family-00-cpu:1.{dims[1] - 1}"
                wall(root, "render", "--all")  # not measured: writes what --check compares
                git_init(root)
            commands = {
                "validate": ("validate",),
                "render --all --check": ("render", "--all", "--check"),
                "changed --since HEAD": ("changed", "--since", "HEAD"),
                "list": ("list",),
                "plan": ("plan", plan_ref),
            }
            row: dict[str, float | int] = {"manifests": count(root)}
            for name, argv in commands.items():
                row[name] = statistics.median(wall(root, *argv) for _ in range(args.repeat))
            results[shape] = row
    names = ["validate", "render --all --check", "changed --since HEAD", "list", "plan"]
    print(f"{'shape':<8} {'manifests':>9} " + " ".join(f"{n:>21}" for n in names))
    for shape, row in results.items():
        print(f"{shape:<8} {row['manifests']:>9} " + " ".join(f"{row[n]:>20.2f}s" for n in names))
    per_manifest = {
        s: results[s]["render --all --check"] / max(int(results[s]["manifests"]), 1)
        for s in ("20x12", "2x100")
    }
    goals = {
        **{
            f"{s}: every command under {g} s": all(float(results[s][n]) < g for n in names)
            for s, g in GOALS_S.items()
        },
        "chain of 100 no slower per manifest than chains of 12 (render --all --check)": (
            per_manifest["2x100"] <= per_manifest["20x12"] * 1.1
        ),
    }
    for goal, met in goals.items():
        print(f"goal: {goal} → {'met' if met else 'NOT met'}")
    out = ROOT / "bench" / "results" / "cli.json"
    out.write_text(json.dumps({"median_s": results, "per_manifest_render_check_s": per_manifest,
                               "goals_met": goals, "repeat": args.repeat}, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
