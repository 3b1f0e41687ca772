"""Files the user names (``-o``, ``--sarif``): where a command writes its data when asked to.
Unlike a layout's or the cache's files, the path is the user's; what is already there decides
how it is written (``write_named``), and a link there is never followed to replace what it
leads to."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import OutputError
from ..files import describe
from .writing import write_bytes

_SYSTEM_LINKS = ("/dev/", "/proc/")  # only root makes links there: /dev/stdout, /dev/fd/N


def write_named(path: Path, data: bytes, *, what: str) -> None:
    """``data`` at a path the user named (``-o``, ``--sarif``). What is there decides:

    - nothing, or a regular file: written through ``Out`` (its folder made; a file replaced
      keeps its permission bits);
    - a FIFO or a character device (``/dev/null``, a terminal): written to as a stream, as any
      tool would (there is nothing to replace);
    - a symbolic link: refused, exit 13. The user named the link, not the file it leads to,
      which may be anyone's (a link planted in a shared folder): it is never replaced, nor its
      mode widened. Name the file itself, or remove the link. Links under ``/dev`` and
      ``/proc`` are the system's (``/dev/stdout``, ``/dev/fd/N``): written through, in place;
    - a folder, a socket or a block device: refused, exit 13.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        msg = f"{path}: cannot write the {what} ({describe(exc)})"
        raise OutputError(msg) from None
    if str(path) in ("", ".") or (st is not None and stat.S_ISDIR(st.st_mode)):
        msg = f"{path}: is a directory; name a file to write the {what} to"
        raise OutputError(msg)
    if st is not None and stat.S_ISLNK(st.st_mode):
        if not str(path.absolute()).startswith(_SYSTEM_LINKS):
            msg = (f"{path}: is a symbolic link; the {what} is not written through it (name the file "
                   "itself, or remove the link)")  # fmt: skip
            raise OutputError(msg)
        _stream(path, data, what, os.O_APPEND)
    elif st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        _stream(path, data, what, os.O_NOFOLLOW)
    elif st is not None and not stat.S_ISREG(st.st_mode):
        msg = f"{path}: is a socket or a block device; name a file to write the {what} to"
        raise OutputError(msg)
    else:
        write_bytes(path, data, what=what)


def _stream(path: Path, data: bytes, what: str, flags: int) -> None:
    """Written where ``path`` leads, in place (a pipe, a device, the file behind /dev/stdout)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | flags)
        try:
            if stat.S_ISBLK(os.fstat(fd).st_mode):  # /dev/disk/by-id/… leads to a disk
                raise OSError(errno.EINVAL, "it leads to a block device, not a file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        msg = f"{path}: cannot write the {what} ({describe(exc)})"
        raise OutputError(msg) from None
