"""``mirror``: a release and everything that refers to it, copied by digest from a registry to an
OCI layout and from the layout into another registry (the air-gapped way), against the
in-process fake of the distribution API (with and without the referrers API). The same on the
real stack, with skopeo reading the layout: ``tests/integration/test_mirror.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import TagConflict
from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.cosign import att_tag
from xpu_release.evidence.referrers import attach, list_referrers
from xpu_release.evidence.signing import ENVELOPE_TYPE, envelope
from xpu_release.oci.layout import REF_NAME, Layout
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide, RegistrySide

from ..evidence.test_sign_only_ours import OURS, key
from ..fake_registry import State, fake_registry
from ..oci.test_registry_client import REPO, client_for

TAG = "1.0"


@pytest.fixture
def two() -> Iterator[tuple[tuple[str, State], tuple[str, State]]]:
    with fake_registry() as a, fake_registry() as b:
        b[1].referrers_api = True  # one registry with the referrers API, one without
        yield a, b


def published(host: str, state: State, tmp_path: Path) -> tuple[RegistrySide, Manifest]:
    """A release at ``host``: an image of two layers, an SBOM and a signed provenance attached
    (with cosign's .att tag), the version tag last."""
    client = client_for(host, state)
    blobs = [b"config " * 10, b"layer one " * 1000, b"layer two " * 3000]
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    for data in blobs:
        path = spool / sha256_digest(data).replace(":", "-")
        path.write_bytes(data)
        client.upload_blob(REPO, sha256_digest(data), path)
    layers = [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha256_digest(b),
               "size": len(b)} for b in blobs[1:]]  # fmt: skip
    config = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256_digest(blobs[0]),
              "size": len(blobs[0])}  # fmt: skip
    body = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": layers, "config": config}
    ).encode()
    image = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    client.put_manifest(REPO, image.digest, image)
    attach(client, REPO, image, [
        Attachment(kind="sbom", payload=b'{"bomFormat":"CycloneDX"}'),
        Attachment(kind="provenance", payload=envelope(OURS, key()), media_type=ENVELOPE_TYPE),
    ], created="2026-12-03T00:00:00Z", spool=spool)  # fmt: skip
    client.put_manifest(REPO, TAG, image)
    return RegistrySide(client, REPO), image


def ends(
    two: tuple[tuple[str, State], tuple[str, State]], tmp_path: Path
) -> tuple[RegistrySide, Manifest, Layout, RegistrySide]:
    """The release at the first registry, an empty layout, a repository at the second."""
    (host_a, state_a), (host_b, state_b) = two
    source, image = published(host_a, state_a, tmp_path)
    layout = Layout(tmp_path / "usb")
    layout.create()
    return source, image, layout, RegistrySide(client_for(host_b, state_b), "mirror/image")


def test_a_release_goes_into_a_layout_and_from_it_into_another_registry_digests_unchanged(
    two: tuple[tuple[str, State], tuple[str, State]], tmp_path: Path
) -> None:
    source, image, layout, target = ends(two, tmp_path)

    out = mirror(source, LayoutSide(layout), TAG, tmp_path / "spool-1")
    back = mirror(LayoutSide(layout), target, TAG, tmp_path / "spool-2")

    assert out.ok, out.problems
    assert back.ok, back.problems
    assert out.digest == back.digest == image.digest
    assert len(out.referrers) == 2
    assert out.att
    assert back.att
    assert layout.resolve(TAG) == image.digest
    tags = {(e.get("annotations") or {}).get(REF_NAME) for e in layout.entries()}
    assert {TAG, att_tag(image.digest)} <= tags
    assert target.resolve(TAG) == image.digest
    found = list_referrers(target.client, "mirror/image", image.digest)
    assert found.via == "api"
    assert sorted(d.digest for d in found.descriptors) == sorted(out.referrers)  # the same artifacts
    att = target.get_manifest(att_tag(image.digest))
    assert att is not None
    assert att.digest == source.get_manifest(att_tag(image.digest)).digest  # type: ignore[union-attr]


def test_a_rerun_copies_nothing_and_another_image_at_the_tag_is_refused(
    two: tuple[tuple[str, State], tuple[str, State]], tmp_path: Path
) -> None:
    (host_a, state_a), (host_b, state_b) = two
    source, _ = published(host_a, state_a, tmp_path)
    target = RegistrySide(client_for(host_b, state_b), "mirror/image")

    first = mirror(source, target, TAG, tmp_path / "spool")
    again = mirror(source, target, TAG, tmp_path / "spool")
    other = Manifest(digest=sha256_digest(b'{"schemaVersion":2,"other":1}'), media_type=OCI_MANIFEST,
                     body=b'{"schemaVersion":2,"other":1}')  # fmt: skip
    target.client.put_manifest("elsewhere/image", TAG, other)
    with pytest.raises(TagConflict) as refused:
        mirror(source, RegistrySide(target.client, "elsewhere/image"), TAG, tmp_path / "spool")

    assert first.blobs_copied > 0
    assert (again.blobs_copied, again.blobs_skipped) == (0, first.blobs_copied + first.blobs_skipped)
    assert refused.value.exit_code == 9
    assert other.digest in refused.value.message
    assert target.client.head_manifest("elsewhere/image", TAG) == other.digest  # left as it was


def test_a_layout_blob_that_does_not_hash_to_its_name_is_never_copied(
    two: tuple[tuple[str, State], tuple[str, State]], tmp_path: Path
) -> None:
    from xpu_release.errors import ReleaseError

    source, image, layout, target = ends(two, tmp_path)
    mirror(source, LayoutSide(layout), TAG, tmp_path / "spool")
    layer = json.loads(image.body)["layers"][1]["digest"]
    layout.blob_path(layer).write_bytes(b"flipped")

    with pytest.raises(ReleaseError) as broken:
        mirror(LayoutSide(layout), target, TAG, tmp_path / "spool-2")

    assert layer in broken.value.message
    assert "usb" in broken.value.message  # named where it is damaged
    assert target.resolve(TAG) is None  # no tag for a broken copy


# --- a layout is outside data --------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
DIGEST = st.sampled_from(["sha256:" + "a" * 64, "sha256:../../etc", "md5:1", ""]) | st.text(max_size=12)
DESCRIPTOR = st.fixed_dictionaries({"digest": DIGEST | JSON, "size": st.integers(-1, 10) | JSON,
                                    "mediaType": st.text(max_size=5)})  # fmt: skip
MANIFEST = JSON | st.fixed_dictionaries({
    "schemaVersion": st.just(2), "mediaType": st.just(OCI_MANIFEST) | JSON,
    "config": DESCRIPTOR | JSON, "layers": st.lists(DESCRIPTOR, max_size=3) | JSON,
})  # fmt: skip


@given(manifest=MANIFEST, extra=st.lists(JSON, max_size=3), tagged=st.booleans(), index_json=st.none() | JSON)
def test_a_damaged_or_hostile_layout_is_named_never_an_internal_error(
    manifest: object, extra: list[object], tagged: bool, index_json: object
) -> None:
    """Whatever a layout holds (any JSON as its index or its manifest, digests that are no
    digests), bringing it back ends in a ReleaseError that names it, or a complete copy."""
    import tempfile

    from xpu_release.errors import ReleaseError

    with tempfile.TemporaryDirectory() as tmp:
        source = Layout(Path(tmp) / "src")
        source.create()
        body = json.dumps(manifest).encode()
        digest = source.put_bytes(body)
        entry = {"digest": digest, "mediaType": OCI_MANIFEST, "size": len(body)}
        if tagged:
            entry["annotations"] = {REF_NAME: TAG}
        index = {"schemaVersion": 2, "manifests": [entry, *extra]} if index_json is None else index_json
        (source.root / "index.json").write_text(json.dumps(index))
        error: str | None = None
        try:
            report = mirror(
                LayoutSide(source), LayoutSide(Layout(Path(tmp) / "dst")), TAG, Path(tmp) / "spool"
            )
        except ReleaseError as exc:
            error = exc.message
        if error is not None:
            assert error.strip()
            assert "Traceback" not in error
        else:
            assert report.ok, report.problems
