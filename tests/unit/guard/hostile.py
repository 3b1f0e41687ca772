"""A file system that attacks the writer: what can sit at a path we write (links that lead out,
FIFOs, folders where files go, read-only folders, another's files), a deadline for each
example (a hang fails, it does not stall the suite), and snapshots that show what changed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

SHAPES = (
    "absent",
    "file",  # another's file, 0600, with content of its own
    "folder",
    "link-out-file",  # a link to a file outside the folder we write
    "link-out-folder",  # a link to a folder outside
    "dangling-out",  # a link to a name outside that does not exist yet
    "loop",
    "fifo",
    "read-only-folder",
)


def plant(path: Path, shape: str, outside: Path) -> None:
    """Put ``shape`` at ``path`` (its folder made); what a link leads to is made in ``outside``.
    A path something deeper was planted in already is a folder, and stays one."""
    if os.path.lexists(path):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    target = outside / f"target-{path.name}"
    if shape == "file":
        path.write_bytes(b"another's bytes")
        path.chmod(0o600)
    elif shape == "folder":
        path.mkdir()
    elif shape == "link-out-file":
        target.write_bytes(b"outside")
        target.chmod(0o600)
        path.symlink_to(target)
    elif shape == "link-out-folder":
        target.mkdir(exist_ok=True)
        path.symlink_to(target)
    elif shape == "dangling-out":
        path.symlink_to(outside / f"never-{path.name}")
    elif shape == "loop":
        path.symlink_to(path.name)
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "read-only-folder":
        path.mkdir()
        path.chmod(0o555)


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``root`` (links not followed, FIFOs never opened): its kind, its
    permission bits and its content's hash (a link: where it leads)."""
    out: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(dirpath) / name
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[str(path.relative_to(root))] = ("link", mode, str(path.readlink()))
            elif stat.S_ISREG(st.st_mode):
                out[str(path.relative_to(root))] = (
                    "file",
                    mode,
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                )
            else:
                out[str(path.relative_to(root))] = (stat.filemode(st.st_mode)[0], mode, "")
    return out


def release(root: Path) -> None:
    """Make every folder under ``root`` writable again, so the test's temporary folder goes."""
    for dirpath, dirs, _ in os.walk(root):
        for name in dirs:
            path = Path(dirpath) / name
            if not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.chmod(0o755)


class Hung(Exception):
    """An example ran past its deadline: something waited on a FIFO, a lock or the network."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (``Hung``) if the block runs longer than ``seconds``; the main thread only."""

    def expired(signum: int, frame: object) -> None:
        msg = f"still running after {seconds} s"
        raise Hung(msg)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def chain(top: Path, depth: int) -> Path:
    """``top/a/a/…``, ``depth`` folders deep, made from descriptors (no path grows long, nothing
    recurses); returns the deepest folder."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return top.joinpath(*["a"] * depth)
