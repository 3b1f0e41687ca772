"""Found by review (issue 41): figures a workload may print, each a finite positive number the
guarded reader accepts, that make the comparison itself non-finite. The ratio of medians, its
interval and the record's entry must stay finite numbers (the record is strict JSON, read back
through the guarded layer that refuses NaN and Infinity), or the evaluation must fail as the
workload's fault (exit 18): never a crash of ours (exit 70), never a regression said "within"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xpu_release.errors import EvaluationFailed
from xpu_release.image.bootstrap import Verdict, judge
from xpu_release.image.bounded import Finished, Limits
from xpu_release.manifest import Repo

from ..release.test_evaluate import IDS, REF, Fake, refs
from .evaluation_kit import entry_or_failure


class Figures(Fake):
    """This image and its base print ``figure[image id]`` as the metric, every run alike."""

    def __init__(self, figure: dict[str, float]) -> None:
        super().__init__(speed=figure)

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        line = json.dumps({"tokens_per_second": self.speed[image], "step_seconds": self.speed[image]})
        return Finished(exit_code=0, stdout=line.encode() + b"\n", stderr="")


def test_an_even_number_of_huge_figures_still_finds_a_regression() -> None:
    # Both figures are finite (the guarded reader takes them); this image is 0.59x its reference.
    # The median of an even count averages the middle two, which overflows to inf here: inf / inf
    # is NaN, and every comparison with NaN is false, so the verdict fell through to "within".
    got = judge([1.0e308] * 4, [1.7e308] * 4, better="higher", threshold=0.1)
    assert math.isfinite(got.ratio)
    assert got.ratio == pytest.approx(1.0 / 1.7)
    assert got.verdict == Verdict.REGRESSION


@pytest.mark.parametrize(
    ("better", "this", "base"),
    [("lower", 1e-200, 1e200), ("higher", 1e200, 1e-200)],
    ids=["ratio-underflows-to-zero", "ratio-overflows-to-infinity"],
)
def test_figures_whose_ratio_is_not_finite_never_crash_nor_reach_the_record(
    repo: Path, better: str, this: float, base: float
) -> None:
    text = (repo / "manifests/training-cpu-pytorch/25.03.yaml").read_text(encoding="utf-8")
    metric = "step_seconds" if better == "lower" else "tokens_per_second"
    text = text.replace("metric: tokens_per_second", f"metric: {metric}").replace(
        "better: higher", f"better: {better}"
    )
    (repo / "manifests/training-cpu-pytorch/25.03.yaml").write_text(text, encoding="utf-8")
    spec = Repo(repo).load_ref(REF)
    fake = Figures({IDS["this"]: this, IDS["base"]: base})
    got = entry_or_failure(spec, fake, refs("base"))
    if isinstance(got, EvaluationFailed):  # the workload's fault, said as such (exit 18): fine
        assert got.exit_code == 18
        return
    # Otherwise the entry is what the record and `evaluate --json` write: strict JSON, finite.
    json.dumps(got, allow_nan=False)
