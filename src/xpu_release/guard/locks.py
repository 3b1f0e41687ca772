"""Locks on what several runs write at once: the cache's lock file (``LockFile``: shared by every
run that uses the cache, exclusive for a prune) and a layout's folder (``folder_lock``: held
while ``index.json`` is read, changed and written, so two mirrors into one layout lose no
entry). Both are ``flock``: the kernel drops a dead process's lock, so none is ever stale.

A lock file is opened without following a link and without blocking: whatever else is at its
name (a link, a FIFO, a socket, a device) is a mistake or a trap (opening it would create a file
where the link leads, or wait forever for a FIFO's reader), and is replaced by a regular file.
A lock is checked, once held, to be on the file the name holds now, so two runs that replace
an impostor at once still end up on one file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError
from .limits import NEW_FILE_MODE

_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.EBADF, errno.EINVAL}  # a disk without flock


class LockFile:
    """The lock file ``name`` in ``folder``, open (``open`` makes one; None if it cannot)."""

    def __init__(self, folder: Path, name: str, folder_fd: int, fd: int) -> None:
        self.folder, self.name = folder, name
        self._folder_fd, self._fd = folder_fd, fd

    @classmethod
    def open(cls, folder: Path, name: str) -> LockFile | None:
        """The lock file, made where missing; None where it cannot be opened at all (a cache
        that cannot be written: the command fails where it needs it). A folder at its name is
        ``ConfigError``."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return cls(folder, name, folder_fd, _open_regular(folder_fd, folder / name))
        except OSError:
            os.close(folder_fd)
            return None
        except BaseException:
            os.close(folder_fd)
            raise

    def fileno(self) -> int:
        return self._fd

    def take(self, mode: int, *, wait: bool, on_wait: Callable[[], None] | None = None) -> bool:
        """Hold ``mode`` (``fcntl.LOCK_SH`` or ``LOCK_EX``): at once if free; else, with
        ``wait``, after telling ``on_wait``; without, not at all (False). Converting a held lock
        that fails drops it (flock's rule): the caller takes it again."""
        told = False
        while True:
            try:
                fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    return False
                if on_wait is not None and not told:
                    on_wait()
                    told = True
                fcntl.flock(self._fd, mode)
            if self._still_named():
                return True
            # Another run replaced an impostor at the name after we opened it: lock that file.
            os.close(self._fd)
            self._fd = _open_regular(self._folder_fd, self.folder / self.name)

    def _still_named(self) -> bool:
        try:
            named = os.stat(self.name, dir_fd=self._folder_fd, follow_symlinks=False)
        except OSError:
            return False
        mine = os.fstat(self._fd)
        return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)

    def close(self) -> None:
        for fd in (self._fd, self._folder_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fd = self._folder_fd = -1


def _open_regular(folder: int, path: Path) -> int:
    """A descriptor of the regular file ``path.name`` in ``folder``, made where missing, any
    impostor replaced; read-only where the folder cannot be written (a lock works on it)."""
    for _attempt in range(5):
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode):
                _remove_impostor(folder, path)  # before opening: a device is never opened
        try:
            fd = os.open(path.name, os.O_RDWR | os.O_CREAT | _OPEN, NEW_FILE_MODE, dir_fd=folder)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                continue  # an impostor made since we looked: looked at again
            if exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
                raise
            fd = os.open(path.name, os.O_RDONLY | _OPEN, dir_fd=folder)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
    raise OSError(errno.EAGAIN, "keeps being replaced by something that is not a file", str(path))


def _remove_impostor(folder: int, path: Path) -> None:
    if stat.S_ISDIR(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode):
        msg = f"{path}: is a folder, not the lock file; remove it"
        raise ConfigError(msg)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path.name, dir_fd=folder)


@contextmanager
def folder_lock(folder: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``folder`` exclusively (``flock`` on the folder itself: nothing is added to it). On
    a disk without locks (some network filesystems) it goes on unlocked."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        yield
    finally:
        os.close(fd)
