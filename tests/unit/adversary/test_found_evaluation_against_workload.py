"""Found by review (issue 41): docs/using/evaluation.md, "Arms": "An image that carries another
build of the workload ... is reported as not compared, with why" (release/evaluate.py
``_same_workload``, by the image's ``io.xpu-release.workload.<name>`` label). ``xpu-release
evaluate REF --against REF`` skips that check: an image carrying another xpu-bench is measured
and compared with this one as if the figures were comparable, and a verdict is given."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from xpu_release.image.engine import Engine, ImageInfo
from xpu_release.labels import WORKLOAD_LABEL_PREFIX

from ..helpers import run
from ..image.test_experiment import FakeClient
from ..release.test_evaluate import REF

ROOT = Path(__file__).resolve().parents[3]
OTHER = "training-cpu-pytorch:25.02"
LABEL = f"{WORKLOAD_LABEL_PREFIX}xpu-bench"
IMAGES = {
    REF: ImageInfo(id="sha256:" + "1" * 64, tags=(REF,), labels={LABEL: "sha256:" + "ab" * 32}, size=1,
                   repo_digests=(), env=()),
    OTHER: ImageInfo(id="sha256:" + "3" * 64, tags=(OTHER,), labels={LABEL: "sha256:" + "ff" * 32}, size=1,
                     repo_digests=(), env=()),
}  # fmt: skip


class FakeEngine:
    """Two images, by tag and by id; every run prints the same figures (FakeClient)."""

    def __init__(self) -> None:
        self.client = FakeClient(lambda: {"StatusCode": 0})

    def image(self, ref: str) -> ImageInfo | None:
        return next((i for tag, i in IMAGES.items() if ref in (tag, i.id)), None)

    def require_image(self, ref: str) -> ImageInfo:
        found = self.image(ref)
        assert found is not None, ref
        return found


def test_against_an_image_carrying_another_workload_is_not_compared(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = "images/training-cpu-pytorch/25.03/requirements.lock"
    shutil.copy(ROOT / lock, repo / lock)
    engine = FakeEngine()
    monkeypatch.setattr(Engine, "connect", classmethod(lambda cls, *a, **k: engine))
    got = run(repo, "evaluate", REF, "--against", OTHER, "--json")
    assert got.exit_code == 0, got.output
    entry = json.loads(got.stdout)
    plain = next(c for c in entry["comparisons"] if (c["variant"], c["against_ref"]) == ("plain", OTHER))
    assert plain["verdict"] is None, plain  # not judged: their figures are not comparable
    assert "carries another xpu-bench" in (plain["note"] or "")
