"""``watch`` of a platformed release (issue 43): the public endpoint serves an index, and each
platform's image carries its own SBOM (their packages differ), so each declared platform's SBOM
is read and scanned: an advisory for a package of the arm64 image alone is found. An index that
lacks a declared platform is a release that could not be checked, naming the platform."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from xpu_release.evidence.osv import Advisories
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import image_index, publish_index
from xpu_release.release.publishing.publish import Options
from xpu_release.release.watching import readahead
from xpu_release.release.watching.published import Reader, ServedSboms
from xpu_release.release.watching.readahead import ReadAhead
from xpu_release.release.watching.watch import Watcher, watch_all
from xpu_release.release.watching.watched import Watched

from .platformed import REF, World, logged_in, world
from .published_kit import sbom

OSV = """{"schema_version": "1.6.0", "id": "GHSA-arm6-4only-0001", "aliases": [], "summary": "in cffi",
 "published": "2026-11-20T00:00:00Z", "database_specific": {"severity": "HIGH"},
 "affected": [{"package": {"ecosystem": "PyPI", "name": "cffi"},
               "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.17.2"}]}]}]}"""


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[tuple[World, ReleaseRecord]]:
    """kit:25.03 published; its arm64 image has a package (cffi 1.17.1) its amd64 image has not."""
    with world(tmp_path) as made:
        builds = made.builds()
        arm64 = builds[1].documents
        builds[1] = replace(
            builds[1], documents=replace(arm64, sbom=sbom(("torch", "2.13.0"), ("cffi", "1.17.1")))
        )
        record = publish_index(made.pool(), made.engine, builds, Options(), lambda _: None, "test")
        assert record.complete
        (tmp_path / "osv").mkdir()
        (tmp_path / "osv" / "GHSA-arm6-4only-0001.json").write_text(OSV)
        yield made, record


def watcher(w: World) -> Watcher:
    registries = w.loaded()
    store = logged_in(registries)
    osv = w.root.parent / "osv"
    return Watcher(Repo(w.root), Reader(registries, store), Advisories([osv], w.root.parent / "osv-cache"),
                   today=date(2026, 12, 3), now=datetime.now(UTC))  # fmt: skip


def watch(w: World) -> Watched:
    return watcher(w).watch(REF)


def test_each_platform_sbom_is_scanned_and_a_package_of_the_arm64_image_alone_is_found(
    kit: tuple[World, ReleaseRecord],
) -> None:
    w, record = kit

    watched = watch(w)

    assert watched.scanned
    assert watched.digest == record.digest
    assert [(o.finding.ids[0], o.finding.package.name, o.fix) for o in watched.open] == [
        ("GHSA-arm6-4only-0001", "cffi", "1.17.2")
    ]
    assert not [u for u in watched.unchecked if u.what == "sbom"]


def test_an_index_without_a_declared_platform_could_not_be_checked_naming_it(
    kit: tuple[World, ReleaseRecord],
) -> None:
    w, record = kit
    client, repo = w.client("public")
    amd64 = client.get_manifest(repo, record.platforms[0].digest or "")
    assert amd64 is not None
    client.put_manifest(repo, "25.03", image_index([(AMD64, amd64)], {}))

    watched = watch(w)

    assert watched.state == "could not check"
    assert not watched.scanned
    (problem,) = [u for u in watched.unchecked if u.what == "sbom"]
    assert f"the index names no {ARM64} image" in str(problem)


def test_read_ahead_reads_each_platform_sbom_and_watch_takes_them(
    kit: tuple[World, ReleaseRecord], monkeypatch: pytest.MonkeyPatch, read_aheads: list[ReadAhead]
) -> None:
    """``watch`` over many releases reads their SBOMs ahead (``readahead.py``): of an index, each
    platform's image's, which watch takes as its own read would have found them."""
    w, record = kit
    taken: list[ServedSboms | None] = []
    sboms = readahead.ReadAhead.sboms

    def taking(self: ReadAhead, ref: str, digest: str) -> ServedSboms | None:
        taken.append(sboms(self, ref, digest))
        return taken[-1]

    monkeypatch.setattr(readahead.ReadAhead, "sboms", taking)
    running = watcher(w)
    running.keep_history = False

    (watched,) = watch_all(running, [REF], lambda refs: [refs])

    assert [a.read for a in read_aheads] == [1]
    (served,) = taken
    assert served is not None
    assert served.images == tuple(p.digest for p in record.platforms)
    assert len(served.payloads) == 2  # each platform's own SBOM
    assert [(o.finding.ids[0], o.finding.package.name) for o in watched.open] == [
        ("GHSA-arm6-4only-0001", "cffi")
    ]
