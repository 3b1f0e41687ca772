"""Every writer goes out the guarded way: a command's ``-o`` through a link is refused (the file
it leads to untouched, its mode not widened), the cache's facts never land outside the cache,
records and notes are readable by others."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release import settings
from xpu_release.errors import OutputError
from xpu_release.oci.store import DigestMap, known_config, remember_config

from ..helpers import run
from .hostile import snapshot


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


@pytest.mark.parametrize("link", ["configs", "compressed"])
def test_a_cache_folder_that_is_a_link_is_refused_and_nothing_lands_outside(
    cache: Path, tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    (cache / link).symlink_to(outside)
    before = snapshot(outside)

    def write() -> None:
        if link == "configs":
            remember_config(b'{"config":1}')
        else:
            DigestMap("compressed/zlib-6").put("sha256:" + "a" * 64, "sha256:" + "b" * 64)

    with pytest.raises(OutputError) as refused:
        write()

    assert snapshot(outside) == before
    assert f"{cache / link}: is a symbolic link" in refused.value.message


def test_cache_facts_are_written_and_read_back(cache: Path) -> None:
    image_id = remember_config(b'{"config":2}')
    facts = DigestMap("compressed/zlib-6")
    facts.put("sha256:" + "a" * 64, "sha256:" + "b" * 64)

    assert known_config(image_id) == b'{"config":2}'
    assert facts.digest("sha256:" + "a" * 64) == "sha256:" + "b" * 64
    assert stat.S_IMODE((cache / "configs" / (image_id[7:] + ".json")).stat().st_mode) == 0o644
