"""Folders nested deeper than Python's recursion limit. Python 3.11's ``Path.rglob`` and
``os.walk`` recurse once per level, so a tree 1,100 folders deep (2,200 characters of path, far
under PATH_MAX) is a RecursionError: ``scan --advisories DIR`` and ``cache du`` / ``cache prune``
end in exit 70. outside-data.md bounds JSON and YAML nesting for this reason; a folder tree is
outside data as much (an advisories folder, a cache a runner shares)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cli.hostile import a_users_error, advisory, invoke, without_an_engine
from ..cli.test_hostile_inputs import scan
from ..guard.hostile import chain

DEPTH = 1100


@pytest.fixture
def deep() -> Iterator[list[Path]]:
    """Make trees ``DEPTH`` folders deep (``a/a/…``) under the folders put in the list; each is
    removed at the end one level at a time (``shutil.rmtree`` recurses too: pytest's own clean-up
    of old temporary folders would meet the same error)."""
    made: list[Path] = []
    yield made
    for top in made:
        for level in range(DEPTH, 0, -1):
            with contextlib.suppress(FileNotFoundError):  # a fixed prune may have removed it
                top.joinpath(*["a"] * level).rmdir()


def _tree(top: Path, made: list[Path]) -> None:
    made.append(top)
    chain(top, DEPTH)


def test_an_advisories_folder_nested_1100_deep_is_no_internal_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deep: list[Path]
) -> None:
    without_an_engine(monkeypatch)
    osv = tmp_path / "osv"
    _tree(osv, deep)
    (osv / "real.json").write_text(json.dumps(advisory()))

    result = scan(repo, osv)

    a_users_error(result)  # today: exit 70, RecursionError


@pytest.mark.parametrize(
    "argv", [["cache", "du"], ["cache", "prune", "--keep-storage", "0"]], ids=["du", "prune"]
)
def test_a_cache_folder_nested_1100_deep_is_no_internal_error(
    repo: Path, tmp_path: Path, deep: list[Path], argv: list[str]
) -> None:
    cache = tmp_path / "cache"
    _tree(cache / "facts-of-some-kind", deep)

    result = invoke(repo, argv, env={"XPU_RELEASE_CACHE": str(cache)})

    a_users_error(result, 0)  # today: exit 70, RecursionError
