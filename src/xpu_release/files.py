"""What is at a path a user or the repository names, told in words without opening it: missing,
a directory, a FIFO or device (reading one would hang), a dangling or looping symbolic link,
unreadable, a name too long; an OSError's reason; a file's hash; a cache entry's use. Reading
the bytes of outside files is the guarded layer's (``guard.reading``). A leaf module: it imports
nothing of ours."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["missing", "file", "directory", "special", "dangling-link", "link-loop", "unreadable"]


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
