"""Folder trees from outside (an advisories folder, the cache a runner shares), walked and removed
without recursion and to a bounded depth.

Python 3.11's ``Path.rglob``, ``os.walk``, ``os.fwalk`` and ``shutil.rmtree`` recurse once per
level: a tree 1,100 folders deep (2,200 characters of path, far under PATH_MAX) ends them in a
RecursionError. Here a tree is walked with a list for a stack. A folder deeper than
``MAX_FOLDER_DEPTH`` is not entered, nor is one that cannot be listed: each is counted
(``Walk.skipped``), never silent. No link is followed into a folder; a link is yielded as the
entry it is (its own ``lstat``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .limits import MAX_FOLDER_DEPTH

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Found:
    """One entry of a tree: its path, what it is (``lstat``: a link is a link) and its depth (1:
    an entry of the top folder itself)."""

    path: Path
    st: os.stat_result
    depth: int

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


class Walk:
    """The entries under ``top``, each folder's in name order, a folder's before what it holds::

        walk = Walk(top)
        for found in walk: ...
        walk.skipped  # folders not entered (too deep, unreadable) and entries that vanished

    ``enter`` decides whether a folder is entered (default: every one, to ``max_depth``)."""

    def __init__(
        self, top: Path, *, max_depth: int = MAX_FOLDER_DEPTH, enter: Callable[[Found], bool] | None = None
    ) -> None:
        self.top, self.max_depth, self.enter = top, max_depth, enter
        self.skipped = 0

    def __iter__(self) -> Iterator[Found]:
        stack: list[tuple[Path, int]] = [(self.top, 1)]
        while stack:
            folder, depth = stack.pop()
            try:
                with os.scandir(folder) as listing:
                    names = sorted(e.name for e in listing)
            except OSError:  # gone, no permission, a name past PATH_MAX
                self.skipped += 1
                continue
            below: list[tuple[Path, int]] = []
            for name in names:
                path = folder / name
                try:
                    st = path.lstat()
                except OSError:
                    self.skipped += 1
                    continue
                found = Found(path, st, depth)
                yield found
                if found.is_dir and (self.enter is None or self.enter(found)):
                    if depth >= self.max_depth:
                        self.skipped += 1
                    else:
                        below.append((path, depth + 1))
            stack.extend(reversed(below))  # the first name is walked first


def remove_tree(path: Path, *, max_depth: int = MAX_FOLDER_DEPTH) -> bool:
    """Remove ``path``: a folder with everything in it (deepest first, no link followed: each
    folder is opened from its parent's descriptor with ``O_NOFOLLOW``), anything else unlinked.
    True when it is gone; False when something stays (deeper than ``max_depth``, no permission):
    what could be removed is removed."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            try:
                path.unlink()
            except OSError:
                return False
        return True
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    whole = _empty(top, max_depth)
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return whole


def _empty(top: int, max_depth: int) -> bool:
    """Everything in the open folder ``top`` removed (``top`` is closed here); False if
    something stays."""
    whole = True
    stack: list[tuple[int, str, list[str]]] = []  # (folder, its name in its parent, names left)
    try:
        stack.append((top, "", _names(top)))
        while stack:
            fd, own_name, left = stack[-1]
            if not left:
                stack.pop()
                os.close(fd)
                if stack:  # the folder just emptied, removed from its parent
                    try:
                        os.rmdir(own_name, dir_fd=stack[-1][0])
                    except FileNotFoundError:
                        pass
                    except OSError:
                        whole = False
                continue
            name = left.pop()
            try:
                if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=fd)
                elif len(stack) >= max_depth:
                    whole = False
                else:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    stack.append((child, name, _names(child)))
            except FileNotFoundError:
                pass
            except OSError:
                whole = False
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return whole


def _names(fd: int) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError:
        return []
