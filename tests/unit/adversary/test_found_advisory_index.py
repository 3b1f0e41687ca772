"""The SQLite index an advisory archive is read into (``<cache>/advisories/<sha256>.v1.sqlite``).

- ``build_index`` stores a record's whole text once per package it affects: one 200 KB member
  naming 1,000 packages is 200 MB on disk. A member under 256 KiB is exempt from the inflation
  bound, so a 53 KB archive of five such members (4,000 packages each) wrote 4.6 GB in 10 s;
  the 10 GiB bound on what an archive inflates to allows some 40,000 of them. outside-data.md
  bounds what an archive inflates to; runner-disk.md is about keeping the runner's disk.
- The index is a "fact" to ``cache prune``: ``--keep-storage 0`` keeps it (4.6 GB above), and
  every new export (a new sha256, daily) adds one that no prune removes.
- A killed index build leaves ``.index-*.db``, which no prune removes (runner-disk.md: "partial
  downloads and half-written temporary files wherever they are in the cache" always go).
- The index is written 0600 (``NamedTemporaryFile``), where new files are 0644."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from ..cli.hostile import a_users_error, invoke, without_an_engine
from ..cli.test_hostile_inputs import scan


def _cache_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and not p.is_symlink())


def _archive(path: Path, *, packages: int, size: int, members: int = 1) -> Path:
    record: dict[str, object] = {
        "id": "AMP-0",
        "affected": [{"package": {"ecosystem": "PyPI", "name": f"p{i}"}} for i in range(packages)],
        "database_specific": {"pad": ""},
    }
    record["database_specific"] = {"pad": "x" * (size - len(json.dumps(record)))}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k in range(members):
            z.writestr(f"AMP-{k}.json", json.dumps({**record, "id": f"AMP-{k}"}))
    return path


def test_an_archive_of_kilobytes_does_not_write_hundreds_of_megabytes(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_an_engine(monkeypatch)
    archive = _archive(tmp_path / "all.zip", packages=1000, size=200_000)  # a 200 KB record
    assert archive.stat().st_size < 20_000

    result = scan(repo, archive)

    a_users_error(result, 0)
    stored = _cache_bytes(tmp_path / "cache")
    assert stored < 20 << 20, (
        f"{stored / 1e6:.0f} MB stored for a {archive.stat().st_size / 1e3:.0f} KB archive"
    )


def test_prune_removes_the_index_of_an_archive_no_run_uses(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_an_engine(monkeypatch)
    archive = _archive(tmp_path / "all.zip", packages=3, size=2_000)
    a_users_error(scan(repo, archive), 0)
    (index,) = (tmp_path / "cache" / "advisories").glob("*.sqlite")
    os.utime(index, (0, 0))  # not used since 1970

    result = invoke(
        repo, ["cache", "prune", "--older-than", "30d"], env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")}
    )

    a_users_error(result, 0)
    assert not index.exists(), "an advisory index (it can be made again from its archive) is kept for ever"


def test_prune_removes_a_killed_index_builds_temporary(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    leftover = cache / "advisories" / ".index-k1ll3d.db"  # NamedTemporaryFile(prefix=".index-", suffix=".db")
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"SQLite format 3\x00" + bytes(4096))
    os.utime(leftover, (0, 0))

    result = invoke(repo, ["cache", "prune"], env={"XPU_RELEASE_CACHE": str(cache)})

    a_users_error(result, 0)
    assert not leftover.exists(), "a killed run's half-written index survives cache prune"


def test_the_index_is_readable_by_the_runners_other_jobs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_an_engine(monkeypatch)
    old = os.umask(0o022)
    try:
        a_users_error(scan(repo, _archive(tmp_path / "all.zip", packages=3, size=2_000)), 0)
    finally:
        os.umask(old)

    (index,) = (tmp_path / "cache" / "advisories").glob("*.sqlite")
    assert stat.S_IMODE(index.stat().st_mode) == 0o644  # today: 0o600


def test_the_index_is_never_written_through_a_link_in_the_cache(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # getting-started.md: "Inside a layout (oci:DIR) and the cache, no folder is followed if it is
    # a symbolic link (exit 13, nothing written there)". build_index makes <cache>/advisories with
    # mkdir(parents=True) and NamedTemporaryFile(dir=...): both follow a link.
    without_an_engine(monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "advisories").symlink_to(elsewhere)

    result = scan(repo, _archive(tmp_path / "all.zip", packages=3, size=2_000))

    a_users_error(result)
    assert list(elsewhere.iterdir()) == [], "the advisory index was written through the cache's link"
