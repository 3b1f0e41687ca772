"""The one way out: every file xpu-release writes goes through ``Out`` (or ``write_bytes``).

- **Whole or not at all.** The bytes go to a temporary file of this run's own in the target's
  folder (created ``O_EXCL``, its name holds the process id and a random token, so two runs never
  write one file), are fsync'd, and the file is renamed over the target. A write that fails or
  is abandoned leaves no temporary behind; a killed one leaves an unlocked temporary that
  ``sweep`` (or ``cache prune``) removes. Thousands of small files (a layout's blobs) may skip
  the fsync each (``durable=False``: one fsync costs as much as writing a hundred of them) when
  ``settle`` flushes their filesystem once before anything that lists them is written.
- **Never through a link.** ``within`` is the folder the write must stay inside (a layout, the
  cache): the folders between it and the file are opened one at a time with ``O_NOFOLLOW``, so
  a ``blobs/sha256`` that is a link (to ``/etc``, to another disk) is refused, not written
  through. The target's own name, if it is a link, is replaced by the file (a rename never
  follows a link). ``within`` itself, and the folders above it, are the user's: followed.
- **Readable by others, never widened.** A new file is ``NEW_FILE_MODE`` (0644) less the umask,
  so another user's skopeo reads a layout; a file replaced keeps its permission bits.
- **Locked while written.** The temporary holds an exclusive ``flock`` until it is renamed or
  removed: ``sweep`` removes only temporaries nobody holds (a killed run's), never one being
  written by another run.

Files the user names (``-o``, ``--sarif``) go through ``named.write_named``, whose rule for
links and special files is stated there.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from ..errors import OutputError
from ..files import describe
from .limits import NEW_FILE_MODE, NEW_FOLDER_MODE, TEMPORARY_GRACE_SECONDS

TEMPORARY_SUFFIX = ".tmp"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NAME_KEPT = 180  # characters of the target's name kept in its temporary's (NAME_MAX is 255)


class LinkRefused(OutputError):
    """A folder inside a layout or the cache is a link (or not a folder): nothing is written
    through it (exit 13, as any output that cannot be written)."""


@dataclass(frozen=True)
class Identity:
    """Which file a name held when it was proven: a later check that finds the same identity
    knows the bytes are the ones proven, without reading them again."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_folder(folder: Path, *, within: Path | None = None, make: bool = True) -> int:
    """A descriptor of ``folder``, reached from ``within`` (default: ``folder`` itself) one
    component at a time without following a link; made where missing with ``make``. The caller
    closes it. ``LinkRefused`` for a link or a non-folder on the way; OSError otherwise."""
    base = within if within is not None else folder
    parts = folder.relative_to(base).parts if within is not None else ()  # ValueError: our bug
    if make:
        base.mkdir(parents=True, exist_ok=True)  # the named root: the user's path, links followed
    fd = os.open(base, _DIR_FLAGS)
    walked = base
    for part in parts:
        walked = walked / part
        fd = _step(fd, part, walked, base, make=make)  # closes the folder it steps out of
    return fd


def _step(fd: int, part: str, walked: Path, base: Path, *, make: bool) -> int:
    """The folder ``part`` under the open folder ``fd``, opened without following a link; ``fd``
    is closed here, whatever happens."""
    try:
        for attempt in range(2):
            try:
                return os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not make or attempt:
                    raise
                with contextlib.suppress(FileExistsError):  # another run made it meanwhile
                    os.mkdir(part, NEW_FOLDER_MODE, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_DIRECTORY on a link: either
                    link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                    what = "a symbolic link" if link else "not a folder"
                    msg = (f"{walked}: is {what}; nothing is written through it (it must be a folder "
                           f"inside {base}): remove it")  # fmt: skip
                    raise LinkRefused(msg) from None
                raise
        raise FileNotFoundError(errno.ENOENT, "made, then gone", str(walked))  # removed meanwhile
    finally:
        os.close(fd)


class Out:
    """A file being written, whole or not at all::

        with Out(path, within=layout_root, what="blob") as out:
            out.write(block)
            out.commit()  # renamed into place; leaving without it removes the temporary

    OSError on the way is ``OutputError`` naming ``path`` and ``what`` (exit 13)."""

    def __init__(
        self, path: Path, *, within: Path | None = None, what: str = "file", durable: bool = True
    ) -> None:
        self.path, self.within, self.what, self.durable = path, within, what, durable
        self.size = 0
        self.identity: Identity | None = None  # the file's, once committed
        self._folder = -1
        self._file: BinaryIO | None = None
        self._tmp = ""

    def _fail(self, exc: OSError) -> OutputError:
        return OutputError(f"{self.path}: cannot write the {self.what} ({describe(exc)})")

    def __enter__(self) -> Out:
        try:
            self._folder = open_folder(self.path.parent, within=self.within)
            keep = _kept_mode(self._folder, self.path)
            self._tmp = _temporary_name(self.path.name)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self._tmp, flags, NEW_FILE_MODE, dir_fd=self._folder)
            fcntl.flock(fd, fcntl.LOCK_EX)  # ours until renamed: a sweep leaves it alone
            if keep is not None:
                os.fchmod(fd, keep)
            self._file = os.fdopen(fd, "wb")
        except OSError as exc:
            self._discard()
            raise self._fail(exc) from None
        except BaseException:
            self._discard()
            raise
        return self

    @property
    def by_name(self) -> Path:
        """The temporary as a path through this write's open folder (``/proc/self/fd/N/<name>``),
        for a writer that opens the file by name itself (SQLite): the kernel reaches the folder
        from its descriptor, not by walking a path again, so no link on the way is followed."""
        assert self._file is not None, "Out.by_name outside its with block"
        return Path(f"/proc/self/fd/{self._folder}") / self._tmp

    def write(self, data: bytes) -> None:
        assert self._file is not None, "Out.write outside its with block"
        try:
            self._file.write(data)
        except OSError as exc:
            raise self._fail(exc) from None
        self.size += len(data)

    def commit(self, name: str | None = None, *, keep_existing: bool = False) -> Identity:
        """Make the file durable and put it in place (under ``name`` in the same folder, for a
        file named by what it holds: a blob known by its digest once written); returns what it
        is now. With ``keep_existing``, whatever is at that name (a file, a link, made meanwhile
        by anyone) stays as it is and ``FileExistsError`` is raised: the file is hard-linked
        into place, which never replaces and never follows a link."""
        assert self._file is not None, "Out.commit outside its with block"
        final = name or self.path.name
        try:
            self._file.flush()
            if self.durable:
                os.fsync(self._file.fileno())
            if keep_existing:
                os.link(
                    self._tmp, final, src_dir_fd=self._folder, dst_dir_fd=self._folder, follow_symlinks=False
                )
                os.unlink(self._tmp, dir_fd=self._folder)
            else:
                os.replace(self._tmp, final, src_dir_fd=self._folder, dst_dir_fd=self._folder)
            self._tmp = ""
            self.identity = Identity.of(os.fstat(self._file.fileno()))
            self.path = self.path.with_name(final)
        except OSError as exc:
            if keep_existing and isinstance(exc, FileExistsError):
                raise  # the caller's to say: "already exists", in its own words
            raise self._fail(exc) from None
        if self.durable:
            with contextlib.suppress(OSError):  # the rename's own durability; not every fs can
                os.fsync(self._folder)
        return self.identity

    def _discard(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if self._tmp and self._folder >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp, dir_fd=self._folder)
        self._tmp = ""
        if self._folder >= 0:
            os.close(self._folder)
            self._folder = -1

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._discard()


def _temporary_name(name: str) -> str:
    """``.<name>.<pid>-<token>.tmp``: hidden, this process's, unique, and known as one."""
    return f".{name[:_NAME_KEPT]}.{os.getpid()}-{secrets.token_hex(4)}{TEMPORARY_SUFFIX}"


def _kept_mode(folder: int, path: Path) -> int | None:
    """The permission bits of the regular file ``path`` replaces (kept: never widened), or None
    for a new file. A folder at that name is refused: a rename would fail on it anyway."""
    try:
        st = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    return stat.S_IMODE(st.st_mode) & 0o777 if stat.S_ISREG(st.st_mode) else None


def write_bytes(
    path: Path,
    data: bytes,
    *,
    within: Path | None = None,
    what: str = "file",
    durable: bool = True,
    keep_existing: bool = False,
) -> Identity:
    """``data`` at ``path``, whole or not at all (see ``Out``); with ``keep_existing``, only if
    nothing is at ``path`` (else ``FileExistsError``, and nothing changed)."""
    with Out(path, within=within, what=what, durable=durable) as out:
        out.write(data)
        return out.commit(keep_existing=keep_existing)


def settle(folder: Path) -> None:
    """Everything written on ``folder``'s filesystem is on disk when this returns (``syncfs``;
    where the C library lacks it, ``sync``): what ``durable=False`` writes skipped, at once."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        os.sync()
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


# --- killed runs' temporaries ---------------------------------------------------------------


_TEMPORARY = re.compile(rf"\..+\.[0-9]+-[0-9a-f]{{8}}{re.escape(TEMPORARY_SUFFIX)}", re.DOTALL)


def is_temporary(name: str) -> bool:
    """A name ``Out`` gives its temporaries (``.<name>.<pid>-<8 hex>.tmp``), and no other: a
    hidden ``.tmp`` file of another tool or a person (``.notes.tmp``) is theirs, never swept."""
    return _TEMPORARY.fullmatch(name) is not None


def sweep(folder: Path, *, within: Path | None = None, now: float | None = None) -> list[str]:
    """Remove the temporaries in ``folder`` that no process holds (a killed run's) and that are
    older than ``TEMPORARY_GRACE_SECONDS`` (one just made may not be locked yet); returns their
    names. A missing folder, or one that is a link, holds nothing to sweep."""
    try:
        fd = open_folder(folder, within=within, make=False)
    except (OSError, OutputError):
        return []
    removed = []
    try:
        for name in sorted(os.listdir(fd)):  # noqa: PTH208  (a descriptor: no link on the way)
            if is_temporary(name) and _stale(fd, name, now or time.time()):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
                    removed.append(name)
    finally:
        os.close(fd)
    return removed


def _stale(folder: int, name: str, now: float) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return False  # a link or a FIFO under a temporary's name: not ours, left alone
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < TEMPORARY_GRACE_SECONDS:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a writer: BlockingIOError
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
