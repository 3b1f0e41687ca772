"""The image manifest a release writes, and the layers it names (``Blob``): OCI media types,
config, layers in order and the standard annotations; Docker schema 2 types of earlier releases
are read as their OCI equivalents."""

from __future__ import annotations

import json
from typing import Any

from ...oci.codec import DOCKER_GZIP_TYPE, GZIP_TYPE
from ...oci.members import Blob
from ...oci.registry import Manifest, sha256_digest

# OCI image manifests (annotations are theirs; skopeo's oci: layouts read only these). Releases
# pushed by earlier versions as Docker schema 2 keep their manifests: a rerun reuses what is
# served, and their layers are reused by digest (the same gzip bytes under either type).
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = GZIP_TYPE
DOCKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LAYER_TYPE = DOCKER_GZIP_TYPE
_AS_OCI = {DOCKER_LAYER_TYPE: LAYER_TYPE}


def _layer(blob: Blob) -> dict[str, Any]:
    """A layer's descriptor: an eStargz layer's with its TOC digest and size (``Blob.annotations``)."""
    out: dict[str, Any] = {
        "mediaType": _AS_OCI.get(blob.media_type, blob.media_type), "size": blob.size, "digest": blob.digest
    }  # fmt: skip
    if blob.annotations:
        out["annotations"] = dict(blob.annotations)
    return out


def image_manifest(config: bytes, layers: list[Blob], annotations: dict[str, str] | None = None) -> Manifest:
    data: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "size": len(config), "digest": sha256_digest(config)},
        "layers": [_layer(b) for b in layers],
    }
    if annotations:
        data["annotations"] = dict(sorted(annotations.items()))
    body = json.dumps(data, indent=3).encode()
    return Manifest(digest=sha256_digest(body), media_type=MANIFEST_TYPE, body=body)
