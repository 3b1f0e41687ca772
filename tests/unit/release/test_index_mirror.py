"""``mirror`` of a platformed release (issue 43): the index, each platform's image it names with
its blobs and its own referrers (each platform's SBOM and provenance), and the index's own
provenance, copied by digest from a registry into an OCI layout and from the layout into another
registry (the air-gapped way); the tag last. An index naming an image the source does not serve
is refused before anything is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import NotFoundError
from xpu_release.evidence.referrers import list_referrers
from xpu_release.manifest.platforms import AMD64
from xpu_release.oci.layout import Layout
from xpu_release.oci.registry import Manifest
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import image_index
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide, RegistrySide

from ..fake_registry import fake_registry
from ..oci.test_registry_client import client_for
from .platformed import World, world


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[tuple[World, ReleaseRecord]]:
    with world(tmp_path) as made:
        yield made, made.published()


def public(w: World) -> RegistrySide:
    client, repo = w.client("public")
    return RegistrySide(client, repo)


def test_an_index_goes_into_a_layout_and_on_into_another_registry_with_each_platform_and_its_documents(
    kit: tuple[World, ReleaseRecord], tmp_path: Path
) -> None:
    w, record = kit
    layout = LayoutSide(Layout(tmp_path / "usb"))

    into_layout = mirror(public(w), layout, "25.03", tmp_path / "spool")

    assert into_layout.ok, into_layout.problems
    assert into_layout.digest == record.digest
    assert set(into_layout.kinds) == {"sbom", "provenance"}
    with fake_registry() as (host, state):
        target = RegistrySide(client_for(host, state), "air/kit")
        onward = mirror(LayoutSide(Layout(tmp_path / "usb")), target, "25.03", tmp_path / "spool")

        assert onward.ok, onward.problems
        index = target.get_manifest("25.03")
        assert index is not None
        assert index.digest == record.digest
        for p in record.platforms:  # each image, its blobs and its own SBOM and provenance
            image = target.get_manifest(p.digest or "")
            assert image is not None
            assert image.config_digest == p.tested_image_id
            assert all(target.client.blob_exists("air/kit", d) for d, _ in image.blobs())
            found = list_referrers(target.client, "air/kit", image.digest)
            assert {k: found.ours(k)[0].digest for k in ("sbom", "provenance")} == {
                k: p.attachments[k] for k in ("sbom", "provenance")
            }
        on_index = list_referrers(target.client, "air/kit", index.digest)
        assert on_index.ours("provenance")[0].digest == record.attachments["provenance"]


def test_an_index_naming_an_image_the_source_lacks_is_refused_before_any_write(
    kit: tuple[World, ReleaseRecord], tmp_path: Path
) -> None:
    w, record = kit
    source = public(w)
    amd64 = source.get_manifest(record.platforms[0].digest or "")
    assert amd64 is not None
    ghost = Manifest(digest="sha256:" + "0" * 64, media_type=amd64.media_type, body=amd64.body)
    broken = image_index([(AMD64, amd64), (AMD64, ghost)], {})
    source.client.put_manifest(source.repo, "broken", broken)

    with pytest.raises(NotFoundError, match="names sha256:0000"):
        mirror(source, LayoutSide(Layout(tmp_path / "usb")), "broken", tmp_path / "spool")

    assert not (tmp_path / "usb").exists()
