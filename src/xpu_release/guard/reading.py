"""The one way in for outside files and JSON: every read is bounded, every refusal names the input
and the bound.

- ``read_file``: the bytes of a regular file, at most ``limit`` of them, checked while reading
  (a file that grows past its size as it is read is refused too). A FIFO, socket or device is
  refused without being opened for reading (opening a FIFO waits for a writer: a hang); a link
  loop, a dangling link, a directory are named as such.
- ``parse_json``: a JSON document, its nesting bounded before it is parsed (Python's parser and
  every walk over the value recurse: a document nested 5,000 deep would crash them), its
  numbers bounded in length and finite (``1e400`` is no size), ``NaN`` and ``Infinity``
  refused.
- ``typed``: checks of one value's type where booleans are not integers (``True`` is no size);
  ``ascii_int``: a number in outside text, in ASCII digits only (never ``int()`` on it alone).
- ``days_after``: a day and some days more, saturating at the calendar's end (a date read from
  outside near year 9999 is data, never an ``OverflowError``).

Errors are raised through ``error`` (a callable making the exception, ``DamagedFileError`` by
default): a damaged layout is exit 12, a registry's answer 7, an option the user typed 3; the
caller knows which, this module does not.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Any, TypeGuard

from ..errors import DamagedFileError
from ..files import describe, kind_of
from . import limits

Fail = Callable[[str], Exception]


class Refused(ValueError):
    """Outside data a bound or a shape refuses, before it is given a caller's error class
    (``parse_json`` inside a zip member, a number in a YAML scalar)."""


# --- files ---------------------------------------------------------------------------------------


_KINDS = {
    "directory": "is a directory",
    "special": "is a FIFO, socket or device",
    "dangling-link": "is a symbolic link to nothing",
    "link-loop": "is a symbolic link loop",
    "unreadable": "cannot be examined (no permission on a folder above it?)",
}


def _what_is(path: Path) -> tuple[str, os.stat_result | None]:
    """``("file", st)`` for a regular file (links followed), else what is there, in words."""
    kind = kind_of(path)
    if kind != "file":
        return _KINDS.get(kind, kind), None
    try:
        return "file", path.stat()
    except OSError as exc:
        return f"cannot be read ({describe(exc)})", None


def is_regular(path: Path) -> bool:
    """A regular file is at ``path`` (links followed); never opens it."""
    return _what_is(path)[0] == "file"


def file_chunks(path: Path, *, what: str, limit: int, exact: bool = False, chunk: int = 1 << 20,
                error: Fail = DamagedFileError, missing: Fail | None = None) -> Iterator[bytes]:  # fmt: skip
    """The bytes of the regular file at ``path`` in pieces, at most ``limit`` of them (with
    ``exact``: exactly ``limit``, a blob of a known size), checked while reading: a file that
    grows as it is read is refused at the first byte past the bound. ``what`` names it in
    messages (``oci:/media/usb/index.json``). A missing file is ``missing``'s error (else
    ``error``'s); a special file is refused without being opened for reading."""
    kind, st = _what_is(path)
    if kind == "missing":
        msg = f"{what}: no such file"
        raise (missing or error)(msg)
    if st is None:
        msg = f"{what} {kind}, not a regular file"
        raise error(msg)
    _check_size(st.st_size, what=what, limit=limit, exact=exact, error=error)
    try:
        # O_NONBLOCK: should a FIFO be swapped in after the check, opening it does not wait.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        msg = f"{what}: cannot be read ({describe(exc)})"
        raise error(msg) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            msg = f"{what} is a FIFO, socket or device, not a regular file"
            raise error(msg)
        total = 0
        while block := _read(fd, min(chunk, limit + 1 - total), what, error):
            total += len(block)
            _check_size(total, what=what, limit=limit, exact=False, error=error)
            yield block
        _check_size(total, what=what, limit=limit, exact=exact, error=error)
    finally:
        os.close(fd)


def _read(fd: int, n: int, what: str, error: Fail) -> bytes:
    try:
        return os.read(fd, n)
    except OSError as exc:
        msg = f"{what}: cannot be read ({describe(exc)})"
        raise error(msg) from None


def _check_size(size: int, *, what: str, limit: int, exact: bool, error: Fail) -> None:
    if size > limit:
        bound = f"it should be {limit}" if exact else f"the limit is {limit} ({_size(limit)})"
        msg = f"{what}: {size} bytes or more; {bound}"
        raise error(msg)
    if exact and size != limit:
        msg = f"{what}: {size} bytes; it should be {limit}"
        raise error(msg)


def read_file(
    path: Path, *, what: str, limit: int, error: Fail = DamagedFileError, missing: Fail | None = None
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` (``file_chunks``)."""
    return b"".join(file_chunks(path, what=what, limit=limit, error=error, missing=missing))


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


# --- JSON ----------------------------------------------------------------------------------------

# A string, escapes and all; one that never closes runs to the end of the text. So every quote
# starts a match that cannot fail, and each byte is looked at once: linear. (Requiring the
# closing quote made each quote of an unclosed ``"\\"\\"…`` scan to the end and fail: 30 KB took
# seconds, a 4 MiB manifest hours.)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but the brackets
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_SPLIT_MAX = 1 << 20


def depth_of(text: bytes | str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), without parsing it: the
    bound is checked before anything recurses. Linear in the text's length, whatever it holds
    (a string that never closes hides the rest of the text: a parser refuses that anyway)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    # No quote after a backslash: none is escaped, every quote opens or closes a string, and what
    # lies outside strings is every other piece between quotes (a C-speed split, for texts small
    # enough that the pieces cost little memory; the regex took 1.4 s of watch's 10 at 240 releases).
    fast = len(data) <= _SPLIT_MAX and b'\\"' not in data
    outside = b"".join(data.split(b'"')[::2]) if fast else _STRING.sub(b"", data)
    brackets = outside.translate(None, _BRACKETS).translate(_STEP)
    if not brackets:
        return 0
    return max(accumulate(b if b < 128 else b - 256 for b in brackets))


def _number(text: str, kind: str) -> int | float:
    if len(text) > limits.MAX_NUMBER_CHARS:
        shown = f"{text[:12]}... ({len(text)} characters)"
        msg = f"the number {shown} is longer than {limits.MAX_NUMBER_CHARS} characters"
        raise Refused(msg)
    value = int(text) if kind == "int" else float(text)
    if isinstance(value, float) and not math.isfinite(value):
        msg = f"the number {text} is beyond a 64-bit float"
        raise Refused(msg)
    return value


def _constant(text: str) -> Any:
    msg = f"{text} is not a JSON number"
    raise Refused(msg)


def parse_json(
    data: bytes | str,
    *,
    what: str,
    error: Fail = DamagedFileError,
    pairs: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """The JSON value of ``data``; ``error`` names ``what`` and the reason it is refused: not
    JSON (JSON is UTF-8: RFC 8259), nested deeper than ``MAX_DEPTH``, a number too long or not
    finite."""
    depth = depth_of(data)
    if depth > limits.MAX_DEPTH:
        msg = f"{what} is nested {depth} levels deep; the limit is {limits.MAX_DEPTH}"
        raise error(msg)
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(
            text,
            parse_int=lambda s: _number(s, "int"),
            parse_float=lambda s: _number(s, "float"),
            parse_constant=_constant,
            object_pairs_hook=pairs,
        )
    except Refused as exc:
        msg = f"{what}: {exc}"
        raise error(msg) from None
    except UnicodeDecodeError:
        msg = f"{what} is not UTF-8 text"
        raise error(msg) from None
    except json.JSONDecodeError as exc:
        msg = f"{what} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise error(msg) from None
    except (ValueError, RecursionError) as exc:
        msg = f"{what} is not JSON ({type(exc).__name__})"
        raise error(msg) from None


def loads(data: bytes | str, what: str = "the document") -> Any:
    """``json.loads`` for outside data, bounded as ``parse_json``: a refusal is a ``Refused``,
    which is a ValueError, as json.loads' own errors are (the caller's ``except ValueError``
    holds for both)."""
    return parse_json(data, what=what, error=Refused)


def read_json(path: Path, *, what: str, limit: int, error: Fail = DamagedFileError,
              missing: Fail | None = None) -> Any:  # fmt: skip
    """``read_file`` then ``parse_json``: a bounded JSON file."""
    return parse_json(read_file(path, what=what, limit=limit, error=error, missing=missing), what=what,
                      error=error)  # fmt: skip


# --- typed values --------------------------------------------------------------------------------


def ascii_int(text: str, *, most: int = 19) -> int | None:
    """``text`` as a whole number written in ASCII digits only (at most ``most`` of them), else
    None. Outside text never goes to ``int()`` or ``str.isdigit()`` alone: ``"²".isdigit()`` is
    true and ``int("²")`` raises; ``int("٣")`` is 3 and ``int("1_0")`` 10."""
    if not 0 < len(text) <= most or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def is_int(value: Any, *, low: int = 0, high: int = limits.MAX_INT64) -> TypeGuard[int]:
    """``value`` is an integer (never a boolean, never a float) from ``low`` to ``high``."""
    return type(value) is int and low <= value <= high


def str_list(value: Any) -> list[str] | None:
    """``value`` as a list of strings; None when it is another shape."""
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        return None
    return list(value)


# --- days ----------------------------------------------------------------------------------------


def days_after(day: date, days: int) -> date:
    """``day`` and ``days`` more (or fewer), or the calendar's last (first) day when that is past
    it: an advisory published on 9999-12-25, or ``--today 9999-12-31``, has an SLA due "never
    within the calendar", not an internal error."""
    try:
        return day + timedelta(days=days)
    except OverflowError:
        return date.max if days >= 0 else date.min
