"""The evaluation on the local stack (issue 41, "done means"); the one place in the suite where it
is measured for real (every other release of the CPU family here passes `NO_EVALUATE`):

- `release training-cpu-pytorch:25.03` runs `evaluate`: its record holds every round's figures
  and the comparisons, and both notes have the seed's table;
- a new version whose manifest makes the workload clearly slower is stopped by the gate (exit
  17) naming the variant, the ratio and its interval, and nothing of it is published;
- the same version with the regression accepted in its manifest (with a reason) publishes, and
  its notes say it was accepted;
- no evaluation container is left behind.

Everything happens in a copy of the session's repository (its records included), published to
the family's namespace. 25.03 is released there again, this time with its evaluation (a rerun:
its build and smoke test are skipped, every endpoint already serves it); the new versions are
written first, so that 25.03 is not the newest version and its release moves no `latest` (the
second month's test expects it where the family put it). The new versions have no floating tag
and keep their stage short (no variants; 7 steps measured after 2 unmeasured, the figure being
the median step's), with 7 rounds: the gate stops only when the whole interval is beyond the
threshold, and with 3 rounds one disturbed round (a loaded CI machine) left a 3x slowdown
undecided ([0.15, 1.34]). With 15 steps after 5 a round took 18 s and the interval of the 4x
slowdown was [0.24, 0.28]: most of the stage went on steps that only narrowed it further.

How much slower: each step made 3x as long by the workload's own busy work
(XPU_BENCH_SLOWDOWN=3, the knob bench/evaluate.py's slowdown cases turn), beside one thread
(OMP_NUM_THREADS=1) and MKL held to SSE4.2 (MKL_ENABLE_INSTRUCTIONS=SSE4_2). Fewer threads alone is
no reliable slowdown on a loaded 2-core machine (2 threads measured slower than 1 at a load of 6
there), and MKL held to SSE4.2, about 3x slower on the Intel machine this was first measured on,
is not on this AMD EPYC: with those two alone, CI measured 0.78x [0.63, 0.95] after 20 rounds,
undecided, and the release went through (2026-12-08). The busy work is slowed by a neighbour's
load as the step is, so the ratio holds whatever the load."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound

from xpu_release.image.engine import Engine

from .conftest import Cli, Family
from .test_publish import served

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch"
INTERVAL = re.compile(r"(\d+\.\d\d)x \[(\d+\.\d\d), (\d+\.\d\d)\]")
SLOWER = (
    "env: {OMP_NUM_THREADS: '1', MKL_ENABLE_INSTRUCTIONS: SSE4_2, XPU_BENCH_SLOWDOWN: '3'}\n"
    "floating_tags: []\n"
    "release: {highlights: [{en: One thread on purpose., zh: 故意只用一个线程。}]}\n"
    "evaluation:\n"
    "  command: [xpu-bench, --steps, '7', --warmup-steps, '2']\n"
    "  against: [previous]\n"
    "  variants: []\n"
    "  rounds: 7\n"
    "  budget_seconds: 900\n"
)
ACCEPTED = "  accepted: [{variant: plain, against: previous, reason: 'one thread, on purpose'}]\n"


@dataclass(frozen=True)
class Evaluated:
    cli: Cli
    regs: Path
    first: Any  # the release of 25.03, with its evaluation
    stopped: Any  # the release of 25.05 (no acceptance)
    accepted: Any  # the release of 25.06 (the same, accepted)


def _new_version(cli: Cli, regs: Path, version: str, text: str) -> None:
    path = cli.root / "manifests" / CPU / f"{version}.yaml"
    path.write_text(f'image: {CPU}\nversion: "{version}"\nextends: "25.03"\n{text}')
    cli.run("render", f"{CPU}:{version}", check=True)
    cli.run("--registries", str(regs), "lock", f"{CPU}:{version}", check=True, timeout=900)


@pytest.fixture(scope="module")
def evaluated(
    family: Family, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Evaluated]:
    root = tmp_path_factory.mktemp("evaluate") / "repo"
    shutil.copytree(family.cli.root, root, symlinks=True)  # with out/releases: 25.03's record
    cli = Cli(root=root, env=family.cli.env)
    regs = family.regs
    try:
        _new_version(cli, regs, "25.05", SLOWER)
        _new_version(cli, regs, "25.06", SLOWER + ACCEPTED)
        first = cli.run("--registries", str(regs), "release", f"{CPU}:25.03", "--json", timeout=1800)
        assert first.returncode == 0, first.stderr[-3000:]
        stopped = cli.run("--registries", str(regs), "release", f"{CPU}:25.05", "--json", timeout=1800)
        accepted = cli.run("--registries", str(regs), "release", f"{CPU}:25.06", "--json", timeout=1800)
        yield Evaluated(cli=cli, regs=regs, first=first, stopped=stopped, accepted=accepted)
    finally:
        for version in ("25.05", "25.06"):  # as built (the build's tag) and as published
            for tag in (f"xpu-release-build/{CPU}:{version}", f"{CPU}:{version}"):
                with contextlib.suppress(ImageNotFound):  # gone already, or never built
                    engine.api.remove_image(tag, force=True)


def test_the_release_of_25_03_ran_the_evaluation_and_kept_every_round(evaluated: Evaluated) -> None:
    stage = next(s for s in json.loads(evaluated.first.stdout)["stages"] if s["name"] == "evaluate")
    # Measured by this release; or, on a stack whose cache kept an earlier suite's measurement of
    # these very images (reproducible builds give the same ids), taken from it as a rerun does.
    assert stage["status"] == "done" or "measured before" in stage["detail"], stage
    evaluation = json.loads(evaluated.first.stdout)["record"]["evaluation"]
    assert evaluation["status"] == "passed", evaluation
    this = [a for a in evaluation["arms"] if a["image"] == "this"]
    plain = next(a for a in this if a["variant"] == "plain")
    assert len(plain["figures"]) == evaluation["rounds"] >= 3
    assert len(plain["warmup"]) == evaluation["warmup_rounds"]
    assert all(f > 0 for f in plain["figures"])
    assert {a["variant"] for a in this} == {"plain", "+Accelerate", "+CompilerOpt", "+CompilerOpt+CkptOpt"}
    # The seed's headline row, measured: torch.compile compiles with the SDK base's g++. The
    # manifest compares the compiled variants with the previous release only (the base runs the
    # same PyTorch and compiler): no compiled arm of the base, their contribution measured here.
    for variant in ("+CompilerOpt", "+CompilerOpt+CkptOpt"):
        compiled = next(a for a in this if a["variant"] == variant)
        assert compiled["unsupported"] is None, compiled
        assert len(compiled["figures"]) == evaluation["rounds"]
        assert all(f > 0 for f in compiled["figures"])
        pairs = {c["against"]: c for c in evaluation["comparisons"] if c["variant"] == variant}
        assert set(pairs) == {"plain"}, pairs  # 25.03 extends no release
        assert pairs["plain"]["low"] <= pairs["plain"]["ratio"] <= pairs["plain"]["high"], pairs
    assert {a["variant"] for a in evaluation["arms"] if a["image"] == "base"} == {"plain", "+Accelerate"}
    # A variant an image cannot run is said, not dropped: the SDK has no accelerate.
    sdk_accelerate = next(
        a for a in evaluation["arms"] if (a["image"], a["variant"]) == ("base", "+Accelerate")
    )
    assert "accelerate library" in sdk_accelerate["unsupported"]
    assert evaluation["method"]["runs"] == "one container an arm, asked each round"
    against_base = next(
        c for c in evaluation["comparisons"] if (c["variant"], c["against"]) == ("plain", "base")
    )
    assert against_base["against_ref"] == "pytorch-cpu-sdk:2.13.0"
    assert against_base["low"] <= against_base["ratio"] <= against_base["high"]
    assert against_base["verdict"] != "regression"


def test_both_notes_of_25_03_have_the_seeds_evaluation_table(evaluated: Evaluated) -> None:
    folder = evaluated.cli.root / "out" / "releases" / CPU
    zh = (folder / "25.03.zh.md").read_text()
    en = (folder / "25.03.en.md").read_text()
    assert "## E2E性能收益评估" in zh
    assert "### 镜像对比基础镜像&迭代评估" in zh
    assert "对比pytorch-cpu-sdk:2.13.0" in zh
    assert "## End-to-end performance evaluation" in en
    row = next(x for x in en.splitlines() if x.startswith("| plain (no optimisation) |"))
    assert INTERVAL.search(row), row
    # The seed's compiled row: not compared with the SDK (the manifest says so), its gain measured.
    compiled = [x for x in en.splitlines() if x.startswith("| +CompilerOpt |")]
    assert len(compiled) == 2, compiled  # a row in each table
    assert "not compared" in compiled[0]
    assert INTERVAL.search(compiled[1]), compiled
    # The notes are rendered from the record: rendering them again gives the same text.
    again = evaluated.cli.run("--registries", str(evaluated.regs), "notes", f"{CPU}:25.03", "--lang", "en",
                              "--record", str(folder / "25.03.json"), check=True).stdout  # fmt: skip
    assert again == en


def test_a_clearly_slower_version_is_stopped_naming_the_variant_ratio_and_interval(
    evaluated: Evaluated,
) -> None:
    result = evaluated.stopped
    assert result.returncode == 17, result.stderr[-3000:]
    line = next(x for x in result.stderr.splitlines() if "plain against training-cpu-pytorch:25.03" in x)
    ratio, low, high = map(float, INTERVAL.search(line).groups())  # type: ignore[union-attr]
    assert low <= ratio <= high < 0.9
    summary = json.loads(result.stdout)
    assert summary["failed"]["stage"] == "evaluate"
    assert summary["failed"]["exit_code"] == 17
    assert "publish" not in [s["name"] for s in summary["stages"]]
    assert set(served(evaluated.cli, evaluated.regs, "25.05", CPU).values()) == {None}  # nothing published
    assert not (evaluated.cli.root / "out" / "releases" / CPU / "25.05.json").exists()


def test_the_same_version_with_the_regression_accepted_publishes_and_says_so(evaluated: Evaluated) -> None:
    result = evaluated.accepted
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout)["record"]
    accepted = [c for c in record["evaluation"]["comparisons"] if c["accepted"]]
    assert [(c["variant"], c["against"]) for c in accepted] == [("plain", "previous")]
    assert accepted[0]["verdict"] == "regression"
    folder = evaluated.cli.root / "out" / "releases" / CPU
    assert (
        "accepted regression: plain against training-cpu-pytorch:25.03: one thread, on purpose"
        in (folder / "25.06.en.md").read_text()
    )
    assert "已接受的性能回退" in (folder / "25.06.zh.md").read_text()
    assert set(served(evaluated.cli, evaluated.regs, "25.06", CPU).values()) == {record["digest"]}


def test_the_rerun_of_25_03_released_the_same_image_and_moved_no_latest(
    evaluated: Evaluated, family: Family
) -> None:
    record = json.loads(evaluated.first.stdout)["record"]
    assert record["digest"] == family.record["digest"]
    assert not [ref for ref in record["floating_moved"] if ref.endswith(":latest")], record["floating_moved"]


def test_no_evaluation_container_is_left_behind(evaluated: Evaluated, engine: Engine) -> None:
    assert engine.containers("evaluate") == []
