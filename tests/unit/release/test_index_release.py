"""``release`` of a platformed manifest (issue 43), from ``validate`` to ``record`` with a fake
engine that holds each platform's built, tested image and three fake registries: build, test and
scan run for every platform's image (each stage's line names them), the evaluation measures the
first, and one index of them all is published and verified; a platform whose stage fails stops
the release naming it, and nothing is published anywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import StackError
from xpu_release.image.engine import Engine
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.release.model.record import default_path
from xpu_release.release.publishing.publish import Options
from xpu_release.release.run import stages
from xpu_release.release.run.pipeline import Choices, Release, Reporter

from ..helpers import run
from .line import LOGIN, PASSWORD
from .platformed import REF, World, world


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with world(tmp_path) as made:
        monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: made.engine))
        (tmp_path / "osv").mkdir()
        yield made


def release(w: World) -> tuple[int, dict[str, object], str]:
    osv = w.root.parent / "osv"
    result = run(w.root, "--registries", str(w.override), "release", REF, "--json", "--advisories", str(osv),
                 *LOGIN, input=PASSWORD)  # fmt: skip
    return result.exit_code, json.loads(result.stdout or "{}"), result.stderr


def test_a_platformed_release_scans_every_platform_and_publishes_one_verified_index(kit: World) -> None:
    code, summary, err = release(kit)

    assert code == 0, err
    stages = {s["name"]: s for s in summary["stages"]}  # type: ignore[attr-defined]
    for name in ("build", "test", "scan"):
        assert stages[name]["detail"].startswith("linux/amd64: "), stages[name]
        assert "; linux/arm64: " in stages[name]["detail"], stages[name]
    assert stages["verify"]["status"] == "done"
    for platform in (AMD64, ARM64):  # each platform's SBOM made once, from its own image
        assert kit.engine.calls[f"container:sbom:{kit.image_id(platform)}"] == 1
    record = summary["record"]
    assert [p["platform"] for p in record["platforms"]] == ["linux/amd64", "linux/arm64"]  # type: ignore[index]
    client, repo = kit.client("vpc/cn-wulanchabu")
    index = client.get_manifest(repo, "25.03")
    assert index is not None
    assert index.is_index
    assert index.digest == record["digest"]  # type: ignore[index]
    kept = json.loads(default_path(kit.root, "kit", "25.03").read_text())
    assert kept["platforms"] == record["platforms"]  # type: ignore[index]


ZLIB = """{"schema_version": "1.6.0", "id": "DEB-ZLIB-0001", "aliases": [], "summary": "in zlib",
 "published": "2026-11-20T00:00:00Z", "database_specific": {"severity": "LOW"},
 "affected": [{"package": {"ecosystem": "Debian:12", "name": "zlib"},
               "ranges": [{"type": "ECOSYSTEM",
                           "events": [{"introduced": "0"}, {"fixed": "1:1.3.dfsg-1"}]}]}]}"""


def test_the_record_gate_holds_the_findings_of_every_platform(kit: World) -> None:
    # the arm64 image alone has zlib1g (what the SBOM's container prints for it)
    kit.engine.dpkg[kit.image_id(ARM64)] = (
        "os\tdebian\t12\ndeb\tzlib1g\t1:1.2.13.dfsg-1\tarm64\tzlib\t1:1.2.13.dfsg-1\n"
    )
    (kit.root.parent / "osv" / "DEB-ZLIB-0001.json").write_text(ZLIB)

    code, summary, err = release(kit)

    assert code == 0, err
    scan = summary["record"]["scan"]  # type: ignore[index]
    assert scan["status"] == "passed"
    assert [(f["id"], f["package"]) for f in scan["findings"]] == [("DEB-ZLIB-0001", "zlib")]


def test_a_platform_whose_scan_fails_stops_the_release_naming_it_and_publishes_nothing(kit: World) -> None:
    kit.engine.lost.add(kit.image_id(ARM64))  # its SBOM's container fails

    code, summary, err = release(kit)

    assert code == StackError.exit_code
    assert "linux/arm64: the container of" in err
    assert summary["failed"] == {  # type: ignore[comparison-overlap]
        "stage": "scan",
        "error": f"linux/arm64: the container of {kit.image_id(ARM64)} exited with 139",
        "exit_code": StackError.exit_code,
    }
    writes = [
        r for s in kit.registries.values() for r in s.requests if r.startswith(("PUT", "POST", "PATCH"))
    ]
    assert writes == []


def after(text: str, heading: str) -> str:
    """The paragraph of ``text`` that follows the one starting with ``heading``."""
    paragraphs = text.split("\n\n")
    return next(paragraphs[i + 1] for i, par in enumerate(paragraphs) if par.startswith(heading))


def test_the_notes_list_each_platform_with_its_digest_size_and_documents(kit: World) -> None:
    code, summary, err = release(kit)
    assert code == 0, err
    record = summary["record"]
    written = {n.rpartition("/")[2]: Path(n).read_text() for n in summary["notes"]}  # type: ignore[attr-defined]

    english = written["25.03.en.md"]
    repository = record["endpoints"][0]["version_ref"].rpartition(":")[0]  # type: ignore[index]
    for p in record["platforms"]:  # type: ignore[index]
        size = f"{p['size'] / 1e6:.1f} MB"
        assert f"| {p['platform']} | `{p['digest']}` | {size} | `{p['tested_image_id']}` |" in english
        own = after(english, f"Attached to its {p['platform']} image")
        assert f"- SBOM (CycloneDX 1.6): `{repository}@{p['attachments']['sbom']}`" in own.splitlines()
    on_index = after(english, "Attached to the image index")
    provenance = record["attachments"]["provenance"]  # type: ignore[index]
    assert on_index == f"- provenance (in-toto, SLSA v1): `{repository}@{provenance}`"
    assert "Image tested before publishing (config digest): `" not in english  # each platform's: in the table
    assert "附加到linux/arm64镜像" in written["25.03.zh.md"]


def test_the_dry_run_plans_each_platform_build_and_one_index(kit: World) -> None:
    pool = kit.pool()
    run_ = Release(Repo(kit.root), REF, kit.loaded(), pool.credentials, Options(), Reporter(lambda _: None),
                   Choices(builder="test", dry_run=True))  # fmt: skip

    plans = dict(stages.planned(run_.context(), kit.engine))  # type: ignore[arg-type]

    amd64, arm64 = (kit.image_id(p)[:19] for p in (AMD64, ARM64))
    assert plans["build"] == f"linux/amd64: up to date ({amd64}); linux/arm64: up to date ({arm64})"
    assert plans["publish"].startswith("one image index of linux/amd64, linux/arm64 at ")
