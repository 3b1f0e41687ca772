"""Layer codecs: how a layer's tar becomes a blob, and how a blob becomes the tar again.

A codec is a library and a level: ``isal``, ``zlib-ng`` and ``zlib`` write gzip (which every
engine and registry reads), ``zstd`` writes zstd frames (which Docker before 23 cannot pull, so it
is refused unless the user says the pulling engines accept it). For one library version, level and
member size, a layer's blob is a pure function of the layer: members are cut at fixed offsets,
each compressed alone with no name and mtime 0 (a zstd frame with its checksum). ``key`` names
all of that (and the CPU architecture, whose kernels a library may choose between), so a map
from layer to blob is never shared by two codecs that could write different bytes.

The default is ISA-L's level 2, chosen by measurement (``bench/codecs.py``; the README has the
trade-off): about 8 times zlib's level 6 on two cores (411 against 50 MB/s of layer) for a
blob 15 % larger.

Reading a blob back (the identity check) inflates gzip with ISA-L too, whatever wrote it, and
every member or frame in turn.
"""

from __future__ import annotations

import functools
import platform
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal, Protocol, cast

from ..errors import ConfigError
from ..guard.reading import ascii_int

Library = Literal["isal", "zlib-ng", "zlib", "zstd"]
GZIP_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_GZIP_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"
ZSTD_TYPE = "application/vnd.oci.image.layer.v1.tar+zstd"
LEVELS: dict[Library, range] = {
    "isal": range(0, 4),
    "zlib-ng": range(0, 10),
    "zlib": range(0, 10),
    "zstd": range(1, 20),
}
_DISTRIBUTIONS: dict[Library, str] = {"isal": "isal", "zlib-ng": "zlib-ng", "zstd": "zstandard"}


@functools.cache
def _cpu_class() -> str:
    """``sse4.2`` when this x86-64 CPU has it, ``base`` when not; the machine name elsewhere."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return "any"
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "unknown"
    return "sse4.2" if re.search(r"^flags\s*:.*\bsse4_2\b", flags, re.MULTILINE) else "base"


@dataclass(frozen=True)
class Codec:
    library: Library
    level: int

    def __str__(self) -> str:
        return f"{self.library}:{self.level}"

    @property
    def format(self) -> Literal["gzip", "zstd"]:
        return "zstd" if self.library == "zstd" else "gzip"

    @property
    def media_type(self) -> str:
        return ZSTD_TYPE if self.library == "zstd" else GZIP_TYPE

    @property
    def version(self) -> str:
        """The library's version: its package's (which fixes the C library it carries), or the
        zlib this Python runs."""
        if self.library == "zlib":
            return zlib.ZLIB_RUNTIME_VERSION
        return metadata.version(_DISTRIBUTIONS[self.library])

    @property
    def key(self) -> str:
        """Everything the blob's bytes depend on besides the layer and the member size. ISA-L
        and zlib-ng choose their code by CPU feature; ISA-L's output is one below SSE 4.2 (plain
        C) and one from it up (SSE 4.2, AVX, AVX2 hosts alike: intel/isa-l#140 for the same
        output on every call, IPNP-BIPN/gatk-rs#124 for where it splits), so that is named too."""
        machine = platform.machine() or "unknown"
        cpu = f"-{_cpu_class()}" if self.library in ("isal", "zlib-ng") else ""
        return f"{self.library}-{self.version}-{machine}{cpu}-level-{self.level}"

    def compressor(self) -> Callable[[bytes], bytes]:
        """A function from a member's bytes to its compressed member (thread-safe; the C code
        runs outside the GIL, so members compress on every core)."""
        level = self.level
        if self.library == "isal":
            from isal import igzip

            return lambda data: igzip.compress(data, level, mtime=0)
        if self.library == "zlib-ng":
            from zlib_ng import gzip_ng

            return lambda data: gzip_ng.compress(data, level, mtime=0)  # type: ignore[no-untyped-call]
        if self.library == "zstd":
            import zstandard

            return lambda data: bytes(
                zstandard.ZstdCompressor(level=level, write_checksum=True).compress(data)
            )
        import gzip

        return lambda data: gzip.compress(data, level, mtime=0)


DEFAULT = Codec("isal", 2)


def parse_codec(text: str, *, accept_zstd: bool, where: str) -> Codec:
    """``LIBRARY[:LEVEL]`` (``isal``, ``isal:3``, ``zlib-ng:6``, ``zlib:6``, ``zstd:3``), as
    ``where`` (an option or a setting) gave it. zstd only with ``accept_zstd``."""
    name, _, level_text = text.strip().partition(":")
    if name not in LEVELS:
        choices = ", ".join(LEVELS)
        msg = f"{where}: unknown codec {name!r}; choose one of {choices}, with an optional :LEVEL"
        raise ConfigError(msg)
    library: Library = name
    levels = LEVELS[library]
    if not level_text:
        level = DEFAULT.level if library == "isal" else (3 if library == "zstd" else 6)
    elif (given := ascii_int(level_text, most=2)) is not None and given in levels:
        level = given
    else:
        msg = f"{where}: {library} takes a level from {levels.start} to {levels.stop - 1}, not {level_text!r}"
        raise ConfigError(msg)
    if library == "zstd" and not accept_zstd:
        msg = (
            f"{where}: zstd layers cannot be pulled by Docker before 23 (nor by this stack's engine); "
            "pass --pullers-accept-zstd (or set XPU_RELEASE_PULLERS_ACCEPT_ZSTD=1) once every engine "
            "that pulls the image reads zstd, or choose a gzip codec (isal, zlib-ng, zlib)"
        )
        raise ConfigError(msg)
    try:
        codec = Codec(library, level)
        codec.compressor()  # the library is installed
        _ = codec.version
    except (ImportError, metadata.PackageNotFoundError) as e:
        msg = f"{where}: the {library} library is not installed here ({e})"
        raise ConfigError(msg) from None
    return codec


# --- reading back ------------------------------------------------------------------------------


class _Inflater(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes) -> bytes: ...


def _inflater(media_type: str) -> Callable[[], _Inflater]:
    if media_type == ZSTD_TYPE:
        import zstandard

        return lambda: cast(_Inflater, zstandard.ZstdDecompressor().decompressobj())
    from isal import isal_zlib

    # wbits 47: a gzip or a zlib header, whichever the member has
    return lambda: cast(_Inflater, isal_zlib.decompressobj(wbits=47))


def decompressed(chunks: Iterable[bytes], media_type: str) -> Iterator[bytes]:
    """The uncompressed bytes of a blob read as ``chunks``: every gzip member or zstd frame in
    turn, holding one chunk at a time. Damaged or cut-short data raises ``ValueError``."""
    make = _inflater(media_type)
    inflate = make()
    started = False
    for chunk in chunks:
        data = chunk
        while data:
            started = True
            try:
                out = inflate.decompress(data)
            except Exception as e:  # isal's, zlib's and zstandard's own error classes
                msg = f"not a valid {media_type} stream: {e}"
                raise ValueError(msg) from None
            if out:
                yield out
            if not inflate.eof:
                break
            data = inflate.unused_data  # the next member or frame, if any
            inflate = make()
            started = bool(data)
    if started and not inflate.eof:
        msg = "the compressed stream ends inside a member"
        raise ValueError(msg)
