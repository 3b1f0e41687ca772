"""A layer's blob: its bytes compressed deterministically (``Members``), kept in the publish
spool under its digest, and remembered by diff_id (``CompressedMap``) for every later push on
this runner, whoever made it: the build (which compresses each layer it writes) or a push.

For one codec version, level and member size (all in the map's name), a blob is a pure
function of its layer: the layer is cut into fixed 32 MiB pieces, each compressed on its own
(on every core) and written in order as consecutive gzip members (or zstd frames), which
RFC 1952 and every registry client (Go's gzip, Python's) read as one stream.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..guard.writing import Out
from ..progress import Tally
from ..settings import cache_folder
from . import estargzwrite
from .codec import DEFAULT, GZIP_TYPE, Codec
from .store import DigestMap

MEMBER = 32 << 20  # bytes of layer per gzip member (or zstd frame)


@dataclass(frozen=True, kw_only=True)
class Blob:
    digest: str
    size: int
    media_type: str = GZIP_TYPE
    # What the manifest says of the layer besides (an eStargz layer's TOC digest and size).
    annotations: tuple[tuple[str, str], ...] = ()


def spool_dir() -> Path:
    """The publish spool: compressed layers and documents by digest, in the cache (a folder of
    it, never a link out of it: ``settings.cache_folder``)."""
    return cache_folder("oci-blobs")


def blob_file(spool: Path, digest: str) -> Path:
    """Where ``spool`` keeps the blob ``digest``: the one name the build, the push, the copies to
    the regions and the documents all write and look for."""
    return spool / digest.replace(":", "-")


class CompressedMap:
    """diff_id → the blob ``codec`` makes of it. A pure function of the layer (for one codec
    version, level and member size, all in the map's name), so it is kept across runs; the blob
    itself is in the spool, or at an endpoint. ``form``: an eStargz form's key
    (``image.layerform``), whose layers are written once, with their blob, by ``spool_estargz``."""

    def __init__(self, codec: Codec, form: str = "gzip") -> None:
        self.codec = codec
        name = f"{codec.key}-members-{MEMBER >> 20}M" if form == "gzip" else form
        self._map = DigestMap(f"compressed/{name}")

    def get(self, diff_id: str) -> Blob | None:
        try:
            data = json.loads(self._map.get(diff_id) or "")
            notes = tuple((str(k), str(v)) for k, v in dict(data.get("annotations") or {}).items())
            return Blob(digest=str(data["digest"]), size=int(data["size"]), media_type=self.codec.media_type,
                        annotations=notes)  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, diff_id: str, blob: Blob) -> None:
        """Remember that ``blob`` was made of the layer ``diff_id``, both ways."""
        entry: dict[str, object] = {"digest": blob.digest, "size": blob.size}
        if blob.annotations:
            entry["annotations"] = dict(blob.annotations)
        self._map.put(diff_id, json.dumps(entry))
        unpacked_map().put(blob.digest, diff_id)


def unpacked_map() -> DigestMap:
    """blob digest → the diff_id it unpacks to, for the blobs this runner compressed or checked
    by downloading them. A blob's digest fixes its bytes, so the answer holds forever."""
    return DigestMap("unpacked")


class Members:
    """A layer's bytes in, its blob out. The bytes (in chunks of any size, as they arrive) are
    cut into fixed 32 MiB pieces, compressed on ``pool`` (the codecs run outside the GIL) and
    written in order to a file of the spool as consecutive gzip members (or zstd frames), which
    RFC 1952 and every registry client (Go's gzip, Python's) read as one stream. The pieces
    depend only on the content, so the blob does too. At most three pieces wait at a time."""

    def __init__(
        self, spool: Path, pool: ThreadPoolExecutor, codec: Codec, tally: Tally | None = None
    ) -> None:
        self.spool, self.codec, self.tally = spool, codec, tally
        self._pool, self._member_of = pool, codec.compressor()
        # The guarded way out: a temporary of this run's own, readable by the runner's other jobs,
        # renamed to the blob's digest once known. Not fsync'd: an entry is hashed again the
        # first time a process uses it (a torn one is made again).
        self._out = Out(spool / "layer", within=spool, what="compressed layer", durable=False).__enter__()
        self._sha, self._size = hashlib.sha256(), 0
        self._held: list[bytes | memoryview] = []  # the next piece's bytes so far, as they came
        self._held_size = 0
        self._pending: list[tuple[Future[bytes], int]] = []

    def write(self, data: bytes) -> None:
        # A piece is joined once from the chunks that make it, and a chunk that is a whole piece
        # is passed on as it is: each copy of 32 MiB is a fresh mapping the kernel faults in, and
        # growing, slicing and copying one buffer cost as much CPU as the compressor did.
        if not self._held and len(data) == MEMBER:
            self._submit(data)
            return
        view = memoryview(data)
        while view:
            take = min(len(view), MEMBER - self._held_size)
            self._held.append(view[:take])
            self._held_size += take
            view = view[take:]
            if self._held_size == MEMBER:
                self._submit(self._take_piece())

    def _take_piece(self) -> bytes:
        held, self._held, self._held_size = self._held, [], 0
        return b"".join(held)

    def _submit(self, piece: bytes) -> None:
        self._pending.append((self._pool.submit(self._member_of, piece), len(piece)))
        while len(self._pending) > 2:
            self._write_oldest()

    def _write_oldest(self) -> None:
        job, raw = self._pending.pop(0)
        member = job.result()
        self._sha.update(member)
        self._size += len(member)
        self._out.write(member)
        if self.tally is not None:
            self.tally.add(raw)

    def blob(self) -> Blob:
        """Finish: the blob, now in the spool under its digest."""
        if self._held:
            self._submit(self._take_piece())
        while self._pending:
            self._write_oldest()
        digest = "sha256:" + self._sha.hexdigest()
        self._out.commit(blob_file(self.spool, digest).name)
        self._out.__exit__(None, None, None)
        return Blob(digest=digest, size=self._size, media_type=self.codec.media_type)

    def discard(self) -> None:
        for job, _ in self._pending:
            job.cancel()
        for job, _ in self._pending:
            if not job.cancelled():
                job.exception()
        self._pending.clear()
        self._out.__exit__(None, None, None)  # the temporary is removed


def compress(
    source: Path, spool: Path, pool: ThreadPoolExecutor, codec: Codec = DEFAULT, tally: Tally | None = None
) -> Blob:
    """Compress the layer tar ``source`` into the spool deterministically (see ``Members``)."""
    members = Members(spool, pool, codec, tally)
    try:
        with source.open("rb") as src:
            while data := src.read(MEMBER):
                members.write(data)
        return members.blob()
    except BaseException:
        members.discard()
        raise


def spool_estargz(
    layer: Path,
    dest: Path | None,
    codec: Codec,
    form: str,
    prefetch: tuple[str, ...],
    pool: ThreadPoolExecutor,
) -> str:
    """Write the eStargz form of the layer tar ``layer``: its tar to ``dest`` (what the engine
    loads; None: only hashed, as when a layer is written again for its blob), its blob to the
    spool, remembered under the form's map; return its diff_id."""
    spool = spool_dir()
    with (
        layer.open("rb") as src,
        (dest or Path(os.devnull)).open("wb") as tar,
        Out(spool / "layer", within=spool, what="eStargz layer", durable=False) as out,
    ):
        made = estargzwrite.write(src, tar, out, codec=codec, pool=pool, prefetch=prefetch)
        out.commit(blob_file(spool, made.blob_digest).name)
    blob = Blob(digest=made.blob_digest, size=made.blob_size, media_type=codec.media_type,
                annotations=tuple(made.annotations().items()))  # fmt: skip
    CompressedMap(codec, form).put(made.diff_id, blob)
    return made.diff_id


def spool_layer(layer: Path, diff_id: str, codec: Codec, pool: ThreadPoolExecutor) -> None:
    """Compress the layer tar ``layer`` (whose content hashes to ``diff_id``) into the spool and
    remember its blob for the push; a blob the spool holds for it already is kept (the push
    checks an entry's bytes before it sends it)."""
    known, spool = CompressedMap(codec), spool_dir()
    blob = known.get(diff_id)
    if blob is None or not blob_file(spool, blob.digest).is_file():
        known.put(diff_id, compress(layer, spool, pool, codec))
