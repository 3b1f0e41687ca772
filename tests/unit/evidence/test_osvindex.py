"""The index of an advisory archive (``evidence/osvindex.py``): each record stored once however
many packages it names, bounded by the archive's size, written the guarded way, and touched
when a scan uses it (a prune removes the least recently used)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from xpu_release.errors import DamagedFileError
from xpu_release.evidence import osvindex
from xpu_release.evidence.osv import Advisories


def archive_of(path: Path, records: list[dict[str, object]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for r in records:
            z.writestr(f"{r['id']}.json", json.dumps(r))
    return path


def naming(rid: str, packages: int, pad: int = 0) -> dict[str, object]:
    return {
        "id": rid,
        "affected": [{"package": {"ecosystem": "PyPI", "name": f"p{i}"}} for i in range(packages)],
        "database_specific": {"pad": "x" * pad},  # kept whole (details is cut to 200 characters)
    }


def index_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in (cache / "advisories").iterdir())


def test_a_record_naming_a_thousand_packages_is_stored_once_and_found_by_each(tmp_path: Path) -> None:
    record = naming("AMP-1", 1000, pad=200_000)
    archive = archive_of(tmp_path / "all.zip", [record])

    adv = Advisories([archive], tmp_path / "cache")

    assert [a.id for a in adv.lookup("PyPI", "p0")] == ["AMP-1"]
    assert [a.id for a in adv.lookup("PyPI", "P999")] == ["AMP-1"]  # PEP 503, as before
    assert index_bytes(tmp_path / "cache") < 2 * len(json.dumps(record))  # was 1,000 copies
    adv.close()


def test_an_index_past_its_bound_against_the_archive_is_damage_and_nothing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(osvindex, "MIN_INDEX_ALLOWANCE", 1 << 20)
    records = [naming(f"BIG-{i}", 1, pad=200_000) for i in range(20)]  # 4 MB of text
    archive = archive_of(tmp_path / "all.zip", records)  # some 20 KB: 40 times is 800 KB
    assert archive.stat().st_size * osvindex.MAX_INDEX_GROWTH < 4_000_000

    with pytest.raises(DamagedFileError) as refused:
        Advisories([archive], tmp_path / "cache")

    assert refused.value.exit_code == 12
    assert f"{osvindex.MAX_INDEX_GROWTH} times the archive's size" in refused.value.message
    assert list((tmp_path / "cache" / "advisories").iterdir()) == []  # no index, no temporary


def test_an_index_within_its_bound_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(osvindex, "MIN_INDEX_ALLOWANCE", 1 << 20)
    records = [naming(f"OK-{i}", 1, pad=20_000) for i in range(20)]  # 400 KB under 1 MB
    adv = Advisories([archive_of(tmp_path / "all.zip", records)], tmp_path / "cache")

    assert adv.counts.records == 20
    adv.close()


def test_a_scan_touches_the_index_it_uses(tmp_path: Path) -> None:
    archive = archive_of(tmp_path / "all.zip", [naming("T-1", 1)])
    Advisories([archive], tmp_path / "cache").close()
    (index,) = (tmp_path / "cache" / "advisories").iterdir()
    os.utime(index, (0, 0))

    Advisories([archive], tmp_path / "cache").close()

    assert index.stat().st_mtime > 0  # the newest again: a prune by age or size keeps it longest
