"""Reading layers out of the engine: one pass over ``docker save`` of an image, keeping its
config's exact bytes and the layers asked for, each handed to a sink while it streams (the
first push compresses it as it arrives; normalization writes it to a file)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import StackError
from ..guard.reading import ascii_int
from ..oci.store import DigestMap
from .engine import Engine


class _ChunkReader(io.RawIOBase):
    """A file object over an iterator of byte chunks (docker-py's ``get_image`` stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buffer))
        b[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


class LayerSink(Protocol):
    """Where one layer of the export goes while it arrives: ``write`` its bytes in order, then
    ``keep`` it (it is one of the layers asked for; ``diff_id`` is its content's sha256) or
    ``drop`` it."""

    def write(self, data: bytes) -> None: ...

    def keep(self, diff_id: str) -> None: ...

    def drop(self) -> None: ...


def layer_sizes() -> DigestMap:
    """diff_id → the size of the layer's tar. A diff_id is the sha256 of those very bytes, so
    the size is a function of it (kept forever); the engine's export gives a layer back byte
    for byte as it was loaded (its tar-split data)."""
    return DigestMap("layer-sizes")


class _Guess:
    """Which streamed layers need no sink, from the sizes of the image's layers known here. A
    layer whose size is no wanted layer's is read past when every wanted size is known (the
    size is a function of the diff_id). When some are not (a layer never seen here), a layer of
    the size of one known not to be wanted is read past too. Either way, should a layer asked
    for not have come (a guess gone wrong, a damaged cache entry), the export is streamed again
    with nothing read past."""

    def __init__(self, layers: Sequence[str], wanted: set[str]) -> None:
        known = layer_sizes()
        self.sizes = {d: n for d in layers if (n := ascii_int(known.get(d) or "")) is not None}
        self.others = {v for d, v in self.sizes.items() if d not in wanted}
        self.skipped = False

    def skip(self, size: int, left: set[str]) -> bool:
        """Read past a layer of ``size`` while ``left`` are still to come?"""
        if size in {self.sizes[d] for d in left if d in self.sizes}:
            return False
        if all(d in self.sizes for d in left) or size in self.others:
            self.skipped = True
            return True
        return False


def stream_layers(
    engine: Engine,
    image_id: str,
    wanted: set[str],
    open_layer: Callable[[int], LayerSink],
    layers: Sequence[str] = (),
) -> bytes:
    """Stream ``docker save`` of ``image_id`` and return its config's exact bytes. Each layer
    that may be one asked for (by diff_id) is handed to a sink of ``open_layer(its size)`` as it
    streams: the export names a layer by an engine-internal id, so which one it was is known
    only once its bytes are hashed, and then it is kept or dropped. ``layers`` (the image's
    diff_ids) lets the known sizes spare the layers that cannot be one asked for (``_Guess``)."""
    guess = _Guess(layers, wanted) if layers else None
    config, found = _stream(engine, image_id, wanted, open_layer, guess)
    if guess is not None and guess.skipped and wanted - found:
        config, again = _stream(engine, image_id, wanted - found, open_layer, None)
        found |= again
    missing = sorted(wanted - found)
    if "sha256:" + hashlib.sha256(config).hexdigest() != image_id or missing:
        msg = f"the engine's export of {image_id} lacks its config or the layers {missing}"
        raise StackError(msg)
    return config


def _stream(
    engine: Engine,
    image_id: str,
    wanted: set[str],
    open_layer: Callable[[int], LayerSink],
    guess: _Guess | None,
) -> tuple[bytes, set[str]]:
    found: set[str] = set()
    config = b""
    sizes = layer_sizes()
    chunk_size = 1 << 20
    stream = io.BufferedReader(
        _ChunkReader(engine.api.get_image(image_id, chunk_size=chunk_size)), chunk_size
    )
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            fh = tar.extractfile(member) if member.isreg() else None
            if fh is None:
                continue
            if member.name == image_id.split(":")[1] + ".json":
                config = fh.read()
            elif member.name.endswith("/layer.tar") and wanted - found:
                if guess is not None and guess.skip(member.size, wanted - found):
                    continue
                sink = open_layer(member.size)
                sha = hashlib.sha256()
                try:
                    while chunk := fh.read(chunk_size):
                        sha.update(chunk)
                        sink.write(chunk)
                except BaseException:
                    sink.drop()
                    raise
                digest = "sha256:" + sha.hexdigest()
                if sizes.get(digest) != str(member.size):  # learned once, not rewritten per export
                    sizes.put(digest, str(member.size))
                if digest in wanted and digest not in found:
                    found.add(digest)
                    sink.keep(digest)
                else:
                    sink.drop()
    return config, found


class _ToFile:
    """A sink that writes the layer to a file of its own in ``into``."""

    def __init__(self, into: Path, found: dict[str, Path]) -> None:
        self.path = into / f"saved-{uuid.uuid4().hex}.tar"
        self._out = self.path.open("wb")
        self._found = found

    def write(self, data: bytes) -> None:
        self._out.write(data)

    def keep(self, diff_id: str) -> None:
        self._out.close()
        self._found[diff_id] = self.path

    def drop(self) -> None:
        self._out.close()
        self.path.unlink(missing_ok=True)


def save_layers(
    engine: Engine, image_id: str, wanted: set[str], into: Path, layers: Sequence[str] = ()
) -> tuple[bytes, dict[str, Path]]:
    """Stream ``docker save`` of ``image_id``: return its config's exact bytes, and write the
    layer tars whose diff_id is in ``wanted`` into ``into`` (diff_id → file)."""
    found: dict[str, Path] = {}
    config = stream_layers(engine, image_id, wanted, lambda _size: _ToFile(into, found), layers)
    return config, found
