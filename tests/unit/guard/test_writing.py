"""The one way out (``guard/writing.py``): whole or not at all, never through a link, readable by
others and never widened, per-run temporaries that a sweep removes only when their run is dead,
and a blob put in place only once it is proven to be what its digest names."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import OutputError
from xpu_release.guard.limits import TEMPORARY_GRACE_SECONDS
from xpu_release.guard.proven import NotAsNamed, landed, unchanged, write_proven
from xpu_release.guard.writing import LinkRefused, Out, is_temporary, sweep, write_bytes

from .hostile import deadline, snapshot


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- whole or not at all --------------------------------------------------------------------


def test_a_new_file_is_readable_by_others_and_a_replaced_one_keeps_its_mode(tmp_path: Path) -> None:
    fresh, private = tmp_path / "fresh.json", tmp_path / "private.json"
    private.write_bytes(b"old")
    private.chmod(0o600)

    write_bytes(fresh, b"{}")
    write_bytes(private, b"new")

    assert mode(fresh) == 0o644 & ~0o022  # the umask of the test run is 022
    assert mode(private) == 0o600  # never widened
    assert private.read_bytes() == b"new"
    assert names(tmp_path) == ["fresh.json", "private.json"]  # no temporary left


def test_an_abandoned_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_bytes(b"old")

    class Killed(Exception):
        pass

    def killed_halfway() -> None:
        with Out(path) as out:
            out.write(b"half of the new")
            raise Killed

    with pytest.raises(Killed):
        killed_halfway()

    assert path.read_bytes() == b"old"
    assert names(tmp_path) == ["index.json"]


def test_two_writers_of_one_file_never_share_a_temporary_and_one_whole_file_wins(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    a, b = b"a" * 100_000, b"b" * 100_000
    with Out(path) as first, Out(path) as second:  # both under way at once
        first.write(a)
        second.write(b)
        assert len([n for n in names(tmp_path) if is_temporary(n)]) == 2
        first.commit()
        assert path.read_bytes() == a
        second.commit()

    assert path.read_bytes() == b
    assert names(tmp_path) == ["blob"]


def test_the_name_of_a_link_is_replaced_by_the_file_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    outside.chmod(0o600)
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "index.json").symlink_to(outside)

    write_bytes(layout / "index.json", b"{}", within=layout)

    assert outside.read_bytes() == b"precious"
    assert mode(outside) == 0o600
    assert not (layout / "index.json").is_symlink()
    assert (layout / "index.json").read_bytes() == b"{}"


@pytest.mark.parametrize("link", ["blobs", "blobs/sha256"])
def test_a_folder_inside_the_layout_that_is_a_link_is_refused_and_nothing_is_written_outside(
    tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    (outside / "sha256").mkdir(parents=True)
    layout = tmp_path / "layout"
    (layout / link).parent.mkdir(parents=True, exist_ok=True)
    (layout / link).symlink_to(outside if link == "blobs" else outside / "sha256")
    before = snapshot(outside)

    with pytest.raises(LinkRefused) as refused:
        write_bytes(layout / "blobs" / "sha256" / ("a" * 64), b"layer", within=layout)

    assert snapshot(outside) == before
    assert refused.value.exit_code == 13
    assert f"{layout / link}: is a symbolic link" in refused.value.message


def test_the_named_root_itself_may_be_a_link_the_user_chose(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "layout"
    real.mkdir(parents=True)
    (tmp_path / "usb").symlink_to(real)

    write_bytes(tmp_path / "usb" / "blobs" / "sha256" / "x", b"1", within=tmp_path / "usb")

    assert (real / "blobs" / "sha256" / "x").read_bytes() == b"1"


def test_a_folder_where_the_file_goes_is_an_output_error_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "index.json").mkdir()

    with pytest.raises(OutputError) as refused:
        write_bytes(tmp_path / "index.json", b"{}", what="index.json")

    assert "index.json" in refused.value.message
    assert "directory" in refused.value.message


# --- proven before it is put in place -------------------------------------------------------


def test_a_blob_is_put_in_place_only_when_it_is_the_bytes_its_digest_names(tmp_path: Path) -> None:
    data = b"layer bytes" * 1000
    path = tmp_path / "blob"

    with pytest.raises(NotAsNamed) as other:
        write_proven(path, digest(b"something else"), len(data), [data])
    with pytest.raises(NotAsNamed) as short:
        write_proven(path, digest(data), len(data) + 1, [data])
    identity = write_proven(path, digest(data), len(data), [data[:10], data[10:]])

    assert "hashes to" in other.value.got
    assert f"has {len(data)} bytes" in short.value.got
    assert path.read_bytes() == data
    assert unchanged(path, identity)
    assert names(tmp_path) == ["blob"]


def test_what_then_finds_wrong_with_proven_bytes_keeps_them_out_and_is_asked_only_of_proven_ones(
    tmp_path: Path,
) -> None:
    """``then`` (mirror's eStargz TOC check) is asked once the bytes are the blob: its problem
    keeps them out as a hash would; bytes that are not the blob are named by their hash, and
    ``then`` is never asked of them."""
    data = b"layer bytes" * 1000
    path = tmp_path / "blob"
    asked: list[str] = []

    def toc_lies() -> str:
        asked.append("asked")
        return "its TOC lies"

    with pytest.raises(NotAsNamed) as lies:
        write_proven(path, digest(data), len(data), [data], then=toc_lies)
    with pytest.raises(NotAsNamed) as other:
        write_proven(path, digest(b"something else"), len(data), [data], then=toc_lies)
    assert names(tmp_path) == []  # neither was put in place, nor left a temporary
    identity = write_proven(path, digest(data), len(data), [data], then=lambda: None)

    assert lies.value.got == "its TOC lies"
    assert "hashes to" in other.value.got
    assert asked == ["asked"]  # once: of the proven bytes alone
    assert unchanged(path, identity)
    assert names(tmp_path) == ["blob"]


def test_a_source_that_sends_more_than_the_size_listed_is_cut_off_at_once(tmp_path: Path) -> None:
    sent = [0]

    def endless() -> Iterator[bytes]:
        while True:
            sent[0] += 1
            yield b"x" * 1024

    with deadline(10), pytest.raises(NotAsNamed) as flood:
        write_proven(tmp_path / "blob", digest(b"x" * 11), 11, endless())

    assert "more than the 11 bytes" in flood.value.got
    assert sent[0] == 1  # nothing past the first block that broke the size
    assert names(tmp_path) == []


def test_landed_never_opens_a_fifo_for_long_nor_follows_a_link(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "outside").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "file").write_bytes(b"x")

    with deadline(5):
        found = {n: landed(tmp_path / n, within=tmp_path, size=1) for n in ("fifo", "link", "file", "gone")}

    assert found["fifo"] is None
    assert found["link"] is None
    assert found["gone"] is None
    assert found["file"] is not None
    assert found["file"][0] == digest(b"x")


def test_a_file_changed_after_it_was_proven_is_not_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    identity = write_bytes(path, b"abc")
    path.write_bytes(b"abd")  # in place, same size

    assert not unchanged(path, identity)


# --- temporaries of killed runs -------------------------------------------------------------


def test_a_sweep_removes_a_dead_runs_temporary_but_not_one_being_written(tmp_path: Path) -> None:
    dead = tmp_path / ".blob.999999-0000abcd.tmp"  # its writer was killed: nobody holds it
    dead.write_bytes(b"half")
    (tmp_path / "young.tmp").write_bytes(b"not a temporary's name")
    os.mkfifo(tmp_path / ".fifo.1-0000abcd.tmp")  # a temporary's name, but no file of ours: left alone
    later = dead.stat().st_mtime + TEMPORARY_GRACE_SECONDS + 1

    with Out(tmp_path / "blob") as live:
        live.write(b"under way")
        removed = sweep(tmp_path, now=later)
        live.commit()

    assert removed == [dead.name]
    assert names(tmp_path) == [".fifo.1-0000abcd.tmp", "blob", "young.tmp"]


def test_a_sweep_leaves_a_temporary_younger_than_the_grace(tmp_path: Path) -> None:
    fresh = tmp_path / ".blob.1-0000abcd.tmp"
    fresh.write_bytes(b"just made, perhaps not locked yet")

    assert is_temporary(fresh.name)
    assert sweep(tmp_path) == []
    assert fresh.exists()


@pytest.mark.parametrize(
    "theirs", [".notes.tmp", ".other-client-upload.tmp", ".blob.123.tmp", ".blob.1-XYZXYZXY.tmp", ".tmp"]
)
def test_a_sweep_removes_only_names_of_our_own_pattern(tmp_path: Path, theirs: str) -> None:
    (tmp_path / theirs).write_bytes(b"another tool's")
    old = time.time() + TEMPORARY_GRACE_SECONDS + 1

    assert not is_temporary(theirs)
    assert sweep(tmp_path, now=old) == []
    assert names(tmp_path) == [theirs]


def test_landed_compares_the_size_before_it_reads_and_reads_no_further(tmp_path: Path) -> None:
    with (tmp_path / "sparse").open("wb") as f:
        f.truncate(1 << 40)  # a terabyte of nothing under an 11-byte blob's name
    (tmp_path / "blob").write_bytes(b"layer bytes")

    with deadline(5):  # hashed to its end: some 40 minutes
        assert landed(tmp_path / "sparse", within=tmp_path, size=11) is None
    found = landed(tmp_path / "blob", within=tmp_path, size=11)

    assert found is not None
    assert found[0] == digest(b"layer bytes")
    assert landed(tmp_path / "blob", within=tmp_path, size=10) is None  # one byte more than listed


# --- a file put in place only where nothing is -------------------------------------------------


@pytest.mark.parametrize("there", ["a file", "a link to a file", "a dangling link"])
def test_keep_existing_leaves_whatever_is_at_the_name_and_no_temporary(tmp_path: Path, there: str) -> None:
    folder, victim = tmp_path / "manifests", tmp_path / "victim"
    folder.mkdir()
    if there == "a file":
        (folder / "25.04.yaml").write_bytes(b"theirs")
    else:
        if there == "a link to a file":
            victim.write_bytes(b"precious")
        (folder / "25.04.yaml").symlink_to(victim)
    before = snapshot(tmp_path)

    with pytest.raises(FileExistsError):
        write_bytes(folder / "25.04.yaml", b"ours", within=folder, keep_existing=True)

    assert snapshot(tmp_path) == before  # nothing changed, nothing created where a link leads


def test_keep_existing_puts_a_new_file_in_place_whole(tmp_path: Path) -> None:
    write_bytes(tmp_path / "25.04.yaml", b"ours", within=tmp_path, keep_existing=True)

    assert (tmp_path / "25.04.yaml").read_bytes() == b"ours"
    assert mode(tmp_path / "25.04.yaml") == 0o644
    assert os.listdir(tmp_path) == ["25.04.yaml"]  # noqa: PTH208


def test_a_file_named_by_what_it_holds_is_committed_under_that_name(tmp_path: Path) -> None:
    with Out(tmp_path / "layer", within=tmp_path) as out:
        out.write(b"blob")
        out.commit("sha256-" + hashlib.sha256(b"blob").hexdigest())

    assert [p.read_bytes() for p in tmp_path.iterdir()] == [b"blob"]
    assert out.path.name == "sha256-" + hashlib.sha256(b"blob").hexdigest()
