"""Blobs proven by their digest: written through the one way out (``writing.Out``) and put in
place only once their bytes are what the digest names (``write_proven``), and found again on disk
only when they still are (``landed``, ``unchanged``). Whatever a registry or a layout sends for a
digest is held against it here, before anything trusts it."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import OutputError
from .limits import COPY_BLOCK
from .writing import Identity, Out, open_folder


class NotAsNamed(Exception):
    """The bytes given for ``digest`` are not what it names: another hash, another size, or more
    bytes than ``size`` (the copy stopped there). Nothing was put at the target; the caller says
    whose bytes they were (a damaged layout, a registry that lied)."""

    def __init__(self, digest: str, size: int, got: str) -> None:
        super().__init__(f"{digest}: {got}")
        self.digest, self.size, self.got = digest, size, got


def write_proven(
    path: Path,
    digest: str,
    size: int,
    blocks: Iterable[bytes],
    *,
    within: Path | None = None,
    durable: bool = True,
    then: Callable[[], str | None] | None = None,
) -> Identity:
    """``blocks`` at ``path``, put in place only once they are proven to be the ``size`` bytes
    that hash to ``digest`` (``sha256:<hex>``); else ``NotAsNamed`` and nothing is put there. A
    source that sends more than ``size`` bytes is cut off as soon as it does. ``then``, asked
    once the bytes are proven, says what else is wrong with them (None: nothing); a problem is
    ``NotAsNamed`` too, and nothing is put there."""
    h = hashlib.sha256()
    with Out(path, within=within, what=f"blob {digest}", durable=durable) as out:
        for block in blocks:
            if out.size + len(block) > size:
                raise NotAsNamed(digest, size, f"has more than the {size} bytes listed for it")
            h.update(block)
            out.write(block)
        got = "sha256:" + h.hexdigest()
        if out.size != size:
            raise NotAsNamed(digest, size, f"has {out.size} bytes, not the {size} listed for it")
        if got != digest:
            raise NotAsNamed(digest, size, f"hashes to {got}")
        if then is not None and (problem := then()) is not None:
            raise NotAsNamed(digest, size, problem)
        return out.commit()


def landed(path: Path, *, within: Path, size: int) -> tuple[str, Identity] | None:
    """The ``sha256:<hex>`` and identity of the regular file of ``size`` bytes at ``path`` inside
    ``within`` (reached without following a link, the file itself not followed either), or None
    when nothing trustworthy is there: missing, a link, a FIFO, a folder, unreadable, or of
    another size. The size is compared before a byte is read, and at most ``size`` + 1 bytes are
    (a sparse file of a terabyte under an 11-byte blob's name is no blob, found at once)."""
    try:
        folder = open_folder(path.parent, within=within, make=False)
    except (OSError, OutputError):
        return None
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or before.st_size != size:
            return None
        h, read = hashlib.sha256(), 0
        while read <= size and (block := os.read(fd, min(COPY_BLOCK, size + 1 - read))):
            h.update(block)
            read += len(block)
        after = Identity.of(os.fstat(fd))
        return ("sha256:" + h.hexdigest(), after) if read == size and after == Identity.of(before) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def unchanged(path: Path, identity: Identity) -> bool:
    """``path`` (not followed) is still the file ``identity`` was taken of, untouched since."""
    try:
        return Identity.of(path.lstat()) == identity
    except OSError:
        return False
