"""Found by review (issue 41): the record keeps every run's whole line of figures (``runs``: every
number the workload printed), and the record is read back bounded (16 MiB). A workload that
prints a full line of figures (many numbers, within its 16 KiB limit: a per-step or per-layer
breakdown) in an evaluation the manifest allows (the shipped training manifest's variants with
``rounds: 50``) writes a record of about 18.6 MB after publishing: every later read of it
(``notes``, ``diff``, the next release's ``previous``) refuses it as damaged (exit 12), and
"publish again to rewrite it" writes the same. The record an evaluation writes must stay one the
record reader takes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from xpu_release.guard.limits import MAX_WORKLOAD_LINE_BYTES
from xpu_release.image.bounded import Finished, Limits
from xpu_release.image.evaluation import Reference, compare, entry
from xpu_release.image.experiment import Arm, measure
from xpu_release.manifest.evaluation import EvaluationSpec
from xpu_release.release.model import record as records

from ..release.test_record import COMPLETE


def a_full_line() -> bytes:
    """One line of figures just within the workload's line limit: the metric and many numbers."""
    figures: dict[str, float] = {"tokens_per_second": 1000.0}
    while len(json.dumps(figures)) < MAX_WORKLOAD_LINE_BYTES - 40:
        figures[f"s{len(figures)}"] = 0.25  # step n's seconds
    return json.dumps(figures).encode() + b"\n"


class Runner:
    def __init__(self) -> None:
        self.clock = 0.0
        self.line = a_full_line()

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


def test_the_record_of_an_evaluation_the_manifest_allows_reads_back(tmp_path: Path) -> None:
    variants = [{"name": n, "env": {"XPU_BENCH_VARIANT": n[1:]}} for n in ("+A", "+C", "+C+K")]
    ev = EvaluationSpec.from_dict({"command": ["xpu-bench"], "metric": "tokens_per_second",
                                   "better": "higher", "variants": variants, "rounds": 50,
                                   "budget_seconds": 7200})  # fmt: skip
    plain_and_variants = [("plain", ()), *((v.name, v.env) for v in ev.variants)]
    arms = [Arm(image=image, ref=image, image_id=image, variant=name, env=env)
            for image in ("this", "base", "previous") for name, env in plain_and_variants]  # fmt: skip
    runner = Runner()
    measured = measure(runner, arms, ev, Limits(cpuset="0-1", memory_mb=2048), on_line=lambda _: None)
    assert measured.rounds == 50
    refs = tuple(Reference(role=r, ref=r, image_id=r) for r in ("base", "previous"))
    got = entry(measured, ev, refs, compare(measured, ev, refs), this_ref="t:1", this_id="this")

    path = tmp_path / "25.04.json"
    records.write(replace(COMPLETE, evaluation=got), path)
    back = records.read(path)  # not "damaged": the release's own record
    assert back.evaluation is not None
    assert back.evaluation["status"] == "passed"
