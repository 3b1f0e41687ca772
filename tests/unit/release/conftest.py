"""Fixtures of the release wing's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .published_kit import World, world


@pytest.fixture
def published(tmp_path: Path) -> Iterator[World]:
    """pytorch-cpu-sdk 2.13.0 and training-cpu-pytorch 25.03 published (a registry of their
    own), an empty advisories folder."""
    with world(tmp_path) as made:
        made.released()
        made.osv.mkdir()
        yield made
