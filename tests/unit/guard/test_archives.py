"""An advisory archive is read member by member, bounded before a byte is inflated: a zip bomb,
an encrypted member, an unknown method, a corrupt member or one that lies about its size is
damage (exit 12) naming the archive and the member; memory stays at one member."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from xpu_release.errors import DamagedFileError
from xpu_release.evidence.osv import Advisories
from xpu_release.guard import archives, limits

RECORD = json.dumps({"id": "TEST-1", "affected": [{"package": {"ecosystem": "PyPI", "name": "demo"}}]})


def archive(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def patched(path: Path, *, method: int | None = None, flags: int | None = None, size: int | None = None,
            flip_at: int | None = None) -> Path:  # fmt: skip
    """``path``'s one member as a hostile writer would leave it: another compression method, the
    encryption flag, a smaller size declared, or a byte of its data changed."""
    data = bytearray(path.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    for offset, at_method, at_size in ((local, 8, 22), (central, 10, 24)):
        if method is not None:
            data[offset + at_method : offset + at_method + 2] = method.to_bytes(2, "little")
        if flags is not None:
            data[offset + at_method - 2 : offset + at_method] = flags.to_bytes(2, "little")
        if size is not None:
            data[offset + at_size : offset + at_size + 4] = size.to_bytes(4, "little")
    if flip_at is not None:
        data[local + 30 + len("a.json") + flip_at] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def read_all(path: Path) -> list[tuple[str, bytes]]:
    return list(archives.members(path, what=f"advisories: {path}", wanted=lambda n: n.endswith(".json")))


def test_a_record_archive_is_read_member_by_member(tmp_path: Path) -> None:
    path = archive(tmp_path / "all.zip", {"a.json": RECORD.encode(), "b.txt": b"x", "d/": b""})

    assert read_all(path) == [("a.json", RECORD.encode())]


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    # 8 MiB of zeros deflate to 8 KiB: 1,000 times, past the bound of 200 (a 2 MB archive that
    # inflates to 4.3 GB is the same shape at scale)
    path = archive(tmp_path / "all.zip", {"a.json": bytes(8 << 20)})

    with pytest.raises(DamagedFileError, match=r"member a\.json inflates \d+ times .* the limit is 200"):
        read_all(path)


def test_a_member_past_the_size_bound_is_refused_as_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_ADVISORY_BYTES", 1000)
    path = archive(tmp_path / "all.zip", {"a.json": b"[" + b"1," * 600 + b"1]"}, zipfile.ZIP_STORED)

    with pytest.raises(DamagedFileError, match=r"member a\.json declares 1203 bytes; the limit is 1000"):
        read_all(path)


def test_too_many_members_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_ARCHIVE_MEMBERS", 3)
    path = archive(tmp_path / "all.zip", {f"{i}.json": b"{}" for i in range(4)})

    with pytest.raises(DamagedFileError, match="4 members; the limit is 3"):
        read_all(path)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ({"flags": 0x1}, "member a.json is encrypted"),
        ({"method": 99}, "member a.json is compressed with method 99; only stored and deflated"),
        ({"method": zipfile.ZIP_BZIP2}, "method 12"),
        ({"flip_at": 3}, "member a.json is damaged"),
        ({"size": 10}, "member a.json is damaged"),  # it inflates past the size its headers declare
    ],
    ids=["encrypted", "unknown method", "bzip2", "corrupt", "lies about its size"],
)
def test_a_hostile_member_is_damage_naming_archive_and_member(
    tmp_path: Path, damage: dict[str, int], said: str
) -> None:
    path = patched(archive(tmp_path / "all.zip", {"a.json": RECORD.encode() * 20}), **damage)

    with pytest.raises(DamagedFileError) as refused:
        Advisories([path], tmp_path / "cache")
    assert said in refused.value.message
    assert str(path) in refused.value.message


def test_what_is_not_a_zip_archive_is_damage_too(tmp_path: Path) -> None:
    path = tmp_path / "all.zip"
    path.write_bytes(b"PK\x03\x04 not really")

    with pytest.raises(DamagedFileError, match=r"not a readable zip archive \(.*\); download it again"):
        Advisories([path], tmp_path / "cache")
