"""Every writer goes out the guarded way: a command's ``-o`` through a link is refused (the file
it leads to untouched, its mode not widened), the cache's facts never land outside the cache,
records and notes are readable by others."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from xpu_release import settings
from xpu_release.errors import OutputError
from xpu_release.guard.named import write_named
from xpu_release.image import smoke
from xpu_release.image.fetch import fetch
from xpu_release.manifest import Repo
from xpu_release.oci.members import compress, spool_dir
from xpu_release.oci.store import DigestMap, known_config, remember_config

from ..helpers import run
from .hostile import deadline, snapshot

CPU = "training-cpu-pytorch"


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "cache"
    before = settings.current()
    settings.use(settings.Settings(cache=folder))
    yield folder
    settings.use(before)


def test_an_output_option_through_a_link_is_exit_13_and_the_file_it_leads_to_is_untouched(
    repo: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    victim.chmod(0o600)
    (tmp_path / "out.json").symlink_to(victim)

    result = run(repo, "schema", "-o", str(tmp_path / "out.json"))

    assert result.exit_code == 13, result.output
    assert "is a symbolic link" in result.stderr
    assert victim.read_text() == "keep me"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert "Traceback" not in result.output


def test_an_output_file_is_written_whole_readable_by_others_and_keeps_a_mode_it_had(
    repo: Path, tmp_path: Path
) -> None:
    fresh, private = tmp_path / "new" / "schema.json", tmp_path / "private.json"
    private.write_text("old")
    private.chmod(0o600)

    first = run(repo, "schema", "-o", str(fresh))
    second = run(repo, "schema", "-o", str(private))

    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text() == fresh.read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "private.json", "repo"]


LAYER = b"layer bytes" * 100


def _layer(tmp_path: Path) -> Path:
    layer = tmp_path / "layer.tar"
    layer.write_bytes(LAYER)
    return layer


def _compressed(repo: Path, tmp_path: Path) -> None:
    DigestMap("compressed/zlib-6").put("sha256:" + "a" * 64, "sha256:" + "b" * 64)


def _spooled(repo: Path, tmp_path: Path) -> None:  # the publish spool
    with ThreadPoolExecutor(1) as pool:
        compress(_layer(tmp_path), spool_dir(), pool)


def _tested(repo: Path, tmp_path: Path) -> None:
    smoke._mark_tested(Repo(repo).load(CPU, "25.03"), "sha256:" + "c" * 64, "t", 1)


def _fetched(repo: Path, tmp_path: Path) -> None:  # an artifact a build downloads
    fetch(_layer(tmp_path).as_uri(), hashlib.sha256(LAYER).hexdigest(), "f")


# Each folder of the cache a writer puts files under, and that writer.
CACHE_WRITERS: dict[str, Callable[[Path, Path], object]] = {
    "configs": lambda repo, tmp: remember_config(b'{"config":1}'),
    "compressed": _compressed,
    "oci-blobs": _spooled,
    "tested": _tested,
    "blobs": _fetched,
}


@pytest.mark.parametrize("link", sorted(CACHE_WRITERS))
def test_a_cache_folder_that_is_a_link_is_refused_and_nothing_lands_outside(
    cache: Path, repo: Path, tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    (cache / link).symlink_to(outside)
    before = snapshot(outside)

    with pytest.raises(OutputError) as refused:
        CACHE_WRITERS[link](repo, tmp_path)

    assert snapshot(outside) == before
    assert f"{cache / link}: is a symbolic link" in refused.value.message
    assert refused.value.exit_code == 13


@pytest.mark.parametrize("link", sorted(CACHE_WRITERS))
def test_each_cache_writer_writes_inside_the_cache(
    cache: Path, repo: Path, tmp_path: Path, link: str
) -> None:
    CACHE_WRITERS[link](repo, tmp_path)

    made = [p for p in (cache / link).rglob("*") if p.is_file()]
    assert made, f"nothing written under {cache / link}: the case above proves nothing"
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in made if not p.name.startswith(".")), made


def test_cache_facts_are_written_and_read_back(cache: Path) -> None:
    image_id = remember_config(b'{"config":2}')
    facts = DigestMap("compressed/zlib-6")
    facts.put("sha256:" + "a" * 64, "sha256:" + "b" * 64)

    assert known_config(image_id) == b'{"config":2}'
    assert facts.digest("sha256:" + "a" * 64) == "sha256:" + "b" * 64
    assert stat.S_IMODE((cache / "configs" / (image_id[7:] + ".json")).stat().st_mode) == 0o644


# --- files the user names -------------------------------------------------------------------


def test_an_output_that_is_a_link_is_refused_and_the_file_it_leads_to_is_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_bytes(b"mine")
    victim.chmod(0o600)
    planted = tmp_path / "shared" / "scan.sarif"
    planted.parent.mkdir()
    planted.symlink_to(victim)

    with pytest.raises(OutputError) as refused:
        write_named(planted, b"{}", what="SARIF")

    assert victim.read_bytes() == b"mine"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert planted.is_symlink()
    assert "is a symbolic link" in refused.value.message
    assert refused.value.exit_code == 13


def test_a_dangling_link_as_output_creates_nothing_where_it_leads(tmp_path: Path) -> None:
    (tmp_path / "notes.md").symlink_to(tmp_path / "elsewhere" / "planted")

    with pytest.raises(OutputError):
        write_named(tmp_path / "notes.md", b"# notes", what="notes")

    assert not (tmp_path / "elsewhere").exists()


def test_an_output_file_is_written_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "out" / "new" / "scan.sarif"
    write_named(path, b"first", what="SARIF")
    path.chmod(0o640)

    write_named(path, b"second", what="SARIF")

    assert path.read_bytes() == b"second"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_fifo_and_a_device_are_written_to_as_streams(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()

    with deadline(10):
        write_named(fifo, b"through the pipe", what="notes")
        reader.join()
    write_named(Path("/dev/null"), b"gone", what="notes")
    with pytest.raises(OutputError) as full:
        write_named(Path("/dev/full"), b"no room", what="notes")

    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still the pipe, not replaced by a file
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)
    assert "/dev/full" in full.value.message


def test_a_folder_as_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError) as refused:
        write_named(tmp_path, b"x", what="notes")

    assert "is a directory" in refused.value.message


def test_the_systems_own_stream_links_are_written_through(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        with deadline(5):
            write_named(Path(f"/dev/fd/{write_end}"), b"one ", what="SARIF")
            write_named(Path(f"/proc/self/fd/{write_end}"), b"two", what="SARIF")
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"one two"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@pytest.mark.parametrize(
    "spelled",
    [
        lambda link: Path(f"/dev/..{link}"),  # /dev/../tmp/…: spelled under /dev, is not
        lambda link: Path(f"/proc/self/cwd/{link.name}"),  # the current folder, through /proc
        lambda link: Path(f"/dev/fd/../../..{link}"),  # out of the fd folder again
        lambda link: link,
    ],
    ids=["/dev/..", "/proc/self/cwd", "/dev/fd/../../..", "as it is"],
)
def test_a_link_of_anyones_is_refused_however_it_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelled: object
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "out.sarif"
    link.symlink_to(victim)
    monkeypatch.chdir(tmp_path)

    with pytest.raises(OutputError) as refused:
        write_named(spelled(link), b"{}", what="SARIF")  # type: ignore[operator]

    assert "is a symbolic link" in refused.value.message
    assert victim.read_text() == "keep me"
