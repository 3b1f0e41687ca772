"""What a mirror copies besides the image's own blobs (docs/using/mirrors.md): a referrer that is
an image index (an attachment of several manifests, as OCI 1.1 lets other tools push) travels
with every manifest it lists and their blobs; a referrer the registry lists for another
subject is not ours to copy; a blob that is not sha256 is named before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import NotFoundError, WireError
from xpu_release.evidence.referrers import findable, list_referrers
from xpu_release.oci.layout import Layout
from xpu_release.oci.registry import OCI_INDEX, OCI_MANIFEST, Manifest, sha256_digest
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide, RegistrySide

from ..fake_registry import State, fake_registry
from ..oci.test_registry_client import REPO, client_for
from .test_mirror import TAG, ends, published

Two = tuple[tuple[str, State], tuple[str, State]]
EMPTY_CONFIG = b"{}"


@pytest.fixture
def two() -> Iterator[Two]:
    with fake_registry() as a, fake_registry() as b:
        b[1].referrers_api = True  # the source keeps the referrers tag schema; the target has the API
        yield a, b


def _manifest(data: dict[str, object]) -> Manifest:
    body = json.dumps(data).encode()
    return Manifest(digest=sha256_digest(body), media_type=str(data["mediaType"]), body=body)


def _part(source: RegistrySide, tmp_path: Path, payload: bytes) -> Manifest:
    """An artifact manifest carrying ``payload`` as its one layer, pushed by digest (no subject)."""
    for data in (EMPTY_CONFIG, payload):
        path = tmp_path / sha256_digest(data)[7:]
        path.write_bytes(data)
        source.client.upload_blob(REPO, sha256_digest(data), path)
    part = _manifest({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x.part",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha256_digest(EMPTY_CONFIG),
                   "size": len(EMPTY_CONFIG)},
        "layers": [{"mediaType": "application/octet-stream", "digest": sha256_digest(payload),
                    "size": len(payload)}],
    })  # fmt: skip
    source.client.put_manifest(REPO, part.digest, part)
    return part


def _attach_index(source: RegistrySide, image: Manifest, members: list[Manifest]) -> Manifest:
    """An image index listing ``members``, attached to ``image`` (its ``subject``)."""
    index = _manifest({
        "schemaVersion": 2, "mediaType": OCI_INDEX, "artifactType": "application/x.bundle",
        "manifests": [{"mediaType": m.media_type, "digest": m.digest, "size": len(m.body)} for m in members],
        "subject": {"mediaType": OCI_MANIFEST, "digest": image.digest, "size": len(image.body)},
    })  # fmt: skip
    source.client.put_manifest(REPO, index.digest, index)
    findable(source.client, REPO, image, [index])
    return index


def test_an_attached_index_travels_with_what_it_lists_into_a_layout_and_on_into_a_registry(
    two: Two, tmp_path: Path
) -> None:
    source, image, layout, target = ends(two, tmp_path)
    parts = [_part(source, tmp_path, b"part one " * 50), _part(source, tmp_path, b"part two " * 70)]
    bundle = _attach_index(source, image, parts)

    out = mirror(source, LayoutSide(layout), TAG, tmp_path / "spool-1")
    back = mirror(LayoutSide(layout), target, TAG, tmp_path / "spool-2")

    assert out.ok, out.problems
    assert back.ok, back.problems
    assert bundle.digest in out.referrers
    assert bundle.digest in back.referrers
    listed = {str(e.get("digest")) for e in layout.entries()}
    assert bundle.digest in listed
    assert not listed & {p.digest for p in parts}  # the index lists them, index.json does not
    for part in parts:
        held = target.get_manifest(part.digest)
        assert held is not None, part.digest
        assert held.body == part.body
        for digest, size in part.blobs():
            assert layout.proven(digest, size) is not None
            assert target.client.blob_exists(target.repo, digest)
    at_target = list_referrers(target.client, target.repo, image.digest)
    assert bundle.digest in {d.digest for d in at_target.descriptors}


def test_an_attached_index_listing_a_manifest_the_source_lacks_writes_nothing(
    two: Two, tmp_path: Path
) -> None:
    source, image, layout, _ = ends(two, tmp_path)
    part = _part(source, tmp_path, b"part " * 10)
    gone = _manifest({**json.loads(part.body), "annotations": {"never": "pushed"}})
    _attach_index(source, image, [part, gone])
    before = sorted(p.name for p in layout.root.rglob("*"))

    with pytest.raises(NotFoundError) as missing:
        mirror(source, LayoutSide(layout), TAG, tmp_path / "spool")

    assert gone.digest in missing.value.message
    assert sorted(p.name for p in layout.root.rglob("*")) == before


def test_a_referrer_the_registry_lists_for_another_subject_is_not_copied(tmp_path: Path) -> None:
    with fake_registry() as (host, state):
        state.referrers_api = True
        source, image = published(host, state, tmp_path)
        other = _manifest({**json.loads(image.body), "annotations": {"another": "image"}})
        stray = _manifest({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x.stray",
            "config": json.loads(image.body)["config"], "layers": [],
            "subject": {"mediaType": OCI_MANIFEST, "digest": other.digest, "size": len(other.body)},
        })  # fmt: skip
        state.manifests[(REPO, stray.digest)] = (OCI_MANIFEST, stray.body)
        ours = list_referrers(source.client, REPO, image.digest).descriptors
        entries = [d.to_json() for d in ours] + [{"mediaType": OCI_MANIFEST, "digest": stray.digest,
                                                  "size": len(stray.body)}]  # fmt: skip
        state.faults.referrers_body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                                                  "manifests": entries}).encode()  # fmt: skip
        layout = Layout(tmp_path / "usb")

        out = mirror(source, LayoutSide(layout), TAG, tmp_path / "spool")

    assert out.ok, out.problems
    assert sorted(out.referrers) == sorted(d.digest for d in ours)
    assert stray.digest not in {str(e.get("digest")) for e in layout.entries()}


def test_a_layer_that_is_not_sha256_is_named_before_anything_is_written(tmp_path: Path) -> None:
    with fake_registry() as (host, state):
        client = client_for(host, state)
        image = _manifest({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha256_digest(EMPTY_CONFIG), "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": "sha512:" + "ab" * 64, "size": 10}],
        })  # fmt: skip
        state.manifests[(REPO, TAG)] = state.manifests[(REPO, image.digest)] = (OCI_MANIFEST, image.body)
        target = tmp_path / "usb"

        with pytest.raises(WireError) as refused:  # exit 7: what the registry serves
            mirror(RegistrySide(client, REPO), LayoutSide(Layout(target)), TAG, tmp_path / "spool")

    assert "sha512:abab" in refused.value.message
    assert "only sha256 blobs are copied" in refused.value.message
    assert not target.exists()
