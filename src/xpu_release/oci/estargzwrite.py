"""The eStargz writer: a normalized layer tar (``image.layers``) in, the eStargz layer's tar (what
the engine loads and the smoke test runs) and its blob (what is pushed) out, in one pass
(``write``). The format, its names and its order are ``oci/estargz.py``'s.

Each regular file, and each 4 MiB chunk of a larger one, starts a gzip member of its own. The
members are compressed on a pool (the codec runs outside the GIL) and written in order; each
chunk is hashed with its member's compression, and the TOC names the chunks' offsets and
digests once every member before it is written.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from .codec import Codec
from .estargz import (
    CHUNK,
    ENTRY_MTIME,
    NO_PREFETCH_LANDMARK,
    PREFETCH_LANDMARK,
    TOC_NAME,
    Written,
    footer,
    ordered,
    toc_entry,
)

_LANDMARK_BYTES = b"\x0f"

_EMPTY = "sha256:" + hashlib.sha256(b"").hexdigest()


class Sink(Protocol):
    """Where bytes go: a file, or the guarded writer's ``Out``."""

    def write(self, data: bytes, /) -> object: ...


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


@dataclass
class _Chunk:
    entry: dict[str, Any]
    member: int  # the index of the member the chunk starts (hashed with its compression)
    whole: dict[str, Any] | None = None  # the file's entry, when this chunk is all of the file


def _landmark(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(_LANDMARK_BYTES), 0o644, ENTRY_MTIME
    return info


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
            entry = toc_entry(info)
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
