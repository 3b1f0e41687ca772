"""Is an eStargz layer what its TOC says? Checked as its blob streams past, once.

A lazy puller (containerd's stargz snapshotter) never reads a layer's tar: it trusts the TOC for
names, modes and owners, and fetches each chunk at the offset the TOC names. So a TOC that lies
shows lazy pullers another file system than the one every other puller unpacks, and one whose
offsets are wrong breaks files at their first read. ``LayerCheck`` reads the blob as any
puller does (gzip member by member, the tar entry by entry, everything hashed) and holds the TOC
against it:

- the footer names the member where the TOC's own entry starts, and is the blob's last member;
- the TOC's JSON hashes to the manifest's ``toc.digest`` annotation, and the tar to its
  ``uncompressed-size``;
- the TOC lists the tar's entries, in order, with the same names, kinds, modes, owners, links,
  devices, extended attributes and content digests;
- each chunk it lists starts a gzip member at the offset it says, and its bytes hash to its
  digest; a file's chunks cover the file, one after another;
- a hard link names an entry before it that is no link itself (no loop for a reader to follow).

All of it is outside data: every size and count is bounded (``guard.limits``), the JSON is
parsed by the guarded reader, and every answer is a sentence (``problem``), never an exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from isal import isal_zlib

from ..errors import DamagedFileError
from ..guard import limits
from ..guard.reading import ascii_int, is_int, parse_json
from ..guard.shown import quoted
from .estargz import (
    FOOTER_SIZE,
    TOC_DIGEST_ANNOTATION,
    TOC_NAME,
    UNCOMPRESSED_SIZE_ANNOTATION,
    clean,
    mtime_text,
)
from .tarstream import Broken, Entry, TarStream, fail

_OUT_STEP = 1 << 20  # bytes inflated at a time: a member that inflates without end is cut into these
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def is_estargz(annotations: Mapping[str, str] | None) -> bool:
    """Whether a layer descriptor's annotations say the layer is eStargz."""
    return bool(annotations) and TOC_DIGEST_ANNOTATION in (annotations or {})


TocNamed = tuple[tuple[str, str], ...]  # what a descriptor says of a layer's TOC, its keys sorted


def toc_named(annotations: Mapping[str, str] | None) -> TocNamed:
    """What a layer descriptor says of its eStargz TOC (the TOC's digest, the unpacked size), the
    annotations ``LayerCheck`` holds the layer against; empty for a layer that is no eStargz."""
    if not is_estargz(annotations):
        return ()
    keys = (TOC_DIGEST_ANNOTATION, UNCOMPRESSED_SIZE_ANNOTATION)
    return tuple((k, (annotations or {})[k]) for k in keys if k in (annotations or {}))


def held(blocks: Iterable[bytes], digest: str, check: LayerCheck) -> bool:
    """Feed ``check`` every block of a blob, hashing them on the way: whether they were the blob
    ``digest`` names (only then is ``check.problem`` the blob's)."""
    sha = hashlib.sha256()
    for block in blocks:
        sha.update(block)
        check.feed(block)
    return "sha256:" + sha.hexdigest() == digest


class LayerCheck:
    """Fed an eStargz blob's bytes in order (``feed``), says what is wrong with it (``problem``).
    It does not hash them: its verdict is of the blob once the caller has proven the bytes fed
    were the blob's (``blobcheck.Checked.shared``, ``guard.proven.write_proven``'s ``then``)."""

    def __init__(self, annotations: dict[str, str]) -> None:
        self.annotations = annotations
        self._tar = TarStream()
        self._inflate: Any = None
        self._in = 0  # bytes of the blob taken
        self._member_at = 0  # where the member being inflated starts
        self._members: list[tuple[int, int]] = []  # (blob offset, tar position) of every member
        self._tail = b""
        self._broken: str | None = None
        said = annotations.get(UNCOMPRESSED_SIZE_ANNOTATION, "")
        # No more is inflated than the manifest says there is (a member that inflates without
        # end stops there); without the annotation, no more than an int64.
        most = ascii_int(said, most=18)
        self._most = most if most is not None else limits.MAX_INT64

    def feed(self, block: bytes) -> None:
        if self._broken is not None:
            return
        self._tail = (self._tail + block)[-FOOTER_SIZE:]
        try:
            self._inflate_all(block)
        except Broken as exc:
            self._broken = str(exc)

    def _inflate_all(self, block: bytes) -> None:
        data = block
        while data:
            if self._inflate is None:
                if len(self._members) > 2 * limits.MAX_TOC_ENTRIES + 2:
                    fail(f"the blob has more than {2 * limits.MAX_TOC_ENTRIES} gzip members")
                self._inflate = isal_zlib.decompressobj(wbits=31)
                self._member_at = self._in
                self._members.append((self._in, self._tar.pos))
                self._tar.member_starts(self._in)
            data = self._inflate_some(data)

    def _inflate_some(self, data: bytes) -> bytes:
        """Inflate what ``data`` holds of the current member, a bounded piece at a time; return
        what follows the member's end (empty: ``data`` is all of this member's)."""
        while True:
            try:
                out = self._inflate.decompress(data, _OUT_STEP)
            except Exception as exc:  # isal's own error class
                fail(f"the blob is no gzip stream at byte {self._in}: {exc}")
            left = self._inflate.unconsumed_tail if not self._inflate.eof else self._inflate.unused_data
            self._in += len(data) - len(left)
            self._tar.take(memoryview(out))
            if self._tar.pos > self._most:
                fail(f"the layer unpacks to more than the {self._most} bytes the manifest says")
            if self._inflate.eof:
                self._inflate = None
                return bytes(left)
            if not left:
                return b""
            data = left

    @property
    def problem(self) -> str | None:
        """What is wrong, once every byte was fed (None: the layer is what its TOC says)."""
        if self._broken is not None:
            return self._broken
        try:
            self._finish()
        except Broken as exc:
            return str(exc)
        return None

    def _finish(self) -> None:
        tar = self._tar
        if self._inflate is not None:
            fail("the blob ends inside a gzip member")
        if tar.toc is None:
            fail(f"the layer has no {TOC_NAME} entry")
        if tar.zero_blocks < 2:
            fail("the tar does not end after the TOC")
        toc_offset = _footer_offset(self._tail)
        if (
            self._members[-1][0] != self._in - FOOTER_SIZE
            or (toc_offset, tar.toc_at) not in self._members[:-1]
        ):
            fail(f"the footer names byte {toc_offset}, where no member holding the TOC starts")
        want = self.annotations.get(TOC_DIGEST_ANNOTATION, "")
        got = "sha256:" + hashlib.sha256(tar.toc).hexdigest()
        if got != want:
            fail(f"the TOC hashes to {got}; the manifest's annotation says {quoted(want)}")
        size = self.annotations.get(UNCOMPRESSED_SIZE_ANNOTATION)
        if size is not None and size != str(tar.pos):
            fail(f"the layer unpacks to {tar.pos} bytes; the manifest's annotation says {quoted(size)}")
        _bounded(tar.toc, tar.entries)
        _match(_toc_entries(tar.toc), tar.entries)


def _bounded(toc: bytes, entries: list[Entry]) -> None:
    """No more objects in the TOC than the layer's entries can need (one each, its xattrs', one
    per chunk, and a brace a name holds), counted before it is parsed: a TOC of ``{},{},…``
    parses to some 25 bytes of Python a byte, an honest one to 8, so a flood of empty objects
    is refused before it costs the runner's memory."""
    most = 1 + sum(
        2 + len(e.segments) + e.name.count("{") + e.link.count("{") + sum(k.count("{") for k in e.xattrs)
        for e in entries
    )
    if toc.count(b"{") > most:
        fail(f"the TOC holds more objects than the layer's {len(entries)} entries can need")


def _footer_offset(tail: bytes) -> int:
    """The TOC offset the 51-byte footer names (``estargz/gzip.go``'s ``ParseFooter``)."""
    if len(tail) != FOOTER_SIZE or tail[:4] != b"\x1f\x8b\x08\x04":
        fail("the blob does not end with an eStargz footer")
    (xlen,) = struct.unpack("<H", tail[10:12])
    extra = tail[12 : 12 + xlen]
    if xlen != 26 or extra[:4] != b"SG\x16\x00" or extra[20:26] != b"STARGZ":
        fail("the blob's footer is not an eStargz footer")
    digits = extra[4:20]
    if not re.fullmatch(rb"[0-9a-f]{16}", digits):
        fail("the footer's TOC offset is not a hexadecimal number")
    return int(digits, 16)


# --- the TOC -----------------------------------------------------------------------------------

_INTS = ("size", "mode", "uid", "gid", "offset", "devMajor", "devMinor", "chunkOffset", "chunkSize")
_TEXTS = ("name", "type", "modtime", "linkName", "digest", "chunkDigest", "userName", "groupName")
# Go's encoding/json takes a key in any case ("Mode" is mode) and decodes a repeated key into the
# value the first made (merging maps and entries): only the format's own keys, each once.
_KEYS = frozenset((*_INTS, *_TEXTS, "xattrs"))


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        fail("the TOC repeats a key in one of its objects")
    return made


def _toc_entries(toc: bytes) -> list[dict[str, Any]]:
    """The TOC's entries, each a mapping of the fields it may hold, of the types they must be."""
    try:
        doc = parse_json(toc, what="the TOC", error=DamagedFileError, pairs=_unique)
    except DamagedFileError as exc:
        fail(exc.message)
    if (
        not isinstance(doc, dict)
        or doc.get("version") != 1
        or not isinstance(doc.get("entries"), list)
        or set(doc) != {"version", "entries"}
    ):
        fail("the TOC is not an eStargz TOC of version 1")
    entries: list[Any] = doc["entries"]
    if len(entries) > 2 * limits.MAX_TOC_ENTRIES:
        fail(f"the TOC lists {len(entries)} entries; the limit is {2 * limits.MAX_TOC_ENTRIES}")
    for i, e in enumerate(entries):
        if (
            not isinstance(e, dict)
            or not isinstance(e.get("name"), str)
            or not isinstance(e.get("type"), str)
        ):
            fail(f"the TOC's entry {i} has no name or type")
        if set(e) - _KEYS:
            fail(
                f"the TOC's entry {i} ({quoted(e['name'])}) has a key the format does not name: "
                f"{quoted(min(set(e) - _KEYS))}"
            )
        bad = [k for k in _INTS if k in e and not is_int(e[k])] + [
            k for k in _TEXTS if k in e and not isinstance(e[k], str)
        ]
        if bad:
            fail(f"the TOC's entry {i} ({quoted(e['name'])}) has a {bad[0]} of the wrong type")
        for k in ("digest", "chunkDigest"):
            if k in e and not _DIGEST.fullmatch(e[k]):
                fail(f"the TOC's entry {i} ({quoted(e['name'])}) has a {k} that is no sha256 digest")
    return entries


def _xattrs(e: dict[str, Any], i: int) -> dict[str, bytes]:
    raw = e.get("xattrs") or {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        fail(f"the TOC's entry {i} has extended attributes of the wrong type")
    try:
        return {str(k): base64.b64decode(v, validate=True) for k, v in raw.items()}
    except (binascii.Error, ValueError):
        fail(f"the TOC's entry {i} has an extended attribute that is not base64")


def _said(entry: Entry) -> dict[str, Any]:
    """What the TOC must say of ``entry``."""
    return {
        "name": entry.name, "type": entry.kind, "size": entry.size if entry.kind == "reg" else 0,
        "modtime": mtime_text(entry.mtime),
        "linkName": entry.link if entry.kind in ("symlink", "hardlink") else "",
        "mode": entry.mode, "uid": entry.uid, "gid": entry.gid,
        "devMajor": entry.major if entry.kind in ("char", "block") else 0,
        "devMinor": entry.minor if entry.kind in ("char", "block") else 0,
    }  # fmt: skip


_DATA = ("offset", "chunkOffset", "chunkSize", "chunkDigest", "digest")  # a file's data, no other kind's
_CHUNK_KEYS = frozenset(("name", "type", "offset", "chunkOffset", "chunkSize", "chunkDigest"))
_LINKABLE = ("reg", "symlink", "char", "block", "fifo")  # a folder's hard link is a cycle


def _same(e: dict[str, Any], entry: Entry, k: int) -> None:
    """The TOC's entry ``k`` says what the layer holds of ``entry``."""
    said = {f: e.get(f, 0 if f in _INTS else "") for f in _said(entry)}
    said["name"] = clean(str(said["name"]))
    differs = [f for f, v in _said(entry).items() if said[f] != v]
    if differs or _xattrs(e, k) != entry.xattrs:
        what = differs[0] if differs else "xattrs"
        fail(f"the TOC's entry {k} says {quoted(str(said['name']))} with another {what} than the layer's")


def _match(toc: list[dict[str, Any]], entries: list[Entry]) -> None:
    """The TOC lists exactly ``entries``, in order, and their chunks as the blob holds them."""
    files = [e for e in toc if e["type"] != "chunk"]
    if len(files) != len(entries):
        fail(f"the TOC lists {len(files)} entries; the layer holds {len(entries)}")
    seen: dict[str, str] = {}
    k = 0
    for entry in entries:
        start = k
        _same(toc[k], entry, k)
        # A reader keys entries by name, the last of a name winning (its links, its chunks): one
        # name, one entry.
        if entry.name in seen:
            fail(f"the layer lists {quoted(entry.name)} twice")
        if entry.kind == "hardlink" and seen.get(clean(entry.link)) not in _LINKABLE:
            fail(f"the hard link {quoted(entry.name)} names no entry before it that is no link or folder")
        seen[entry.name] = entry.kind
        k += 1
        while k < len(toc) and toc[k]["type"] == "chunk":
            if set(toc[k]) - _CHUNK_KEYS or clean(toc[k]["name"]) != entry.name:
                fail(
                    f"the TOC's entry {k} is a chunk of {quoted(entry.name)} that says more, or names another"
                )
            k += 1
        if entry.kind == "reg":
            _chunks(toc[start:k], entry)
        elif k > start + 1 or any(toc[start].get(f) for f in _DATA):
            fail(f"the TOC gives {quoted(entry.name)}, a {entry.kind}, the data of a file")


def _chunks(chunks: list[dict[str, Any]], entry: Entry) -> None:
    """A file's TOC entry and its chunk entries against the runs of its data the blob holds."""
    name = quoted(entry.name)
    if entry.size and chunks[0].get("digest") != "sha256:" + entry.whole.hexdigest():
        fail(f"the TOC's digest of {name} is not its content's")
    if not entry.size:
        if len(chunks) > 1 or any(k in chunks[0] for k in ("offset", "chunkDigest", "chunkSize")):
            fail(f"the TOC lists chunks of the empty file {name}")
        return
    if len(chunks) != len(entry.segments):
        fail(
            f"the TOC lists {len(chunks)} chunks of {name}; the blob holds its data in {len(entry.segments)}"
        )
    for c, s in zip(chunks, entry.segments, strict=True):
        size = c.get("chunkSize") or entry.size - s.at
        if (c.get("chunkOffset", 0), c.get("offset", 0), size) != (s.at, s.member, s.size):
            fail(f"the TOC's chunk of {name} at {s.at} names other bytes than the blob holds there")
        if c.get("chunkDigest") != "sha256:" + s.sha.hexdigest():
            fail(f"the TOC's chunk of {name} at {s.at} has a digest its bytes do not hash to")
