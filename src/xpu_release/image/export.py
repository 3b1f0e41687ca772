"""Reading layers out of the engine: one pass over ``docker save`` of an image, keeping its
config's exact bytes and the layers asked for, each handed on as soon as it is complete."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import StackError
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


def save_layers(
    engine: Engine,
    image_id: str,
    wanted: set[str],
    into: Path,
    on_layer: Callable[[str, Path], None] | None = None,
) -> tuple[bytes, dict[str, Path]]:
    """Stream ``docker save`` of ``image_id`` once: return its config's exact bytes, and write
    the layer tars whose diff_id is in ``wanted`` into ``into`` (diff_id → file).
    ``on_layer(diff_id, file)`` is called as each one is complete, while the stream goes on
    (so a caller can work on a layer while the next one arrives)."""
    import hashlib
    import tarfile

    found: dict[str, Path] = {}
    config = b""
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
            elif member.name.endswith("/layer.tar") and wanted - set(found):
                tmp = into / f"saved-{uuid.uuid4().hex}.tar"
                sha = hashlib.sha256()
                with tmp.open("wb") as out:
                    while chunk := fh.read(chunk_size):
                        sha.update(chunk)
                        out.write(chunk)
                digest = "sha256:" + sha.hexdigest()
                if digest in wanted and digest not in found:
                    found[digest] = tmp
                    if on_layer is not None:
                        on_layer(digest, tmp)
                else:
                    tmp.unlink()
    missing = sorted(wanted - set(found))
    if "sha256:" + hashlib.sha256(config).hexdigest() != image_id or missing:
        msg = f"the engine's export of {image_id} lacks its config or the layers {missing}"
        raise StackError(msg)
    return config, found
