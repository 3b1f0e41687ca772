"""Publish of a platformed release (issue 43), on fake registries and a fake engine holding each
platform's tested image (``platformed``): each platform's image first, then one OCI image index
naming them (each with its ``platform``) at every endpoint, then the version tag; fail-closed: a
platform missing, untested or not staged everywhere leaves every endpoint without the index and
without the version's tag, and the record and the message name the platform."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import NotFoundError, PublishError, SmokeTestFailed, TagConflict
from xpu_release.evidence.referrers import fetch_attachment, list_referrers
from xpu_release.image.engine import Engine
from xpu_release.image.smoke import _mark_tested, _marker
from xpu_release.image.smoke import tests_sha256 as checks_sha256
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.oci.model import OCI_INDEX
from xpu_release.oci.registry import Manifest
from xpu_release.release.model.record import ReleaseRecord, default_path, read, write
from xpu_release.release.publishing.indexpublish import image_index, publish_index
from xpu_release.release.publishing.publish import Options

from ..helpers import run, write_manifest
from ..image.kit import KIT
from .line import LOGIN, PASSWORD
from .platformed import REF, World, world

ENDPOINTS = ("public", "vpc/cn-beijing", "vpc/cn-wulanchabu")


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as made:
        yield made


def publish(w: World, *platforms: object, options: Options | None = None) -> ReleaseRecord:
    builds = w.builds(*platforms)  # type: ignore[arg-type]
    return publish_index(w.pool(), w.engine, builds, options or Options(), lambda _: None, "test")  # type: ignore[arg-type]


def served(w: World, name: str, ref: str) -> Manifest | None:
    client, repo = w.client(name)
    return client.get_manifest(repo, ref)


def test_one_index_of_every_platform_is_served_at_every_endpoint_each_image_the_tested_one(
    kit: World,
) -> None:
    record = publish(kit)

    assert record.complete, record.endpoints
    for name in ENDPOINTS:
        index = served(kit, name, "25.03")
        assert index is not None
        assert index.is_index
        assert index.media_type == OCI_INDEX
        assert index.digest == record.digest
        entries = [(d.platform.os, d.platform.architecture, d.platform.variant) for d in index.manifests]  # type: ignore[union-attr]
        assert entries == [("linux", "amd64", ""), ("linux", "arm64", "v8")]
        for entry, platform in zip(index.manifests, (AMD64, ARM64), strict=True):
            image = served(kit, name, entry.digest)
            assert image is not None
            assert image.config_digest == kit.image_id(platform)
            client, repo = kit.client(name)
            for digest, size in image.blobs():  # every blob of each platform's image is there
                assert client.blob_exists(repo, digest), (name, platform, digest, size)
    assert [(p.platform, p.tested_image_id) for p in record.platforms] == [
        ("linux/amd64", kit.image_id(AMD64)),
        ("linux/arm64", kit.image_id(ARM64)),
    ]
    assert all(p.size > 0 for p in record.platforms)
    write(record, kit.root / "record.json")
    assert read(kit.root / "record.json") == record  # the schema knows the platforms, and they read back


def test_each_platform_carries_its_own_sbom_and_the_index_a_provenance_naming_each_digest(kit: World) -> None:
    record = publish(kit)

    client, repo = kit.client("vpc/cn-wulanchabu")
    for p in record.platforms:
        found = list_referrers(client, repo, p.digest or "")
        assert set(p.attachments) >= {"sbom", "provenance"}
        sbom = fetch_attachment(client, repo, found.ours("sbom")[0], "sbom").payload
        torch = next(c for c in json.loads(sbom)["components"] if c["name"] == "torch")
        assert torch["version"] == ("2.13.0+cpu" if p.platform == "linux/amd64" else "2.13.0")
    on_index = list_referrers(client, repo, record.digest or "")
    provenance = fetch_attachment(client, repo, on_index.ours("provenance")[0], "provenance").payload
    statement = json.loads(provenance)
    named = {
        d["name"]: d["digest"]["sha256"]
        for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    }
    assert named == {p.platform: (p.digest or "").removeprefix("sha256:") for p in record.platforms}
    assert statement["subject"][0]["digest"]["sha256"] == (record.digest or "").removeprefix("sha256:")
    assert not on_index.ours("sbom")  # the index has no SBOM of its own: each image has its own


def test_a_platform_not_staged_everywhere_leaves_no_index_and_no_tag_anywhere_and_a_rerun_finishes(
    kit: World,
) -> None:
    kit.registries["vpc/cn-wulanchabu"].faults.unavailable = 10**6  # a region that is down

    record = publish(kit)

    kit.registries["vpc/cn-wulanchabu"].faults.unavailable = 0  # up again, for the test to look
    assert not record.complete
    assert all(served(kit, name, "25.03") is None for name in ENDPOINTS)
    for name in ENDPOINTS:  # no image index was put anywhere, by tag or by digest (the referrers
        # tag's index of attachments, naming no platform, is the amd64 image's SBOM and provenance)
        bodies = [json.loads(body) for _, body in kit.registries[name].manifests.values()]
        assert not [b for b in bodies if b.get("mediaType") == OCI_INDEX and "platform" in str(b)], name
    failed = [e for e in record.endpoints if e.status == "failed"]
    assert [e.endpoint for e in failed] == ["vpc/cn-wulanchabu"]
    assert failed[0].error is not None
    assert failed[0].error.startswith("linux/amd64: ")
    assert [p.platform for p in record.platforms] == ["linux/amd64"]  # arm64 was never started

    again = publish(kit)

    assert again.complete
    assert {served(kit, name, "25.03").digest for name in ENDPOINTS} == {again.digest}  # type: ignore[union-attr]


def test_a_platform_whose_first_push_fails_leaves_every_endpoint_without_the_version(kit: World) -> None:
    kit.engine.lost.add(kit.image_id(ARM64))  # the engine fails on the arm64 image

    record = publish(kit)

    assert not record.complete
    assert all(served(kit, name, "25.03") is None for name in ENDPOINTS)
    assert record.endpoints[0].error is not None
    assert record.endpoints[0].error.startswith("linux/arm64: ")
    assert [(p.platform, p.digest is None) for p in record.platforms] == [
        ("linux/amd64", False),
        ("linux/arm64", True),
    ]


def test_a_declared_platform_without_an_image_is_refused_before_anything_is_pushed(kit: World) -> None:
    with pytest.raises(PublishError, match="linux/arm64") as caught:
        publish(kit, AMD64)

    assert "nothing was pushed" in caught.value.message
    assert all(not state.requests for state in kit.registries.values())


def test_an_untested_platform_is_refused_naming_it_before_anything_is_pushed(kit: World) -> None:
    _marker(kit.image_id(ARM64)).unlink()  # its smoke tests never passed

    with pytest.raises(SmokeTestFailed, match=r"^linux/arm64: "):
        publish(kit)

    assert all(not state.requests for state in kit.registries.values())


def test_a_version_tag_holding_another_platform_image_is_a_conflict_and_nothing_is_pushed(kit: World) -> None:
    publish(kit)
    tested_arm64 = kit.image_id(ARM64)
    other = dict(kit.engine.images[tested_arm64])
    # the arm64 image of the release changes (a rebuild of other content): the published index
    # names another arm64 image than the one tested now
    kit.engine.images.pop(tested_arm64)
    other["Id"] = "sha256:" + "e" * 64
    kit.engine.images[other["Id"]] = other
    kit.engine.tags[ARM64.local_ref(REF)] = other["Id"]
    _mark_tested(kit.spec, other["Id"], checks_sha256(kit.root, kit.spec), 1)
    before = {name: len(s.requests) for name, s in kit.registries.items()}

    with pytest.raises(TagConflict, match=r"its linux/arm64 image: its config is sha256:"):
        publish(kit)

    writes = [
        r
        for name, s in kit.registries.items()
        for r in s.requests[before[name] :]
        if r.startswith(("PUT", "POST", "PATCH"))
    ]
    assert writes == []


def test_a_rerun_of_a_complete_publish_changes_nothing(kit: World) -> None:
    first = publish(kit)
    before = {name: len(s.requests) for name, s in kit.registries.items()}

    again = publish(kit)

    writes = [
        r
        for name, s in kit.registries.items()
        for r in s.requests[before[name] :]
        if r.startswith(("PUT", "POST", "PATCH"))
    ]
    assert writes == []  # each platform's image found through the index: nothing pushed again

    assert again.complete
    assert again.digest == first.digest
    assert {e.status for e in again.endpoints} == {"unchanged"}
    assert [p.digest for p in again.platforms] == [p.digest for p in first.platforms]


# --- the command ------------------------------------------------------------------------------


def cli(w: World, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: w.engine))
    result = run(w.root, "--registries", str(w.override), *args, *LOGIN, input=PASSWORD)
    return result.exit_code, result.stdout, result.stderr


def test_the_publish_command_publishes_the_index_of_every_platform_with_its_sbom(
    kit: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = cli(kit, monkeypatch, "publish", REF, "--json")

    assert code == 0, err
    record = json.loads(out)
    assert [p["platform"] for p in record["platforms"]] == ["linux/amd64", "linux/arm64"]
    assert [p["tested_image_id"] for p in record["platforms"]] == [kit.image_id(AMD64), kit.image_id(ARM64)]
    index = served(kit, "vpc/cn-beijing", "25.03")
    assert index is not None
    assert index.digest == record["digest"]
    assert [d.digest for d in index.manifests] == [p["digest"] for p in record["platforms"]]
    assert all({"sbom", "provenance"} <= set(p["attachments"]) for p in record["platforms"])


def test_the_publish_command_says_each_platform_image_with_its_digest_and_size(
    kit: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = cli(kit, monkeypatch, "publish", REF)

    assert code == 0, err
    record = read(default_path(kit.root, "kit", "25.03"))
    for p in record.platforms:
        assert f"  {p.platform:<22} {p.digest}  ({p.size / 1e6:.1f} MB)" in out.splitlines()


def test_the_publish_command_without_one_platform_image_pushes_nothing_and_names_it(
    kit: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    del kit.engine.tags[ARM64.local_ref(REF)]  # never built

    code, _, err = cli(kit, monkeypatch, "publish", REF)

    assert code == NotFoundError.exit_code
    assert "no image kit:25.03-arm64 in the engine" in err
    assert all(not state.requests for state in kit.registries.values())


def test_the_publish_command_gives_an_index_the_floating_tags_a_withdrawn_newer_release_left(
    kit: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``publish`` of a platformed release moves the floating tags every newer release carrying
    them has left by withdrawal (``withdrawn.past_withdrawn``), as it does for one image."""
    with_latest = KIT + "floating_tags: [latest]\n"
    write_manifest(kit.root, "kit", "25.03", with_latest)
    write_manifest(kit.root, "kit", "25.04", with_latest.replace('version: "25.03"', 'version: "25.04"'))
    for p in (AMD64, ARM64):  # this manifest's smoke tests passed too
        _mark_tested(kit.spec, kit.image_id(p), checks_sha256(kit.root, kit.spec), 1)
    code, _, err = cli(kit, monkeypatch, "publish", REF)
    assert code == 0, err
    first = served(kit, "public", "25.03")
    assert first is not None
    images = [served(kit, "public", d.digest) for d in first.manifests]
    newer = image_index(
        [(p, m) for p, m in zip((AMD64, ARM64), images, strict=True) if m], {"newer": "25.04"}
    )
    # 25.04 not published holds nothing yet: latest is 25.03's
    assert served(kit, "public", "latest") == first
    for name in ENDPOINTS:  # 25.04 published everywhere (its own index of the same images), then withdrawn
        client, repo = kit.client(name)
        client.put_manifest(repo, "25.04", newer)
        client.put_manifest(repo, "latest", newer)
    withdrawn = run(kit.root, "--registries", str(kit.override), "withdraw", "kit:25.04", "--reason", "bad",
                    *LOGIN, input=PASSWORD)  # fmt: skip
    assert withdrawn.exit_code == 0, withdrawn.stderr
    for name in ENDPOINTS:  # a latest the withdrawal could not move (say, an endpoint that was down)
        client, repo = kit.client(name)
        client.put_manifest(repo, "latest", newer)

    code, _, err = cli(kit, monkeypatch, "publish", REF)

    assert code == 0, err
    for name in ENDPOINTS:
        latest = served(kit, name, "latest")
        assert latest is not None
        assert latest.digest == first.digest
