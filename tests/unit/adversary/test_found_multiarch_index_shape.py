"""Found by the adversary of issue 43: an index at a platformed release's version tag that
``docker pull --platform`` would not resolve to the tested image of each platform passed
``verify`` (without a record: what the first endpoint serves) and was promoted, its version tag
written at every production endpoint before the verify after the copy refused it.

- verify read each declared platform's first matching entry and nothing else: an arm64 entry
  naming the amd64 image (and the other way round), an entry whose size or media type is not
  its manifest's (containerd refuses it), a platform named twice, an entry of another platform
  or of none: each passed silently;
- promote copied whatever staging served at the tag, wrote the version tags, then verified: an
  index lacking linux/arm64, or one image where the release is an index, ended at the version
  tag of every target, with exit 7 only after.

Each is now a finding of verify naming the endpoint and the platform (``platformindex.py``), and
promote refuses it before anything is copied (exit 7, nothing written)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import VerifyFailed
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.model import DOCKER_LIST, OCI_INDEX
from xpu_release.oci.registry import Manifest, sha256_digest
from xpu_release.release.model.line import Line
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.verify import verify
from xpu_release.release.steering.promote import promote

from ..fake_registry import State
from ..release.fake_release import three_registries
from ..release.platformed import World, logged_in, world

ENDPOINTS = ("public", "vpc/cn-beijing", "vpc/cn-wulanchabu")
Edit = Callable[[dict[str, Any], World, str], None]


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[tuple[World, ReleaseRecord]]:
    with world(tmp_path) as made:
        yield made, made.published()


def served_instead(w: World, edit: Edit) -> None:
    """Every endpoint's version tag names the release's index as ``edit`` changes it."""
    for name in ENDPOINTS:
        client, repo = w.client(name)
        index = client.get_manifest(repo, "25.03")
        assert index is not None
        data = json.loads(index.body)
        edit(data, w, name)
        body = json.dumps(data).encode()
        client.put_manifest(
            repo, "25.03", Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body)
        )


def swapped(data: dict[str, Any], w: World, name: str) -> None:
    amd64, arm64 = data["manifests"]
    amd64["platform"], arm64["platform"] = arm64["platform"], amd64["platform"]


def arm64_names_amd64(data: dict[str, Any], w: World, name: str) -> None:
    amd64, arm64 = data["manifests"]
    arm64.update(digest=amd64["digest"], size=amd64["size"])


def size_lies(data: dict[str, Any], w: World, name: str) -> None:
    data["manifests"][1]["size"] += 7


def media_type_lies(data: dict[str, Any], w: World, name: str) -> None:
    data["manifests"][1]["mediaType"] = DOCKER_LIST


def amd64_twice(data: dict[str, Any], w: World, name: str) -> None:
    data["manifests"].append(dict(data["manifests"][0]))


def another_platform(data: dict[str, Any], w: World, name: str) -> None:
    data["manifests"].append({**data["manifests"][0], "platform": {"os": "linux", "architecture": "s390x"}})


def no_platform(data: dict[str, Any], w: World, name: str) -> None:
    entry = dict(data["manifests"][0])
    del entry["platform"]
    data["manifests"].append(entry)


def no_arm64(data: dict[str, Any], w: World, name: str) -> None:
    data["manifests"] = data["manifests"][:1]


@pytest.mark.parametrize(
    ("edit", "what", "said"),
    [
        (swapped, "linux/arm64 image", "config says linux/amd64, not linux/arm64"),
        (arm64_names_amd64, "linux/arm64 image", "config says linux/amd64, not linux/arm64"),
        (size_lies, "linux/arm64 image", "bytes; sha256:"),
        (media_type_lies, "linux/arm64 image", f"the index says {DOCKER_LIST}"),
        (amd64_twice, "linux/amd64 image", "the index names 2 images for it"),
        (another_platform, "index", "for linux/s390x, not a platform of the release"),
        (no_platform, "index", "for no platform, not a platform of the release"),
        (no_arm64, "linux/arm64 image", "the index names none"),
    ],
)
def test_verify_finds_an_index_that_does_not_give_each_platform_its_tested_image(
    kit: tuple[World, ReleaseRecord], edit: Edit, what: str, said: str
) -> None:
    w, _ = kit
    served_instead(w, edit)

    report = verify(w.pool(), None, deep=False)  # no record: what the first endpoint serves

    found = {(f.endpoint, f.what) for f in report.findings if said in f.problem}
    assert found == {(name, what) for name in ENDPOINTS}, report.findings


def one_image(data: dict[str, Any], w: World, name: str) -> None:
    """Not an edit of the index: the amd64 image alone at the tag (``served_instead`` is not used)."""


@pytest.fixture
def production(
    kit: tuple[World, ReleaseRecord], tmp_path: Path
) -> Iterator[tuple[EndpointPool, list[State]]]:
    """Three empty production registries: their pool, and the fakes behind them."""
    w, _ = kit
    with three_registries(tmp_path / "production.yaml") as (override, states):
        registries = load_registries(w.root, str(override))
        yield EndpointPool(w.spec, registries, logged_in(registries)), list(states.values())


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (no_arm64, "linux/arm64 image: the index names none"),
        (swapped, "config says linux/amd64, not linux/arm64"),
        (one_image, "serves one image; kit:25.03 is built for linux/amd64, linux/arm64"),
    ],
)
def test_promote_refuses_what_is_not_the_platformed_release_before_anything_is_copied(
    kit: tuple[World, ReleaseRecord],
    production: tuple[EndpointPool, list[State]],
    tmp_path: Path,
    edit: Edit,
    said: str,
) -> None:
    w, record = kit
    pool, states = production
    if edit is one_image:
        client, repo = w.client("public")
        image = client.get_manifest(repo, record.platforms[0].digest or "")
        assert image is not None
        for name in ENDPOINTS:
            client, repo = w.client(name)
            client.put_manifest(repo, "25.03", image)
    else:
        served_instead(w, edit)

    with pytest.raises(VerifyFailed, match="nothing was promoted") as caught:
        promote(w.pool(), pool, spool=tmp_path / "spool", record=None, today=date(2026, 12, 3),
                line=Line(Repo(w.root)))  # fmt: skip

    assert said in caught.value.message
    assert all(not s.manifests and not s.blobs for s in states)  # nothing was copied, no tag written
