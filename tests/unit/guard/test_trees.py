"""Folder trees from outside (``guard/trees.py``): walked and removed without recursion, to a
bounded depth, never through a link, what is not walked or not removed counted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.guard.limits import MAX_FOLDER_DEPTH
from xpu_release.guard.trees import Walk, remove_tree

from .hostile import chain

PAST_RECURSION = 1100  # deeper than Python's recursion limit: rglob, os.walk and rmtree crash


@pytest.fixture
def tidy() -> Iterator[list[Path]]:
    """Chains under the folders put in the list removed at the end: down by descriptors to the
    deepest, then up by ``..``, emptying each level (pytest's own clean-up recurses)."""
    made: list[Path] = []
    yield made
    for top in made:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        depth = 0
        while "a" in os.listdir(fd):  # noqa: PTH208  (a descriptor)
            inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, depth = inner, depth + 1
        for _ in range(depth):
            for name in os.listdir(fd):  # noqa: PTH208  (a descriptor)
                os.unlink(name, dir_fd=fd)
            outer = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = outer
            os.rmdir("a", dir_fd=fd)
        os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_is_walked_to_the_bound_and_the_rest_counted(
    tmp_path: Path, tidy: list[Path]
) -> None:
    deepest = chain(tmp_path / "top", PAST_RECURSION)
    tidy.append(tmp_path / "top")
    (tmp_path / "top" / "shallow.json").write_text("{}")
    (deepest / "deep.json").write_text("{}")

    walk = Walk(tmp_path / "top")
    found = list(walk)

    assert max(f.depth for f in found) == MAX_FOLDER_DEPTH
    assert "shallow.json" in {f.path.name for f in found}
    assert "deep.json" not in {f.path.name for f in found}
    assert walk.skipped == 1  # the one folder past the bound, not entered


def test_a_walk_never_enters_a_link_and_yields_it_as_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (tmp_path / "top").mkdir()
    (tmp_path / "top" / "link").symlink_to(outside)
    (tmp_path / "top" / "sub").mkdir()
    (tmp_path / "top" / "sub" / "b.json").write_text("{}")

    found = {f.path.relative_to(tmp_path / "top").as_posix(): f for f in Walk(tmp_path / "top")}

    assert sorted(found) == ["link", "sub", "sub/b.json"]
    assert not found["link"].is_dir


def test_enter_keeps_a_walk_out_of_the_folders_it_refuses(tmp_path: Path) -> None:
    for name in ("keep/x", "skip/y"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("1")

    walk = Walk(tmp_path, enter=lambda f: f.path.name != "skip")

    assert sorted(f.path.name for f in walk) == ["keep", "skip", "x"]
    assert walk.skipped == 0  # refused by the caller, not skipped


def test_a_tree_within_the_bound_is_removed_whole_deeper_than_recursion_allows(tmp_path: Path) -> None:
    deepest = chain(tmp_path / "entry", MAX_FOLDER_DEPTH - 1)
    (deepest / "f").write_text("1")

    assert remove_tree(tmp_path / "entry") is True
    assert not (tmp_path / "entry").exists()


def test_a_tree_past_the_bound_is_removed_as_far_as_it_goes_and_says_so(
    tmp_path: Path, tidy: list[Path]
) -> None:
    chain(tmp_path / "entry", MAX_FOLDER_DEPTH + 5)
    tidy.append(tmp_path / "entry")
    (tmp_path / "entry" / "beside").write_text("1")

    assert remove_tree(tmp_path / "entry") is False
    assert not (tmp_path / "entry" / "beside").exists()  # what could go, went
    assert (tmp_path / "entry" / "a").is_dir()


def test_removing_never_follows_a_link_inside(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data").write_text("keep")
    (tmp_path / "entry" / "sub").mkdir(parents=True)
    (tmp_path / "entry" / "sub" / "link").symlink_to(outside)
    (tmp_path / "entry" / "file-link").symlink_to(outside / "data")

    assert remove_tree(tmp_path / "entry") is True
    assert (outside / "data").read_text() == "keep"
    assert not (tmp_path / "entry").exists()


def test_removing_a_link_or_a_file_unlinks_it_and_a_missing_path_is_gone_already(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "file").write_text("1")

    assert remove_tree(tmp_path / "link") is True
    assert remove_tree(tmp_path / "file") is True
    assert remove_tree(tmp_path / "gone") is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
