"""The repository's own generated files and templates are outside data (issue 53, class 1): a pull
request can put anything at their names. ``render``, ``render --check``, ``render --all
[--check]`` and ``docs [--check]`` read them through the guarded layer and write them inside the
repository, never through a link: no exit 70, no hang, no gigabyte read, no write outside."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ..helpers import run

REF = "training-cpu-pytorch:25.03"
DOCKERFILE = Path("images/training-cpu-pytorch/25.03/Dockerfile")
PAGE = Path("docs/reference/commands.md")
SCHEMA = Path("schema/manifest.schema.json")


def not_utf8(path: Path) -> None:
    path.write_bytes(b"FROM scratch\n\xff\xfe broken \xc3\x28\n")


def sparse(path: Path) -> None:
    path.unlink(missing_ok=True)
    with path.open("wb") as f:
        f.truncate(256 << 20)  # 256 MB of nothing, a few bytes on disk


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


DAMAGE: dict[str, Callable[[Path], None]] = {"not UTF-8": not_utf8, "256 MB sparse": sparse, "a FIFO": fifo}
CHECKS = [(DOCKERFILE, ("render", REF, "--check")), (DOCKERFILE, ("render", "--all", "--check")),
          (SCHEMA, ("render", "--all", "--check")), (PAGE, ("docs", "--check"))]  # fmt: skip


@pytest.fixture
def tree(repo: Path) -> Path:
    """The repository copy with its generated reference pages, current."""
    assert run(repo, "docs").exit_code == 0
    return repo


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize(("generated", "args"), CHECKS)
def test_a_damaged_generated_file_is_stale_named_never_an_internal_error(
    tree: Path, damage: str, generated: Path, args: tuple[str, ...]
) -> None:
    DAMAGE[damage](tree / generated)

    checked = run(tree, *args)

    assert checked.exit_code == 1, checked.output  # stale: the command that mends it is named
    assert generated.as_posix() in checked.stderr
    assert "Traceback" not in checked.output


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize(("generated", "args"), [(DOCKERFILE, ("render", REF)), (PAGE, ("docs",)),
                                                (SCHEMA, ("render", "--all"))])  # fmt: skip
def test_writing_a_damaged_generated_file_replaces_it(
    tree: Path, damage: str, generated: Path, args: tuple[str, ...]
) -> None:
    DAMAGE[damage](tree / generated)

    assert run(tree, *args).exit_code == 0
    assert (tree / generated).is_file()
    assert (tree / generated).read_text("utf-8").strip()


@pytest.mark.parametrize(("generated", "args"), [(DOCKERFILE, ("render", REF)), (PAGE, ("docs",)),
                                                (SCHEMA, ("render", "--all"))])  # fmt: skip
def test_a_generated_file_planted_as_a_link_is_replaced_never_written_through(
    tree: Path, tmp_path: Path, generated: Path, args: tuple[str, ...]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not the repository's\n")
    (tree / generated).unlink()
    (tree / generated).symlink_to(outside)

    assert run(tree, *args).exit_code == 0
    assert outside.read_text() == "not the repository's\n"
    assert not (tree / generated).is_symlink()
    assert run(tree, *(a for a in args if a), "--check").exit_code == 0


def test_a_folder_planted_as_a_link_is_refused_and_nothing_is_written_through_it(
    tree: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tree / "docs" / "reference").rename(tmp_path / "kept")
    (tree / "docs" / "reference").symlink_to(outside)

    written = run(tree, "docs")

    assert written.exit_code == 13, written.output
    assert "docs/reference" in written.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_template_is_a_clear_error_naming_it(repo: Path, damage: str) -> None:
    DAMAGE[damage](repo / "templates" / "Dockerfile.j2")

    rendered = run(repo, "render", REF, "--check")

    assert rendered.exit_code in (2, 3), rendered.output  # 2: the manifest names no usable template
    assert "templates/Dockerfile.j2" in rendered.stderr
    assert "Traceback" not in rendered.output


TEMPLATE_FAULTS = {
    "an include of itself": '{% include "Dockerfile.j2" %}\n',
    "a division by zero": "{{ 1 // 0 }}\n",
    "an operation on the wrong type": '{{ "a" - 1 }}\n',
}


@pytest.mark.parametrize("fault", list(TEMPLATE_FAULTS))
def test_a_template_that_fails_as_it_renders_is_named_never_an_internal_error(repo: Path, fault: str) -> None:
    # Found by a second adversary: only Jinja's own errors were said; these were exit 70.
    partial = repo / "templates" / "partials" / "env.j2"
    partial.write_text(partial.read_text() + TEMPLATE_FAULTS[fault])

    rendered = run(repo, "render", "--all", "--check")

    assert rendered.exit_code == 3, rendered.output
    assert "templates/Dockerfile.j2" in rendered.stderr
    assert "Traceback" not in rendered.output


def test_a_template_planted_as_a_link_is_refused_never_read(repo: Path, tmp_path: Path) -> None:
    # A partial linked to a file of the runner's (a login, a token) would print it in a diff.
    secret = tmp_path / "netrc"
    secret.write_text("machine example.invalid login me password hunter2\n")
    (repo / "templates" / "partials" / "leak.j2").symlink_to(secret)
    partial = repo / "templates" / "partials" / "env.j2"
    partial.write_text(partial.read_text() + '{% include "partials/leak.j2" %}\n')

    rendered = run(repo, "render", REF, "--stdout")

    assert rendered.exit_code == 3, rendered.output
    assert "templates/partials/leak.j2 is a symbolic link" in rendered.stderr
    assert "hunter2" not in rendered.output
