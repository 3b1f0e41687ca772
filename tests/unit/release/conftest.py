"""Fixtures of the release wing's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xpu_release.release.watching import readahead
from xpu_release.release.watching.readahead import ReadAhead

from .published_kit import Calendar, World, world


@pytest.fixture
def published(tmp_path: Path) -> Iterator[World]:
    """pytorch-cpu-sdk 2.13.0 and training-cpu-pytorch 25.03 published (a registry of their
    own), an empty advisories folder."""
    with world(tmp_path) as made:
        made.released()
        made.osv.mkdir()
        yield made


@pytest.fixture
def calendar(monkeypatch: pytest.MonkeyPatch) -> Calendar:
    """It is 2026-12-03 (noon UTC) for ``watch`` and ``patch``: the day the tests count SLAs to."""
    return Calendar(monkeypatch, "2026-12-03")


@pytest.fixture
def read_aheads(monkeypatch: pytest.MonkeyPatch) -> list[ReadAhead]:
    """Every read-ahead ``watch`` makes during the test (one a run, none with ``--jobs 0``)."""
    made: list[ReadAhead] = []
    original = readahead.ReadAhead.__init__

    def recording(self: ReadAhead, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(readahead.ReadAhead, "__init__", recording)
    return made
