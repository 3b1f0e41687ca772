"""Shared fixtures: a throwaway copy of the repository to break and render in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from xpu_release.settings import Settings, use

# Property-based tests: CI runs `ci` (a fixed seed, a budget under a minute); a deeper search is
# `pytest tests/unit/cli/test_no_internal_error.py --hypothesis-profile=long`.
_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=120, derandomize=True, deadline=None, database=None,
                          suppress_health_check=_SLOW)  # fmt: skip
settings.register_profile("long", max_examples=3000, deadline=None, suppress_health_check=_SLOW)
# The edit loop (`ci/test.sh --fast`): the same properties, each with a quarter of ci's examples
# (a test that sets a number of its own says it through `examples`); the full run (`ci/test.sh`,
# CI) searches with ci's.
settings.register_profile("edit", parent=settings.get_profile("ci"), max_examples=30)
settings.load_profile("ci")


def examples(full: int) -> int:
    """The examples of a test that sets its own number, ``full`` in the full run: scaled as the
    loaded profile scales the default (ci's 120), so the edit loop runs a quarter of them too."""
    return max(10, full * (settings.default.max_examples or 120) // 120)


# Library code called in-process by the tests reads its settings (the engine's DOCKER_HOST, the
# cache folder) as the CLI would have read them from this environment.
use(Settings.from_env(os.environ))

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "data" / "seed"  # the published notes and their facts (its README)


def copy_of_repository(dst: Path) -> Path:
    """This repository's manifests, templates, images (without their checks and locks) and
    registries file, copied to ``dst``."""
    dst.mkdir(parents=True)
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("tests", "*.lock"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    return dst


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of this repository's manifests, templates, images and registries file."""
    return copy_of_repository(tmp_path / "repo")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the modules, the tests) lives as long as the run: kept out of the
    collector's sight, and the collector run less often. A worker of the engine-free tier spent
    up to 5 s of CPU collecting again the same few hundred thousand objects (8.3 s in all four;
    3.6 s so)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
