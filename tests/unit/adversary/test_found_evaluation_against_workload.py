"""Found by review (issue 41): docs/using/evaluation.md, "Arms": "An image that carries another
build of the workload ... is reported as not compared, with why" (release/run/evaluate.py
``_same_workload``, by the image's ``io.xpu-release.workload.<name>`` label). ``xpu-release
evaluate REF --against REF`` skips that check: an image carrying another xpu-bench is measured
and compared with this one as if the figures were comparable, and a verdict is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import run
from ..release.test_evaluate import REF
from .evaluation_kit import OTHER, FakeEngine, use_engine


def test_against_an_image_carrying_another_workload_is_not_compared(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_engine(repo, monkeypatch, FakeEngine())
    got = run(repo, "evaluate", REF, "--against", OTHER, "--json")
    assert got.exit_code == 0, got.output
    entry = json.loads(got.stdout)
    plain = next(c for c in entry["comparisons"] if (c["variant"], c["against_ref"]) == ("plain", OTHER))
    assert plain["verdict"] is None, plain  # not judged: their figures are not comparable
    assert "carries another xpu-bench" in (plain["note"] or "")
