"""Reading the files a user or the repository names, with every way a path can be wrong told in
words: missing, a directory, a FIFO or device (reading one would hang), a dangling or looping
symbolic link, unreadable, a name too long. A leaf module: it imports nothing of ours."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["missing", "file", "directory", "special", "dangling-link", "link-loop", "unreadable"]


class FileProblem(Exception):
    """Why ``path`` cannot be read as a file; ``missing`` when nothing is there at all."""

    def __init__(self, path: Path, why: str, *, missing: bool = False) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why
        self.missing = missing


def kind_of(path: Path) -> Kind:
    """What is at ``path``, without ever opening it."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "link-loop"
        if exc.errno == errno.ENAMETOOLONG:
            return "missing"  # no file can have that name
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            try:
                path.lstat()
            except OSError:
                return "missing"
            return "dangling-link"
        return "unreadable"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "special"


_WHY: dict[Kind, str] = {
    "directory": "is a directory",
    "special": "is a FIFO, socket or device",
    "dangling-link": "is a symbolic link to nothing",
    "link-loop": "is a symbolic link loop",
}


def read_regular(path: Path, *, limit: int | None = None, what: str = "file") -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``), or a ``FileProblem``."""
    kind = kind_of(path)
    if kind == "missing":
        raise FileProblem(path, f"no such {what}", missing=True)
    if kind in _WHY:
        raise FileProblem(path, f"{_WHY[kind]}, not a {what} (a regular file)")
    try:
        size = path.stat().st_size
        if limit is not None and size > limit:
            raise FileProblem(path, f"the {what} is {size} bytes; the limit is {limit}")
        with path.open("rb") as f:
            return f.read()
    except OSError as exc:
        raise FileProblem(path, f"cannot read the {what} ({describe(exc)})") from None


def describe(exc: OSError) -> str:
    """An OSError's reason in words, without its (possibly huge) file name."""
    if exc.strerror:
        return exc.strerror
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return type(exc).__name__


def sha256_file(path: Path) -> str:
    """The hex sha256 of the file at ``path``, read in blocks (never whole into memory)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def touch(path: Path) -> None:
    """Mark a cache entry used now: a prune removes the least recently used first."""
    with contextlib.suppress(OSError):  # read-only or gone: it is only an ordering hint
        os.utime(path)
