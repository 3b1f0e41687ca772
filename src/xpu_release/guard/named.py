"""Files the user names (``-o``, ``--sarif``): where a command writes its data when asked to.
Unlike a layout's or the cache's files, the path is the user's; what is already there decides
how it is written (``write_named``), and a link there is never followed to replace what it
leads to."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from ..errors import OutputError
from ..files import describe
from .writing import write_bytes

# The folders whose links the system makes for a process's own streams, as real paths: /dev
# itself (/dev/stdout, /dev/stderr: only root writes there) and a process's fd folder (/dev/fd
# and /proc/self/fd are /proc/<pid>/fd once resolved). Not /dev/shm (anyone plants links there),
# not /proc/self/cwd (a link to any folder).
_SYSTEM_LINK_FOLDERS = re.compile(r"/dev|/proc/[0-9]+/(task/[0-9]+/)?fd")


def write_named(path: Path, data: bytes, *, what: str) -> None:
    """``data`` at a path the user named (``-o``, ``--sarif``). What is there decides:

    - nothing, or a regular file: written through ``Out`` (its folder made; a file replaced
      keeps its permission bits);
    - a FIFO or a character device (``/dev/null``, a terminal): written to as a stream, as any
      tool would (there is nothing to replace);
    - a symbolic link: refused, exit 13. The user named the link, not the file it leads to,
      which may be anyone's (a link planted in a shared folder): it is never replaced, nor its
      mode widened. Name the file itself, or remove the link. The system's own links for a
      process's streams (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``), told by the
      folder they really are in (``system_link``), are written through, in place;
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
        system = system_link(path)
        if system is None:
            msg = (f"{path}: is a symbolic link; the {what} is not written through it (name the file "
                   "itself, or remove the link)")  # fmt: skip
            raise OutputError(msg)
        _stream(system, data, what, os.O_APPEND)
    elif st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        _stream(path, data, what, os.O_NOFOLLOW)
    elif st is not None and not stat.S_ISREG(st.st_mode):
        msg = f"{path}: is a socket or a block device; name a file to write the {what} to"
        raise OutputError(msg)
    else:
        write_bytes(path, data, what=what)


def system_link(path: Path) -> Path | None:
    """``path`` as the system's own link it is (``/dev/stdout``, ``/dev/fd/N``), at its real
    place, or None when it is any other. Decided on the folder it really is in (``..`` and the
    links of the folders above resolved as the kernel would), never on how it is spelled:
    ``/dev/../home/x/link`` is in ``/home/x``, ``/proc/self/cwd/link`` in the current folder."""
    folder = os.path.realpath(path.absolute().parent)
    real = Path(folder) / path.name
    try:
        is_link = stat.S_ISLNK(real.lstat().st_mode)
    except OSError:
        return None
    return real if is_link and _SYSTEM_LINK_FOLDERS.fullmatch(folder) else None


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
