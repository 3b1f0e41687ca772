"""Writes into the repository and ``out/`` never follow a link planted there (issue 53, class 1):
a pull request can put a link at ``out/releases/<image>``, ``images/<image>/<version>`` or a
release's ``.watch`` history folder, and a CI job that writes there then wrote wherever it
pointed. The rule, one for every writer (``guard.generated.within_repository``): ``out/`` itself
may be a link the user made (an ``out/`` on another disk); nothing below it, nor below the
repository's root, is followed; a path the user names outside the repository is theirs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from xpu_release.errors import OutputError
from xpu_release.image.lock import load_lock
from xpu_release.image.relock import write_lock
from xpu_release.manifest import Repo
from xpu_release.release.model import history
from xpu_release.release.model import record as records

from ..release.test_record import COMPLETE

IMAGE, VERSION = "training-cpu-pytorch", "25.03"


def planted(link: Path, outside: Path) -> Path:
    """``link`` made a link to the folder ``outside`` (made, empty)."""
    outside.mkdir(parents=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    return outside


def test_a_record_folder_planted_as_a_link_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = planted(repo / "out" / "releases" / IMAGE, tmp_path / "elsewhere")

    with pytest.raises(OutputError, match="symbolic link"):
        records.write(COMPLETE, records.default_path(repo, IMAGE, VERSION), repo)

    assert list(outside.iterdir()) == []


def test_an_out_folder_the_user_linked_to_another_disk_is_written_through(repo: Path, tmp_path: Path) -> None:
    disk = planted(repo / "out", tmp_path / "other-disk")

    records.write(COMPLETE, records.default_path(repo, IMAGE, VERSION), repo)

    assert (disk / "releases" / IMAGE / f"{VERSION}.json").is_file()


def test_a_history_folder_planted_as_a_link_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = planted(history.folder(repo, IMAGE, VERSION), tmp_path / "elsewhere")

    with pytest.raises(OutputError, match="symbolic link"):
        history.append(repo, IMAGE, VERSION, {"seen": []}, datetime(2026, 12, 3, tzinfo=UTC))

    assert list(outside.iterdir()) == []


def test_a_history_is_written_where_it_was(repo: Path) -> None:
    written = history.append(repo, IMAGE, VERSION, {"seen": []}, datetime(2026, 12, 3, tzinfo=UTC))

    assert written.parent == history.folder(repo, IMAGE, VERSION)
    assert written.is_file()


def test_an_image_folder_planted_as_a_link_is_refused_for_its_lock(repo: Path, tmp_path: Path) -> None:
    spec = Repo(repo).load_ref(f"{IMAGE}:{VERSION}")
    lock = load_lock(Path(__file__).resolve().parents[3], spec)  # the committed lock's text
    folder = repo / "images" / IMAGE / VERSION
    kept = tmp_path / "kept"
    folder.rename(kept)
    outside = planted(folder, tmp_path / "elsewhere")

    with pytest.raises(OutputError, match="symbolic link"):
        write_lock(repo, spec, lock)

    assert list(outside.iterdir()) == []
