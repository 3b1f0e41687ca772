"""Mirroring an eStargz release out of a layout: the annotations travel with the layers, and a
layer whose TOC does not hold is refused before the first write, as a damaged blob is: the
target is left as it was (``sides.LayoutSide.check``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import DamagedFileError
from xpu_release.oci.estargz import TOC_DIGEST_ANNOTATION, UNCOMPRESSED_SIZE_ANNOTATION
from xpu_release.oci.layout import Layout
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide

from ..oci.estargz_layers import layer_tar, with_toc, written
from .layouts import LAYER_TYPE

TAG = "1.0"


def estargz_layout(root: Path, blob: bytes, annotations: dict[str, str]) -> Manifest:
    """A layout at ``root`` whose image at ``TAG`` has one layer, ``blob``, annotated so."""
    layout = Layout(root)
    layout.create()
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers"}}).encode()
    layout.put_bytes(config)
    digest = sha256_digest(blob)
    layout.write_blob(digest, len(blob), [blob])
    layer = {"mediaType": LAYER_TYPE, "digest": digest, "size": len(blob), "annotations": annotations}
    data = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha256_digest(config), "size": len(config)},
        "layers": [layer],
    }  # fmt: skip
    body = json.dumps(data, sort_keys=True).encode()
    image = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    layout.put_manifests([(image, None), (image, TAG)], version_tag=TAG)
    return image


def honest() -> tuple[bytes, dict[str, str]]:
    made, _, blob = written(layer_tar({"usr/bin/tool": b"x" * 70_000, "etc/conf": b"y = 1\n"}))
    return blob, made.annotations()


def test_an_estargz_layer_is_mirrored_with_its_annotations(tmp_path: Path) -> None:
    blob, annotations = honest()
    image = estargz_layout(tmp_path / "src", blob, annotations)

    mirror(
        LayoutSide(Layout(tmp_path / "src")), LayoutSide(Layout(tmp_path / "dst")), TAG, tmp_path / "cache"
    )

    copied = Layout(tmp_path / "dst").get_manifest(image.digest)
    assert copied is not None
    (layer,) = json.loads(copied.body)["layers"]
    assert layer["annotations"] == annotations
    assert set(annotations) == {TOC_DIGEST_ANNOTATION, UNCOMPRESSED_SIZE_ANNOTATION}


def lie_about_a_chunk(doc: dict[str, Any]) -> None:
    entry = next(e for e in doc["entries"] if e.get("chunkDigest"))
    entry["chunkDigest"] = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    "lie",
    ["a chunk digest that lies", "a TOC digest annotation that lies"],
)
def test_a_layer_whose_toc_does_not_hold_is_refused_before_the_target_is_touched(
    tmp_path: Path, lie: str
) -> None:
    blob, annotations = honest()
    if lie == "a chunk digest that lies":
        blob, annotations = with_toc(blob, lie_about_a_chunk)  # a well-formed TOC, named rightly
    else:
        annotations = {**annotations, TOC_DIGEST_ANNOTATION: "sha256:" + "1" * 64}
    estargz_layout(tmp_path / "src", blob, annotations)
    target = tmp_path / "dst"

    with pytest.raises(DamagedFileError) as caught:
        mirror(LayoutSide(Layout(tmp_path / "src")), LayoutSide(Layout(target)), TAG, tmp_path / "cache")

    assert "is an eStargz layer whose TOC does not hold" in caught.value.message
    assert not target.exists()  # nothing written: no blob, no empty index.json
