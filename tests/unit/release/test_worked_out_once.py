"""A release works out what it knows once and hands it down (issue 42): one SBOM, made in one
throwaway container, is what the gate scans and what publish attaches; one endpoint pool
authenticates once per endpoint and scope. Counted on a whole release with a fake engine and
fake registries (``fake_release``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.image.engine import Engine

from ..helpers import run
from .fake_release import REF, World, world


@pytest.fixture
def released(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A whole release of ``REF``, from `validate` to `record`, gate included."""
    with world(repo, tmp_path) as w:
        monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: w.engine))
        monkeypatch.setenv("XPU_RELEASE_CACHE", str(tmp_path / "cache"))
        login = ("--username", "u", "--password-stdin")
        result = run(repo, "--registries", str(w.override), "release", REF, "--json",
                     "--advisories", str(w.advisories), *login, input="the-password\n")  # fmt: skip
        assert result.exit_code == 0, result.stderr
        w.summary = json.loads(result.stdout)
        yield w


def test_one_sbom_is_made_per_release_for_the_gate_and_publish_both(released: World) -> None:
    assert released.engine.calls["container:sbom"] == 1
    stages = {s["name"]: s["status"] for s in released.summary["stages"]}
    assert stages["scan"] == "done"
    assert stages["publish"] == "done"
