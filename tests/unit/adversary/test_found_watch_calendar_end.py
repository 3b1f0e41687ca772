"""Dates at the end of the calendar in ``watch``. An advisory's ``published`` is outside data; the
SLA's due day is ``published + sla_days`` (``sla.Clock.due``), past ``date.max`` for an advisory
that says it was published on 9999-12-31: an OverflowError, exit 70.
docs/reference/exit-codes.md: 70 is only ever a bug of ours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import run
from ..release.published_kit import World, world


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    """Releases published to a registry of their own (as ``release/conftest.py``'s ``published``)."""
    with world(tmp_path) as made:
        made.released()
        made.osv.mkdir()
        yield made


def test_an_advisory_published_at_the_end_of_the_calendar_is_no_internal_error(w: World) -> None:
    w.advisory("CVE-2026-0009", "transformers", "4.50.0", published="9999-12-31T00:00:00Z")

    result = run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv))

    assert "internal error" not in result.stderr, result.stderr  # today: OverflowError
    assert result.exit_code != 70
