"""eStargz layers: a layer a lazy puller can mount before it is downloaded, and every other puller
takes as the gzip layer it is.

The format (containerd's stargz-snapshotter, ``estargz/``): the layer's tar, compressed so that
every regular file, and every 4 MiB chunk of a larger one, starts a gzip member of its own; then
a member holding one more tar entry, ``stargz.index.json`` (the table of contents: every entry,
and for each chunk its offset in the blob and the sha256 of its bytes) with the tar's end; then a
51-byte footer, an empty gzip member whose extra field says where the TOC's member starts. The
manifest names the TOC's digest and the layer's unpacked size in two annotations
(``annotations``), which the snapshotter checks before it trusts the TOC.

The files a workload opens first (the prefetch profile) come first, followed by
``.prefetch.landmark``; with none in the layer, the layer starts with ``.no.prefetch.landmark``.
The snapshotter fetches what is before the landmark at once, the rest as it is read.

The TOC is part of the tar, so the layer's diff_id (and the image's id) covers it, and with it
the offsets the compressor made: for one codec (library version, level, CPU class: its ``key``),
profile and set of files, the layer is a pure function of them, as a gzip layer's blob is. A
runner whose codec writes other bytes makes another layer; ``Written.diff_id`` is checked where
a layer is made again (``remake``).

``write`` takes a normalized layer tar (``image.layers``), writes the eStargz layer's tar (what
the engine loads and the smoke test runs) and its blob (what is pushed) in one pass.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import struct
import tarfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from .codec import Codec

CHUNK = 4 << 20  # bytes of a file per gzip member (the snapshotter's default chunk size)
TOC_NAME = "stargz.index.json"
PREFETCH_LANDMARK = ".prefetch.landmark"
NO_PREFETCH_LANDMARK = ".no.prefetch.landmark"
_LANDMARK_BYTES = b"\x0f"
TOC_DIGEST_ANNOTATION = "containerd.io/snapshot/stargz/toc.digest"
UNCOMPRESSED_SIZE_ANNOTATION = "io.containers.estargz.uncompressed-size"
FOOTER_SIZE = 51
# Mtime of the entries this module adds (the landmark, the TOC): the moment every layer's files
# are clamped to (image.layers.MTIME_EPOCH, repeated here: oci/ is below image/).
ENTRY_MTIME = 946684800
_XATTR = "SCHILY.xattr."
_TYPES = {
    tarfile.REGTYPE: "reg", tarfile.AREGTYPE: "reg", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink", tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo",
}  # fmt: skip


class Sink(Protocol):
    """Where bytes go: a file, or the guarded writer's ``Out``."""

    def write(self, data: bytes, /) -> object: ...


def written_profile(layer: Path) -> tuple[str, ...] | None:
    """The prefetch profile the eStargz layer tar at ``layer`` was written with (the names before
    its ``.prefetch.landmark``; none before ``.no.prefetch.landmark``), read in one pass; None
    when it is no eStargz layer's (its last entry is not the TOC). Written again with it, the
    layer comes out the same."""
    names: list[str] = []
    profile: tuple[str, ...] | None = None
    last = ""
    with tarfile.open(layer, mode="r:") as tar:
        for member in tar:
            last = clean(member.name)
            if profile is None and last == PREFETCH_LANDMARK:
                profile = tuple(names)
            elif profile is None and last == NO_PREFETCH_LANDMARK:
                profile = ()
            elif profile is None:
                names.append(last)
    return (profile or ()) if last == TOC_NAME else None


def footer(toc_offset: int) -> bytes:
    """The 51-byte footer: an empty gzip member (a stored block) whose extra field is subfield
    ``SG`` holding ``%016xSTARGZ``, the TOC member's offset (``estargz/gzip.go``)."""
    subfield = b"%016xSTARGZ" % toc_offset
    extra = b"SG" + struct.pack("<H", len(subfield)) + subfield
    head = b"\x1f\x8b\x08\x04" + b"\0\0\0\0" + b"\0\xff" + struct.pack("<H", len(extra)) + extra
    return head + b"\x01\x00\x00\xff\xff" + b"\0" * 8


@dataclass(frozen=True, kw_only=True)
class Written:
    """What ``write`` made: the layer's identity and what the manifest says of its blob."""

    diff_id: str  # sha256 of the eStargz tar (TOC included)
    blob_digest: str
    blob_size: int
    toc_digest: str  # sha256 of the TOC's JSON
    uncompressed_size: int  # bytes of the tar

    def annotations(self) -> dict[str, str]:
        return {
            TOC_DIGEST_ANNOTATION: self.toc_digest,
            UNCOMPRESSED_SIZE_ANNOTATION: str(self.uncompressed_size),
        }


@dataclass
class _Member:
    """One gzip member being filled: its uncompressed bytes so far, and how many of its first
    bytes are a chunk of a file, hashed with the member's compression (0: none)."""

    parts: list[bytes] = field(default_factory=list)
    chunk: int = 0

    def add(self, data: bytes) -> None:
        if data:
            self.parts.append(data)


class _Out:
    """The blob and the tar, written as members are closed: each member compressed on ``pool``
    (the codec runs outside the GIL), written in order; a member's offset in the blob is known
    once every member before it is compressed, so entries name their member by its index."""

    def __init__(self, tar_out: Sink, blob_out: Sink, codec: Codec, pool: ThreadPoolExecutor) -> None:
        self.tar_out, self.blob_out = tar_out, blob_out
        self.compress: Callable[[bytes], bytes] = codec.compressor()
        self.pool = pool
        self.diff = hashlib.sha256()
        self.blob = hashlib.sha256()
        self.tar_size = 0
        self.offsets: list[int] = []  # the blob offset of every member written so far
        self.blob_size = 0
        self.current = _Member()
        self.pending: list[Future[tuple[bytes, str]]] = []
        self.digests: list[str] = []  # of every member written so far: the digest of its chunk ("": none)

    def put(self, data: bytes) -> None:
        self.diff.update(data)
        self.tar_out.write(data)
        self.tar_size += len(data)
        self.current.add(data)

    def cut(self, chunk: int = 0) -> int:
        """Close the current member (if it holds anything) and start the next, whose first
        ``chunk`` bytes are a chunk of a file; return the index the next one has."""
        if self.current.parts:
            piece, first = b"".join(self.current.parts), self.current.chunk
            self.pending.append(self.pool.submit(self._pack, piece, first))
            while len(self.pending) > 8:
                self._write_oldest()
        self.current = _Member(chunk=chunk)
        return len(self.offsets) + len(self.pending)

    def _pack(self, piece: bytes, chunk: int) -> tuple[bytes, str]:
        """On the pool: the member compressed, and the digest of the chunk it starts with."""
        digest = "sha256:" + hashlib.sha256(memoryview(piece)[:chunk]).hexdigest() if chunk else ""
        return self.compress(piece), digest

    def _write_oldest(self) -> None:
        member, digest = self.pending.pop(0).result()
        self.digests.append(digest)
        self.offsets.append(self.blob_size)
        self.blob.update(member)
        self.blob_out.write(member)
        self.blob_size += len(member)

    def drain(self) -> None:
        self.cut()
        while self.pending:
            self._write_oldest()

    def raw(self, data: bytes) -> None:
        """Bytes of the blob that are no member of the tar (the footer)."""
        self.blob.update(data)
        self.blob_out.write(data)
        self.blob_size += len(data)


def _pad(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")


def _utf8_names(info: tarfile.TarInfo) -> None:
    """The entry's names are UTF-8: a TOC is JSON, and a name tarfile kept as bytes (an escaped
    surrogate) would be read by the snapshotter as another name."""
    for text in (info.name, info.linkname, *info.pax_headers):
        if not text.isascii() and any("\udc80" <= c <= "\udcff" for c in text):
            msg = f"the layer's entry {info.name!r} has a name that is not UTF-8, which a TOC cannot say"
            raise ValueError(msg)


def _toc_entry(info: tarfile.TarInfo) -> dict[str, Any]:
    """The TOC's entry for ``info``, with the fields the snapshotter reads, empty ones left out
    as Go's ``omitempty`` does."""
    kind = _TYPES.get(info.type)
    if kind is None:
        msg = f"the layer's entry {info.name!r} is of tar type {info.type!r}, which eStargz cannot hold"
        raise ValueError(msg)
    _utf8_names(info)
    entry: dict[str, Any] = {"name": info.name, "type": kind}
    if kind == "reg" and info.size:
        entry["size"] = info.size
    if modtime := mtime_text(int(info.mtime)):
        entry["modtime"] = modtime
    if kind in ("symlink", "hardlink"):
        entry["linkName"] = info.linkname
    for key, value in (("mode", info.mode), ("uid", info.uid), ("gid", info.gid)):
        if value:
            entry[key] = value
    if kind in ("char", "block"):
        if info.devmajor:
            entry["devMajor"] = info.devmajor
        if info.devminor:
            entry["devMinor"] = info.devminor
    xattrs = {
        k[len(_XATTR) :]: base64.b64encode(v.encode("utf-8", "surrogateescape")).decode("ascii")
        for k, v in sorted(info.pax_headers.items())
        if k.startswith(_XATTR)
    }
    if xattrs:
        entry["xattrs"] = xattrs
    return entry


def mtime_text(epoch: int) -> str:
    """An mtime as the TOC writes it (RFC 3339, UTC; empty for 0, as Go's ``formatModtime``)."""
    if not epoch:
        return ""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Chunk:
    entry: dict[str, Any]
    member: int  # the index of the member the chunk starts (hashed with its compression)
    whole: dict[str, Any] | None = None  # the file's entry, when this chunk is all of the file


_EMPTY = "sha256:" + hashlib.sha256(b"").hexdigest()


def _landmark(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(_LANDMARK_BYTES), 0o644, ENTRY_MTIME
    return info


def clean(name: str) -> str:
    """A tar name as the snapshotter keys it (Go's ``cleanEntryName``: ``path.Clean("/"+name)``
    without its leading slash)."""
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def ordered(members: Sequence[tarfile.TarInfo], prefetch: Iterable[str]) -> tuple[list[tarfile.TarInfo], int]:
    """The layer's entries in eStargz order, and how many come before the landmark: the
    profile's files in its order, each after its parent folders and a hard link's target (as
    ``estargz/build.go``'s ``moveRec``), then the rest in the layer's order. A path of the
    profile that is not in this layer is passed over (it is in another layer)."""
    by_name = {clean(m.name): m for m in members}
    first: dict[str, tarfile.TarInfo] = {}

    def move(name: str, depth: int = 0) -> None:
        if not name or name in first or name not in by_name or depth > 256:
            return
        parent = name.rpartition("/")[0]
        move(parent, depth + 1)
        m = by_name[name]
        if m.islnk():
            move(clean(m.linkname), depth + 1)
        first[name] = m

    for path in prefetch:
        if clean(path) in by_name:
            move(clean(path))
    rest = [m for m in members if clean(m.name) not in first and clean(m.name) not in _OWN_NAMES]
    return [*first.values(), *rest], len(first)


_OWN_NAMES = (TOC_NAME, PREFETCH_LANDMARK, NO_PREFETCH_LANDMARK)


def write(
    source: IO[bytes],
    tar_out: Sink,
    blob_out: Sink,
    *,
    codec: Codec,
    pool: ThreadPoolExecutor,
    prefetch: Sequence[str] = (),
    chunk: int = CHUNK,
) -> Written:
    """Write the eStargz form of the layer tar ``source`` (seekable): its tar to ``tar_out``,
    its blob to ``blob_out``. A landmark or TOC the source already has is replaced."""
    out = _Out(tar_out, blob_out, codec, pool)
    chunks: list[_Chunk] = []
    entries: list[dict[str, Any]] = []
    with tarfile.open(fileobj=source, mode="r:") as tar:
        members, before = ordered(tar.getmembers(), prefetch)
        landmark = _landmark(PREFETCH_LANDMARK if before else NO_PREFETCH_LANDMARK)
        stream = [*members[:before], landmark, *members[before:]]
        for info in stream:
            entry = _toc_entry(info)
            entries.append(entry)
            out.put(_header(info))
            if entry["type"] != "reg":
                continue
            if info is landmark:
                pieces: Iterator[bytes] = iter((_LANDMARK_BYTES,))
            else:
                fh = tar.extractfile(info)
                assert fh is not None  # a regular file has data
                pieces = _pieces(fh, info.size, chunk)
            _write_file(out, entry, entries, chunks, pieces, chunk, info.size)
            out.put(_pad(info.size))
    toc = _toc_bytes(entries, chunks, out)
    return _finish(out, toc)


def _pieces(fh: IO[bytes], size: int, chunk: int) -> Iterator[bytes]:
    """The file's bytes, ``chunk`` at a time (the last piece shorter)."""
    left = size
    while left:
        want, parts = min(chunk, left), []
        while want:
            piece = fh.read(want)
            if not piece:
                msg = "the layer tar ends inside a file"
                raise ValueError(msg)
            parts.append(piece)
            want -= len(piece)
        part = b"".join(parts)
        left -= len(part)
        yield part


def _write_file(
    out: _Out, entry: dict[str, Any], entries: list[dict[str, Any]], chunks: list[_Chunk],
    pieces: Iterator[bytes], chunk: int, size: int,
) -> None:  # fmt: skip
    """A regular file's data: each chunk of it in a member of its own, the first chunk's fields
    on the file's own entry, the others on ``chunk`` entries after it (``estargz.go``'s
    ``appendTar``: a chunk's size is named when it is a whole chunk). Each chunk is hashed with
    its member's compression, on the pool, and named in the TOC once it is written; a file of
    one chunk has that chunk's digest, and only a longer one is hashed whole here."""
    whole = hashlib.sha256() if size > chunk else None
    written, current = 0, entry
    for part in pieces:
        if current is not entry:
            entries.append(current)
        if written:
            current["chunkOffset"] = written
        if len(part) == chunk:
            current["chunkSize"] = chunk
        chunks.append(_Chunk(current, out.cut(len(part)), None if whole else entry))
        if whole is not None:
            whole.update(part)
        out.put(part)
        written += len(part)
        current = {"name": entry["name"], "type": "chunk"}
    if whole is not None:
        entry["digest"] = "sha256:" + whole.hexdigest()
    elif not size:
        entry["digest"] = _EMPTY


def _toc_bytes(entries: list[dict[str, Any]], chunks: list[_Chunk], out: _Out) -> bytes:
    """The TOC's JSON, once every member before it has its offset."""
    out.drain()
    for c in chunks:
        offset = out.offsets[c.member]
        if offset:
            c.entry["offset"] = offset
        c.entry["chunkDigest"] = out.digests[c.member]
        if c.whole is not None:
            c.whole["digest"] = c.entry["chunkDigest"]
    # Key order as the snapshotter writes them (estargz/types.go), for a reader's eye only.
    order = (
        "name", "type", "size", "modtime", "linkName", "mode", "uid", "gid", "offset",
        "devMajor", "devMinor", "xattrs", "digest", "chunkOffset", "chunkSize", "chunkDigest",
    )  # fmt: skip
    ranked = [{k: e[k] for k in order if k in e} for e in entries]
    return json.dumps({"version": 1, "entries": ranked}, separators=(",", ":"), ensure_ascii=False).encode()


def _finish(out: _Out, toc: bytes) -> Written:
    """The TOC's member (its entry and the tar's end), then the footer."""
    toc_offset = out.blob_size
    info = tarfile.TarInfo(TOC_NAME)
    info.size, info.mode, info.mtime = len(toc), 0o644, ENTRY_MTIME
    out.put(_header(info) + toc + _pad(len(toc)) + b"\0" * (2 * tarfile.BLOCKSIZE))
    out.drain()
    out.raw(footer(toc_offset))
    return Written(
        diff_id="sha256:" + out.diff.hexdigest(),
        blob_digest="sha256:" + out.blob.hexdigest(),
        blob_size=out.blob_size,
        toc_digest="sha256:" + hashlib.sha256(toc).hexdigest(),
        uncompressed_size=out.tar_size,
    )
