"""Shared fixtures: a throwaway copy of the repository to break and render in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "seed"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of this repository's manifests, templates, images and registries file."""
    dst = tmp_path / "repo"
    dst.mkdir()
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("tests", "*.lock"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    return dst
