"""Found by the adversary of issue 43: ``publish --allow-overwrite`` of a platformed release
whose version tag held an index naming, for linux/arm64, a manifest with the tested image's
config but another layer kept that manifest as "the tested image" (``Publisher.push_source``
reused whatever the tag's index named with the tested config: the layer check of ``TagRules``
is skipped under --allow-overwrite), and wrote a new index naming it at every endpoint, every
endpoint "verified". --allow-overwrite lets a publish replace the tag; it never lets it keep an
image that is not the tested one, layers and all."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.oci.registry import Manifest, sha256_digest
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import image_index, publish_index
from xpu_release.release.publishing.publish import Options

from ..release.platformed import World, world

ENDPOINTS = ("public", "vpc/cn-beijing", "vpc/cn-wulanchabu")


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as made:
        yield made


def publish(w: World, options: Options) -> ReleaseRecord:
    return publish_index(w.pool(), w.engine, w.builds(), options, lambda _: None, "test")  # type: ignore[arg-type]


def with_other_layer(w: World, name: str, image: Manifest) -> Manifest:
    """``image`` with its layer replaced by another one (its config, the tested image's, kept),
    put by digest at the endpoint ``name`` with that layer."""
    client, repo = w.client(name)
    blob = gzip.compress(b"not what was tested", mtime=0)
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    w.registries[name].blobs[digest] = blob
    data = json.loads(image.body)
    data["layers"][0].update(digest=digest, size=len(blob))
    body = json.dumps(data).encode()
    made = Manifest(digest=sha256_digest(body), media_type=image.media_type, body=body)
    client.put_manifest(repo, made.digest, made)
    return made


def test_allow_overwrite_never_keeps_a_platform_image_with_the_tested_config_but_another_layer(
    kit: World,
) -> None:
    first = publish(kit, Options())
    tested = {p.platform: p.digest for p in first.platforms}
    for name in ENDPOINTS:  # the version tag now names an arm64 image of other content
        client, repo = kit.client(name)
        index = client.get_manifest(repo, "25.03")
        assert index is not None
        amd64, arm64 = (client.get_manifest(repo, d.digest) for d in index.manifests)
        assert amd64 is not None
        assert arm64 is not None
        other = with_other_layer(kit, name, arm64)
        client.put_manifest(repo, "25.03", image_index([(AMD64, amd64), (ARM64, other)], {}))

    again = publish(kit, Options(allow_overwrite=True))

    assert again.complete, again.endpoints
    assert [p.digest for p in again.platforms] == [tested["linux/amd64"], tested["linux/arm64"]]
    for name in ENDPOINTS:
        client, repo = kit.client(name)
        index = client.get_manifest(repo, "25.03")
        assert index is not None
        assert index.digest == first.digest
        assert [d.digest for d in index.manifests] == [tested["linux/amd64"], tested["linux/arm64"]]
