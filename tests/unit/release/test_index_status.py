"""``status`` of a platformed release (issue 43): each version tag's row lists each declared
platform's image its index names, whether the endpoint serves it, and its own documents; an
index served without one of its images is exit 7 naming the endpoint and the platform. A release
of linux/amd64 alone has no such key in its rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import PublishError
from xpu_release.image.engine import Engine

from ..helpers import run
from .line import LOGIN, PASSWORD
from .platformed import REF, World, world


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """kit:25.03 published by the command (its record kept)."""
    with world(tmp_path) as made:
        monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: made.engine))
        assert cli(made, "publish", REF)[0] == 0
        yield made


def cli(w: World, *args: str) -> tuple[int, str, str]:
    result = run(w.root, "--registries", str(w.override), *args, *LOGIN, input=PASSWORD)
    return result.exit_code, result.stdout, result.stderr


def test_each_version_row_lists_each_platform_image_served_with_its_own_documents(kit: World) -> None:
    code, out, err = cli(kit, "status", REF, "--json")

    assert code == 0, err
    rows = json.loads(out)["endpoints"]
    assert len(rows) == 3
    for row in rows:
        assert row["matches"]
        assert [(p["platform"], p["served"]) for p in row["platforms"]] == [
            ("linux/amd64", True),
            ("linux/arm64", True),
        ]
        # each image its own SBOM and provenance (unsigned: publish was given no key), the
        # index its own provenance
        assert [p["documents"] for p in row["platforms"]] == [{"sbom": "ok", "provenance": "unsigned"}] * 2
        assert row["documents"] == {"provenance": "unsigned"}


def test_an_index_served_without_its_arm64_image_is_exit_7_naming_where(kit: World) -> None:
    client, repo = kit.client("vpc/cn-beijing")
    index = client.get_manifest(repo, "25.03")
    assert index is not None
    arm64 = index.manifests[1].digest
    del kit.registries["vpc/cn-beijing"].manifests[(repo, arm64)]

    code, out, err = cli(kit, "status", REF)

    assert code == PublishError.exit_code
    assert "the index is served without its image at: vpc/cn-beijing (linux/arm64)" in err
    assert any(line.split()[:2] == ["ABSENT", "linux/arm64"] for line in out.splitlines())
