"""``mirror`` carries a release's life with it: the lifecycle document (its end-of-life date
still in the annotation tools read) and the notices of a withdrawal, through an OCI layout into
another registry, so the mirror says "withdrawn" and "end of life" as the release does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from xpu_release.evidence.attachment import END_OF_LIFE_ANNOTATION, Attachment
from xpu_release.evidence.lifecycle import in_force, lifecycle_statement, make_notice, notices_at
from xpu_release.evidence.referrers import attach, list_referrers
from xpu_release.oci.layout import Layout
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide

from ..fake_registry import State, fake_registry
from ..oci.test_registry_client import REPO, client_for
from .test_mirror import TAG, ends

Two = tuple[tuple[str, State], tuple[str, State]]


@pytest.fixture
def registries() -> Iterator[Two]:
    with fake_registry() as a, fake_registry() as b:
        b[1].referrers_api = True  # one registry with the referrers API, one without
        yield a, b


def test_the_lifecycle_document_and_a_withdrawal_travel_with_the_release(
    registries: Two, tmp_path: Path
) -> None:
    source, image, layout, target = ends(registries, tmp_path)
    (host_a, state_a), _ = registries
    withdrawal = make_notice("withdrawal", ref="image:1.0", subject=image.digest,
                             at="2026-12-05T10:00:00Z", by="urn:ci:7", reason="it crashes")  # fmt: skip
    end = lifecycle_statement("image", "image:1.0", date(2026, 3, 31), image.digest)
    attach(client_for(host_a, state_a), REPO, image, [Attachment(kind="lifecycle", payload=end)],
           created="2026-01-01T00:00:00Z", spool=tmp_path / "spool")  # fmt: skip
    attach(
        client_for(host_a, state_a),
        REPO,
        image,
        [withdrawal.attachment],
        created="",
        spool=tmp_path / "spool",
    )

    out = mirror(source, LayoutSide(layout), TAG, tmp_path / "spool-1")
    back = mirror(LayoutSide(Layout(layout.root)), target, TAG, tmp_path / "spool-2")

    assert out.ok, out.problems
    assert back.ok, back.problems
    assert {"lifecycle", "withdrawal"} <= set(back.kinds)
    listed = list_referrers(target.client, target.repo, image.digest).ours("lifecycle")
    assert [d.annotations[END_OF_LIFE_ANNOTATION] for d in listed] == ["2026-03-31T00:00:00Z"]
    assert [n.reason for n in in_force(notices_at(target.client, target.repo, image.digest))] == [
        "it crashes"
    ]
