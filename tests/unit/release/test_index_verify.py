"""``verify`` of a platformed release (issue 43): the version tag names the index at every
endpoint, and each declared platform's image it names is served there as an image, with every
blob and its own attachments; ``--deep`` hashes each platform's blobs. An index that lacks a
platform, a platform's blob or SBOM missing in one region, and one image where an index is
expected are each a finding naming the endpoint and the platform."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.evidence.referrers import list_referrers
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.oci.registry import Manifest
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import image_index
from xpu_release.release.publishing.verify import VerifyReport, verify

from .platformed import World, world


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[tuple[World, ReleaseRecord]]:
    with world(tmp_path) as made:
        yield made, made.published()


def check(w: World, record: ReleaseRecord | None, *, deep: bool = False) -> VerifyReport:
    if record is None:
        return verify(w.pool(), None, deep=deep)
    platforms = {p.platform: p.attachments for p in record.platforms}
    return verify(w.pool(), record.digest, deep=deep, attachments=record.attachments, platforms=platforms)


def image_of(w: World, name: str, record: ReleaseRecord, platform: str) -> Manifest:
    client, repo = w.client(name)
    digest = next(p.digest for p in record.platforms if p.platform == platform)
    found = client.get_manifest(repo, digest or "")
    assert found is not None
    return found


def test_a_published_index_verifies_with_each_platform_image_its_blobs_and_its_attachments(
    kit: tuple[World, ReleaseRecord],
) -> None:
    w, record = kit
    report = check(w, record)

    assert report.ok, report.findings
    # each endpoint: both images' config and layer, and the blobs of each image's SBOM and
    # provenance and of the index's provenance
    per_endpoint = 2 * 2 + 2 * 2 * 2 + 2
    assert report.blobs_checked == 3 * per_endpoint
    deep = check(w, None, deep=True)  # without a record: what the first endpoint serves
    assert deep.ok, deep.findings
    assert deep.bytes_hashed > 0


def test_an_arm64_layer_missing_in_one_region_is_found_naming_it(kit: tuple[World, ReleaseRecord]) -> None:
    w, record = kit
    layer = image_of(w, "vpc/cn-beijing", record, "linux/arm64").layers[0].digest
    del w.registries["vpc/cn-beijing"].blobs[layer]

    report = check(w, record)

    assert [(f.endpoint, f.what, f.problem) for f in report.findings] == [
        ("vpc/cn-beijing", layer, "missing")
    ]


def test_an_arm64_sbom_missing_in_one_region_is_found_naming_the_platform(
    kit: tuple[World, ReleaseRecord],
) -> None:
    w, record = kit
    client, repo = w.client("vpc/cn-wulanchabu")
    arm64 = image_of(w, "vpc/cn-wulanchabu", record, "linux/arm64")
    sbom = list_referrers(client, repo, arm64.digest).ours("sbom")[0].digest
    state = w.registries["vpc/cn-wulanchabu"]
    # the referrers tag schema's index of the arm64 image, without its SBOM
    tag = "sha256-" + arm64.digest.removeprefix("sha256:")
    media, body = state.manifests[(repo, tag)]
    listing = json.loads(body)
    listing["manifests"] = [m for m in listing["manifests"] if m["digest"] != sbom]
    state.manifests[(repo, tag)] = (media, json.dumps(listing).encode())

    report = check(w, record)

    assert [(f.endpoint, f.what) for f in report.findings] == [("vpc/cn-wulanchabu", "linux/arm64 sbom")]


def test_an_index_without_a_declared_platform_is_found(kit: tuple[World, ReleaseRecord]) -> None:
    w, record = kit
    client, repo = w.client("public")
    amd64 = image_of(w, "public", record, "linux/amd64")
    partial = image_index([(AMD64, amd64)], {})
    client.put_manifest(repo, "25.03", partial)

    report = check(w, None)  # what the first endpoint serves: the partial index

    assert ("public", "linux/arm64 image", "the index names none") in [
        (f.endpoint, f.what, f.problem) for f in report.findings
    ]
    assert ARM64.name in str(report.findings)


def test_one_image_where_the_release_is_an_index_is_found(kit: tuple[World, ReleaseRecord]) -> None:
    w, record = kit
    client, repo = w.client("public")
    client.put_manifest(repo, "25.03", image_of(w, "public", record, "linux/amd64"))

    report = check(w, None)  # what the first endpoint serves: the amd64 image alone

    assert report.findings[0].endpoint == "public"
    assert report.findings[0].problem == "serves one image; kit:25.03 is built for linux/amd64, linux/arm64"
