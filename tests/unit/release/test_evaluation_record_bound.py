"""Every evaluation the manifest allows writes a record the record reader takes (16 MiB): at the
manifest's most (8 variants and the plain workload, in this image, its base and the previous
release; 5 warm-up and 50 measured rounds) with a workload that prints the fullest line it may
(16 KiB of figures, the longest names and numbers the guarded reader takes). What a run keeps of
its line is bounded (guard/limits.py ``MAX_WORKLOAD_FIGURES_KEPT``), so the record stays a few
MB whatever the workload prints (under 3 MB at the most)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from xpu_release.guard.limits import MAX_RECORD_BYTES, MAX_WORKLOAD_FIGURES_KEPT, MAX_WORKLOAD_LINE_BYTES
from xpu_release.image.bounded import Finished, Limits
from xpu_release.image.evaluation import Reference, compare, entry
from xpu_release.image.experiment import Arm, measure
from xpu_release.manifest.evaluation import EVALUATION, MAX_ROUNDS, EvaluationSpec
from xpu_release.release.model import record as records

from .test_record import COMPLETE

FIELDS = EVALUATION.inner.fields


def fullest_line(metric: str) -> bytes:
    """The metric and as many figures as fit the line, each named in 64 characters with a number
    of 32 (the longest the guarded reader takes)."""
    figures: dict[str, float] = {metric: 1000.0}
    number = 1.2345678901234567e-300  # its JSON is 23 characters; the bound is on characters
    while len(json.dumps(figures)) < MAX_WORKLOAD_LINE_BYTES - 120:
        figures[f"{len(figures):064d}"] = number
    return json.dumps(figures).encode() + b"\n"


class Runner:
    def __init__(self, line: bytes) -> None:
        self.clock = 0.0
        self.line = line

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        self.clock += 1.0
        return Finished(exit_code=0, stdout=self.line, stderr="")

    def prepare(
        self, image: str, argv: list[str], *, env: dict[str, str], purpose: str, limits: Limits, arm: str = ""
    ) -> None:
        pass  # each run is a process of its own

    def cpu_count(self) -> int:
        return 2

    def now(self) -> float:
        return self.clock


def test_the_largest_evaluation_the_manifest_allows_writes_a_readable_record(tmp_path: Path) -> None:
    most_variants = FIELDS["variants"].max_items
    metric = "m" * 64
    variants = [{"name": f"+V{i}", "env": {f"SWITCH_{i}": "1"}} for i in range(most_variants)]
    ev = EvaluationSpec.from_dict({"command": ["xpu-bench"], "metric": metric, "better": "higher",
                                   "variants": variants, "rounds": MAX_ROUNDS,
                                   "warmup_rounds": FIELDS["warmup_rounds"].maximum,
                                   "budget_seconds": FIELDS["budget_seconds"].maximum})  # fmt: skip
    named = [("plain", ()), *((v.name, v.env) for v in ev.variants)]
    arms = [Arm(image=image, ref=image, image_id=image, variant=name, env=env)
            for image in ("this", "base", "previous") for name, env in named]  # fmt: skip
    runner = Runner(fullest_line(metric))
    measured = measure(runner, arms, ev, Limits(cpuset="0-1", memory_mb=2048), on_line=lambda _: None)
    assert measured.rounds == MAX_ROUNDS
    assert all(len(run) == 1 + MAX_WORKLOAD_FIGURES_KEPT for a in measured.arms for run in a.runs)
    refs = tuple(Reference(role=r, ref=r, image_id=r) for r in ("base", "previous"))
    got = entry(measured, ev, refs, compare(measured, ev, refs), this_ref="t:1", this_id="this")

    path = tmp_path / "25.04.json"
    records.write(replace(COMPLETE, evaluation=got), path)
    assert path.stat().st_size < MAX_RECORD_BYTES / 2  # room to spare, not just under
    back = records.read(path)
    assert back.evaluation is not None
    assert back.evaluation["rounds"] == MAX_ROUNDS
