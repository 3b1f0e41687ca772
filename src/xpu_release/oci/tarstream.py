"""An eStargz layer's tar as its bytes arrive: entry by entry, each file's data hashed in the
runs that the gzip members cut it into (``oci.toc`` holds them against the TOC).

A push parser (``TarStream.take``), because the bytes come from a download that is read once,
in step with its other copies (``oci.blobcheck``). It reads what an eStargz layer of ours holds
(POSIX ustar headers, PAX extended headers, the seven kinds of entry) and refuses anything else
with a sentence: every size is bounded, every header's checksum checked.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..guard import limits
from ..guard.shown import quoted
from .estargz import TOC_NAME, clean

BLOCK = 512
_KINDS = {b"0": "reg", b"\0": "reg", b"1": "hardlink", b"2": "symlink", b"3": "char", b"4": "block",
          b"5": "dir", b"6": "fifo"}  # fmt: skip
_PAX_MAX = 1 << 20  # bytes of one extended header (a path, a link, a few attributes)
# The records Go's archive/tar reads as every other puller's unpack does, and that the TOC says
# (or, uname and gname, that nothing mounts by): any other (GNU.sparse.*, which renames the entry
# and rewrites its data) is refused. Numbers as ParseInt reads them, refused unless plain digits.
_PAX_KEYS = frozenset(
    ("path", "linkpath", "size", "uid", "gid", "mtime", "atime", "ctime", "uname", "gname", "hdrcharset")
)
_PAX_NUMBER = re.compile(r"[0-9]{1,18}")
_PAX_TIME = re.compile(r"(-?[0-9]{1,18})(\.[0-9]{1,9})?")


class Broken(Exception):
    """What is wrong, as soon as it is seen (caught in ``LayerCheck``, never let out of it)."""


def fail(problem: str) -> NoReturn:
    raise Broken(problem)


@dataclass
class Segment:
    """A run of a file's data inside one gzip member: where in the file, where the member starts."""

    at: int
    member: int | None  # the member's offset in the blob (None: the data did not start a member)
    sha: Any = field(default_factory=hashlib.sha256)
    size: int = 0


@dataclass
class Entry:
    """A tar entry as the stream showed it."""

    name: str
    kind: str
    size: int
    mode: int
    uid: int
    gid: int
    mtime: int
    link: str
    major: int
    minor: int
    xattrs: dict[str, bytes]
    whole: Any = field(default_factory=hashlib.sha256)
    segments: list[Segment] = field(default_factory=list)


def _pax_number(pax: dict[str, str], key: str, header: int) -> int:
    if key not in pax:
        return header
    if not _PAX_NUMBER.fullmatch(pax[key]):
        fail(f"a PAX extended header's {key} is not a number")
    return int(pax[key])


def _pax_mtime(pax: dict[str, str], header: int) -> int:
    """The mtime in whole seconds, as the TOC's writer rounds it (Go's ``Round(time.Second)``)."""
    if "mtime" not in pax:
        return header
    found = _PAX_TIME.fullmatch(pax["mtime"])
    if found is None:
        fail("a PAX extended header's mtime is not a time")
    seconds, fraction = int(found[1]), found[2] or ""
    if fraction and fraction[1] >= "5":
        seconds += -1 if found[1].startswith("-") else 1
    return seconds


def _utf8(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"a tar entry's {what} is not UTF-8, which the TOC cannot name")
    return text


def _text(field_bytes: bytes) -> str:
    """A header's text field: up to its first NUL, bytes that are not UTF-8 escaped."""
    return field_bytes.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _octal(field_bytes: bytes, what: str) -> int:
    text = field_bytes.rstrip(b"\0 ").lstrip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]{1,22}", text):
        fail(f"a tar header's {what} is not an octal number")
    return int(text, 8)


def _pax(data: bytes) -> dict[str, str]:
    """The records of a PAX extended header (``LENGTH KEY=VALUE\\n``)."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 20)
        if space < 0 or not data[pos:space].isdigit():
            fail("a PAX extended header is damaged")
        length = int(data[pos:space])
        record = data[space + 1 : pos + length]
        if (
            length <= space - pos
            or pos + length > len(data)
            or not record.endswith(b"\n")
            or b"=" not in record
        ):
            fail("a PAX extended header is damaged")
        key, _, value = record[:-1].partition(b"=")
        name = key.decode("utf-8", "surrogateescape")
        if name not in _PAX_KEYS and not name.startswith("SCHILY.xattr."):
            fail(f"a PAX extended header holds {quoted(name)}, which an eStargz layer of ours never holds")
        records[name] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


class TarStream:
    """The tar inside the blob, entry by entry, as its bytes arrive."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.toc: bytes | None = None  # the TOC's JSON, once its entry is read
        self.toc_at = -1  # where (in the tar) the TOC's header starts
        self.pos = 0  # bytes of the tar taken so far
        self.zero_blocks = 0
        self._held = bytearray()  # a header (or extended header) being gathered
        self._want = BLOCK  # bytes still to come of the current thing
        self._state = "header"
        self._pax: dict[str, str] = {}
        self._current: Entry | None = None
        self._toc_data = bytearray()
        self._started = -1  # where the current entry's first header (extended or not) starts

    def member_starts(self, offset: int) -> None:
        """A gzip member starts here, at ``offset`` in the blob."""
        entry = self._current
        if self._state == "data" and entry is not None:
            at = sum(s.size for s in entry.segments)
            if entry.segments and entry.segments[-1].size == 0:
                entry.segments.pop()
            entry.segments.append(Segment(at, offset))

    def take(self, data: memoryview) -> None:
        while data:
            n = min(len(data), self._want)
            piece, data = data[:n], data[n:]
            self._want -= n
            self.pos += n
            self._consume(piece)

    def _consume(self, piece: memoryview) -> None:
        if self._state == "data":
            self._data(piece)
        elif self._state == "pad":
            if any(piece):
                fail("a tar entry's padding is not zero")
        else:
            self._held += piece
        if self._want == 0:
            self._next()

    def _data(self, piece: memoryview) -> None:
        entry = self._current
        assert entry is not None
        if entry.name == TOC_NAME:
            self._toc_data += piece
            return
        if not entry.segments:
            entry.segments.append(Segment(0, None))
        entry.segments[-1].sha.update(piece)
        entry.segments[-1].size += len(piece)
        entry.whole.update(piece)

    def _next(self) -> None:
        """The current thing is complete: on to what follows it."""
        state, held = self._state, bytes(self._held)
        self._held.clear()
        if state == "header":
            self._header(held)
        elif state == "pax":
            self._pax = _pax(held)
            self._expect("pad", -len(held) % BLOCK) or self._expect("header", BLOCK)
        elif state == "data":
            entry = self._current
            assert entry is not None
            if entry.name == TOC_NAME:
                self.toc = bytes(self._toc_data)
            self._expect("pad", -entry.size % BLOCK) or self._expect("header", BLOCK)
        else:  # pad
            self._expect("header", BLOCK)

    def _expect(self, state: str, size: int) -> bool:
        if size == 0:
            return False
        self._state, self._want = state, size
        return True

    def _header(self, block: bytes) -> None:
        if block == bytes(BLOCK):
            self.zero_blocks += 1
            self._expect("header", BLOCK)
            return
        if self.zero_blocks or self.toc is not None:
            fail("the tar goes on after its TOC entry or its end")
        stored = _octal(block[148:156], "checksum")
        if stored != sum(block[:148]) + 256 + sum(block[156:]):
            fail(f"the tar header at byte {self.pos - BLOCK} fails its checksum")
        kind = block[156:157]
        size = _octal(block[124:136], "size")
        if self._started < 0:
            self._started = self.pos - BLOCK
        if kind == b"x":
            if size > _PAX_MAX:
                fail(f"a PAX extended header of {size} bytes (the limit is {_PAX_MAX})")
            self._expect("pax", size) or self._expect("header", BLOCK)
            return
        if kind not in _KINDS:
            fail(f"a tar entry of type {kind!r}, which an eStargz layer of ours never holds")
        self._entry(block, _KINDS[kind], size)

    def _entry(self, block: bytes, kind: str, size: int) -> None:
        pax, self._pax = self._pax, {}
        name = block[0:100].split(b"\0", 1)[0]
        # The prefix is 155 bytes in ustar, 131 in star (a "tar" trailer), as Go reads them.
        prefix = block[345:476] if block[508:512] == b"tar\0" else block[345:500]
        if block[257:263] == b"ustar\0" and prefix.strip(b"\0"):
            name = prefix.split(b"\0", 1)[0] + b"/" + name
        text = _utf8(pax.get("path", name.decode("utf-8", "surrogateescape")), "name")
        size = _pax_number(pax, "size", size)
        if block[156:157] == b"\0" and text.endswith("/"):
            kind = "dir"  # Go's archive/tar: an old regular file named as a folder is one
        if len(self.entries) >= limits.MAX_TOC_ENTRIES:
            fail(f"the layer has more than {limits.MAX_TOC_ENTRIES} entries")
        if kind != "reg" and size:
            fail(f"the tar entry {quoted(text)} is a {kind} that holds {size} bytes")
        entry = Entry(
            name=clean(text), kind=kind, size=size, mode=_octal(block[100:108], "mode"),
            uid=_pax_number(pax, "uid", _octal(block[108:116], "uid")),
            gid=_pax_number(pax, "gid", _octal(block[116:124], "gid")),
            mtime=_pax_mtime(pax, _octal(block[136:148], "mtime")),
            link=_utf8(pax.get("linkpath", _text(block[157:257])), "link"),
            major=_octal(block[329:337], "device major"), minor=_octal(block[337:345], "device minor"),
            xattrs={_utf8(k[13:], "extended attribute's name"): v.encode("utf-8", "surrogateescape")
                    for k, v in pax.items() if k.startswith("SCHILY.xattr.")},
        )  # fmt: skip
        if entry.name == TOC_NAME:
            if size > limits.MAX_TOC_BYTES:
                fail(f"the TOC is {size} bytes; the limit is {limits.MAX_TOC_BYTES}")
            self.toc_at = self._started
        else:
            self.entries.append(entry)
        self._started = -1
        self._current = entry
        self._expect("data", size) or self._expect("header", BLOCK)
