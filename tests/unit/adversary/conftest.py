"""Fixtures of the adversary's reproductions: the published world of the release wing's tests
(pytorch-cpu-sdk 2.13.0 and training-cpu-pytorch 25.03 served by an in-process registry)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.image.lock import lock_path
from xpu_release.manifest import Repo

from ..helpers import write_manifest
from ..image.test_lock_keeps_pins import first_lock, wheel
from ..release.published_kit import BASE, Calendar, World, sbom, world
from ..release.test_lifecycle_publish import released  # noqa: F401  (a fixture: publish with a fake engine)
from ..release.test_patch import KIT, kit_manifest


@pytest.fixture
def calendar(monkeypatch: pytest.MonkeyPatch) -> Calendar:
    """It is 2026-12-03 for ``watch`` and ``patch`` (the day the reproductions pass as --today):
    their runs are runs of the day, not what-ifs (a --today of another day adds no history)."""
    return Calendar(monkeypatch, "2026-12-03")


@pytest.fixture
def published(tmp_path: Path, calendar: Calendar) -> Iterator[World]:
    with world(tmp_path) as made:
        made.released()
        made.osv.mkdir()
        made.calendar = calendar
        yield made


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calendar: Calendar) -> Iterator[World]:
    """kit 1.0 (alpha 1.0, gamma 1.0, both needing beta) published with its SBOM, as
    tests/unit/release/test_patch.py makes it; the wheelhouse, the only index pip sees, has
    alpha 2.0 and beta 1.1 and 1.2 since."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    house = tmp_path / "wheels"
    house.mkdir()
    for name, version, *needs in [("alpha", "1.0", "beta"), ("beta", "1.0"), ("gamma", "1.0", "beta")]:
        wheel(house, name, version, *needs)
    with world(tmp_path) as w:
        digest = w.serve_base()
        write_manifest(w.root, KIT, "1.0", kit_manifest(house))
        spec = Repo(w.root).load(KIT, "1.0")
        lock_path(w.root, spec).parent.mkdir(parents=True)
        lock_path(w.root, spec).write_text(first_lock(spec, house, f"{BASE}:12@{digest}").render(spec))
        for name, version, *needs in [("alpha", "2.0", "beta"), ("beta", "1.1"), ("beta", "1.2")]:
            wheel(house, name, version, *needs)
        w.publish(KIT, "1.0", sbom(("alpha", "1.0"), ("beta", "1.0"), ("gamma", "1.0")))
        w.osv.mkdir()
        yield w


# promote's fixtures (two channels, a release staged), for the attacks on promote
from ..release.test_promote import channels, staged  # noqa: E402, F401
