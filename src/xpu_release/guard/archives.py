"""The one way into a zip archive (osv.dev's advisory exports): its members, each bounded.

Before a byte is inflated, the archive's directory is checked: the number of members, each
member's declared size and how much larger than it is stored it claims to inflate (a 2 MB archive
that inflates to 4.3 GB is a bomb, not advisories), the sum of the declared sizes, and each
member's method (stored or deflated: what osv.dev writes) and encryption. While inflating, a
member is read at most to its declared size and one byte more: zipfile stops at the declared size
and checks the CRC, so a member that lies about its size is damage too. A corrupt member
(a bad CRC, a broken deflate stream, a header that does not match the directory) ends the read,
named.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import DamagedFileError
from ..files import describe
from . import limits
from .reading import Fail
from .shown import shown

_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def _checked(info: zipfile.ZipInfo, what: str, error: Fail) -> None:
    name = shown(info.filename, 120)
    if info.flag_bits & 0x1:
        msg = f"{what}: member {name} is encrypted; an advisory archive is not"
        raise error(msg)
    if info.compress_type not in _METHODS:
        method = info.compress_type
        msg = f"{what}: member {name} is compressed with method {method}; only stored and deflated are read"
        raise error(msg)
    size, stored, bound = info.file_size, max(info.compress_size, 1), limits.MAX_ADVISORY_BYTES
    if size > bound:
        msg = f"{what}: member {name} declares {size} bytes; the limit is {bound}"
        raise error(msg)
    if size > bound // 64 and size > limits.MAX_INFLATE_RATIO * stored:
        msg = (f"{what}: member {name} inflates {size // stored} times ({stored} to {size} bytes); "
               f"the limit is {limits.MAX_INFLATE_RATIO} (a zip bomb?)")  # fmt: skip
        raise error(msg)


def members(
    path: Path, *, what: str, wanted: Callable[[str], bool], error: Fail = DamagedFileError
) -> Iterator[tuple[str, bytes]]:
    """``(name, bytes)`` of each member of the zip archive at ``path`` whose name ``wanted``
    accepts (directories never), bounded as the module says. ``error`` names ``what``."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        msg = f"{what}: not a readable zip archive ({shown(exc, 120)}); download it again"
        raise error(msg) from None
    except OSError as exc:
        msg = f"{what}: cannot be read ({describe(exc)})"
        raise error(msg) from None
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir() and wanted(i.filename)]
        if len(archive.infolist()) > limits.MAX_ARCHIVE_MEMBERS:
            msg = f"{what}: {len(archive.infolist())} members; the limit is {limits.MAX_ARCHIVE_MEMBERS}"
            raise error(msg)
        for info in infos:
            _checked(info, what, error)
        total, bound = sum(i.file_size for i in infos), limits.MAX_ARCHIVE_INFLATED
        if total > bound:
            msg = f"{what}: its members declare {total} bytes in all; the limit is {bound}"
            raise error(msg)
        for info in infos:
            yield info.filename, _read(archive, info, what, error)


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str, error: Fail) -> bytes:
    name = shown(info.filename, 120)
    try:
        with archive.open(info) as member:
            data = member.read(info.file_size + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        msg = f"{what}: member {name} is damaged ({shown(exc, 120)}); download the archive again"
        raise error(msg) from None
    except OSError as exc:
        msg = f"{what}: member {name} cannot be read ({describe(exc)})"
        raise error(msg) from None
    if len(data) > info.file_size:
        msg = f"{what}: member {name} inflates past the {info.file_size} bytes it declares"
        raise error(msg)
    return data
