"""The repository's own generated files (rendered Dockerfiles, the reference pages, the manifest
schema), read and written as outside data: a pull request can put anything at their names.

- ``committed``: what the file holds, as text for a diff: absent is ``None``; a file that is not
  a regular file, is larger than ``MAX_GENERATED_BYTES`` (a sparse file of gigabytes is a few
  bytes on disk) or is not UTF-8 is never read whole nor decoded strictly: it is stale, and its
  text is a one-line description, so ``--check`` says which file and the command that mends it.
- ``is_current``: whether the file holds exactly ``data`` (its size first: nothing is read when
  it differs).
- ``write_generated``: the new text, whole or not at all, inside the repository: a folder on the
  way that is a link (``docs/reference`` to somewhere else) is refused (exit 13), and a link at
  the file's own name is replaced by the file, never written through (``writing.Out``). Every
  writer into the repository or ``out/`` keeps to ``within_repository``'s rule: ``out/``
  itself may be a link the user made; nothing the repository holds below it or below the
  repository's root is followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DamagedFileError
from ..files import kind_of
from .reading import file_chunks
from .writing import open_folder, write_bytes

MAX_GENERATED_BYTES = 4 << 20  # the largest generated file is a reference page of some 100 KB


def _size(path: Path) -> int | None:
    """The size of the regular file at ``path`` itself (never a link's target); else None."""
    if path.is_symlink() or kind_of(path) != "file":
        return None
    try:
        return path.stat().st_size
    except OSError:
        return None


def committed(path: Path, *, what: str) -> str | None:
    """The text at ``path`` for a diff; ``None`` when nothing is there."""
    if not path.is_symlink() and kind_of(path) == "missing":
        return None
    size = _size(path)
    if size is None:
        return f"({what} is not a regular file: a generated file is never a link, folder or device)\n"
    if size > MAX_GENERATED_BYTES:
        return f"({what} holds {size} bytes: more than a generated file ({MAX_GENERATED_BYTES}))\n"
    try:
        data = b"".join(file_chunks(path, what=what, limit=MAX_GENERATED_BYTES))
        return data.decode("utf-8")
    except DamagedFileError as exc:
        return f"({exc.message})\n"
    except UnicodeDecodeError:
        return f"({what} is not UTF-8 text)\n"


def is_current(path: Path, data: bytes, *, what: str) -> bool:
    """True when ``path`` is a regular file (not a link) holding exactly ``data``."""
    if _size(path) != len(data):
        return False
    try:
        return b"".join(file_chunks(path, what=what, limit=len(data))) == data
    except DamagedFileError:
        return False  # it changed while read: not what it should be


def within_repository(root: Path, path: Path) -> Path | None:
    """Where a write of ``path`` must stay (``writing.Out``'s ``within``): the repository
    ``root`` for a file of its own (``images/``, ``manifests/``, ``docs/``), nothing below it
    followed; ``root/out`` for one under ``out/``, which may itself be a link the user made (an
    ``out/`` on another disk) while nothing under it is followed; None for a path outside the
    repository, which the user named and is theirs (followed)."""
    top = lexical(root)
    try:
        inside = lexical(path).relative_to(top)
    except ValueError:
        return None
    return top / "out" if inside.parts[:1] == ("out",) and len(inside.parts) > 1 else top


def write_generated(path: Path, data: bytes, *, root: Path | None, what: str) -> None:
    """``data`` at ``path``, a file inside the repository ``root`` (None: a path the user named),
    never through a link."""
    within = within_repository(root, path) if root is not None else None
    write_bytes(lexical(path), data, within=within, what=what)


def open_repository_folder(root: Path, folder: Path) -> int:
    """A descriptor of ``folder`` (made where missing), entered as a write into it would be
    (``within_repository``'s rule; a folder outside the repository is the user's, followed).
    The caller closes it. ``LinkRefused`` (exit 13) for a link on the way, OSError otherwise."""
    return open_folder(lexical(folder), within=within_repository(root, folder / "_"), make=True)


def lexical(path: Path) -> Path:
    """``path`` made absolute by its words alone (``..`` taken away, no link followed)."""
    return Path(os.path.normpath(path.absolute()))
