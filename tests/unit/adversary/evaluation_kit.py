"""What the adversary's evaluation tests share: the evaluation run to its entry or its failure,
and the command line against a fake engine (two images of training-cpu-pytorch)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import EvaluationFailed
from xpu_release.image.engine import Engine, ImageInfo
from xpu_release.image.evaluation import Reference
from xpu_release.labels import WORKLOAD_LABEL_PREFIX
from xpu_release.release.run.evaluate import evaluate_image

from ..image.test_experiment import FakeClient
from ..release.test_evaluate import IDS, REF, Fake

ROOT = Path(__file__).resolve().parents[3]
OTHER = "training-cpu-pytorch:25.02"
LABEL = f"{WORKLOAD_LABEL_PREFIX}xpu-bench"
IMAGES = {
    REF: ImageInfo(id="sha256:" + "1" * 64, tags=(REF,), labels={LABEL: "sha256:" + "ab" * 32}, size=1,
                   repo_digests=(), env=()),
    OTHER: ImageInfo(id="sha256:" + "3" * 64, tags=(OTHER,), labels={LABEL: "sha256:" + "ff" * 32}, size=1,
                     repo_digests=(), env=()),
}  # fmt: skip


def entry_or_failure(spec: Any, fake: Fake, refs: tuple[Reference, ...]) -> dict[str, Any] | EvaluationFailed:
    """The record's entry of ``spec``'s evaluation of this image against ``refs``, or how it failed."""
    try:
        got = evaluate_image(spec, fake, IDS["this"], refs, on_line=lambda _: None, runner=fake)
    except EvaluationFailed as exc:
        return exc
    assert got is not None
    return got.entry


class FakeEngine:
    """The two images, by tag and by id; every run prints the same figures (FakeClient)."""

    def __init__(self) -> None:
        self.client = FakeClient(lambda: {"StatusCode": 0})

    def image(self, ref: str) -> ImageInfo | None:
        return next((i for tag, i in IMAGES.items() if ref in (tag, i.id)), None)

    def require_image(self, ref: str) -> ImageInfo:
        found = self.image(ref)
        assert found is not None, ref
        return found


def use_engine(repo: Path, monkeypatch: pytest.MonkeyPatch, engine: FakeEngine) -> None:
    """The command line in ``repo`` (with training-cpu-pytorch's lock) connects to ``engine``."""
    lock = "images/training-cpu-pytorch/25.03/requirements.lock"
    shutil.copy(ROOT / lock, repo / lock)
    monkeypatch.setattr(Engine, "connect", classmethod(lambda cls, *a, **k: engine))
