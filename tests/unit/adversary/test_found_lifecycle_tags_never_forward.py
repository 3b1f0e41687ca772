"""``withdraw`` "moves the floating tags back" and ``reinstate`` "undoes it" (docs/using/
lifecycle.md); neither may hand ``latest`` to a release whose own publish never gave it
``latest``.

A newer version can be served at its version tag while ``latest`` stays on an older one: its
publish wrote the version tags and then failed verification (the record says incomplete, "no
floating tag was moved"), or it is being published right now (tags last). Then:

- ``withdraw 1.2`` moved ``latest`` *forward* onto 1.3, a release nobody let have it;
- ``reinstate 1.3``, for a release never withdrawn ("not withdrawn", exit 0), moved ``latest``
  and ``1.3-latest`` onto it at every endpoint: a reinstatement with nothing to undo is a way
  around publish's tags-last rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..release.line import Channel, channel, manifests, publish
from .lifecycle_kit import at

OLDER = ["1.0", "1.1", "1.2"]


@pytest.fixture
def unfinished(repo: Path, tmp_path: Path) -> Iterator[tuple[Channel, dict[str, str]]]:
    """demo 1.0 to 1.2 released, ``latest`` on 1.2; demo 1.3 served at its version tag only (its
    publish stopped before the floating tags)."""
    manifests(repo, [*OLDER, "1.3"])
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, OLDER, tmp_path / "spool").digests
        digests |= publish(ch, ["1.3"], tmp_path / "spool", latest=False).digests
        yield ch, digests


def test_withdraw_moves_latest_back_never_forward_onto_a_release_that_never_had_it(
    unfinished: tuple[Channel, dict[str, str]],
) -> None:
    ch, digests = unfinished

    code = at(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start").exit_code

    assert code == 0
    assert set(ch.served("latest").values()) == {digests["1.1"]}  # back, not on to unreleased 1.3


def test_reinstating_a_release_never_withdrawn_moves_no_tag(
    unfinished: tuple[Channel, dict[str, str]],
) -> None:
    ch, digests = unfinished
    before = {tag: ch.served(tag) for tag in ("latest", "1.3-latest")}

    code = at(ch, "reinstate", "demo:1.3").exit_code

    assert code == 0
    assert {tag: ch.served(tag) for tag in ("latest", "1.3-latest")} == before
    assert set(ch.served("latest").values()) == {digests["1.2"]}
