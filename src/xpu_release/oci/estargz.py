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

The writer is ``oci/estargzwrite.py``; the reader that holds a blob against its TOC is
``oci/toc.py`` (with ``oci/tarstream.py``). This module is what both say of the format.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 4 << 20  # bytes of a file per gzip member (the snapshotter's default chunk size)

TOC_NAME = "stargz.index.json"

PREFETCH_LANDMARK = ".prefetch.landmark"

NO_PREFETCH_LANDMARK = ".no.prefetch.landmark"

TOC_DIGEST_ANNOTATION = "containerd.io/snapshot/stargz/toc.digest"

UNCOMPRESSED_SIZE_ANNOTATION = "io.containers.estargz.uncompressed-size"

FOOTER_SIZE = 51

# Mtime of the entries this module adds (the landmark, the TOC): the moment every layer's files
# are clamped to (image.layers.MTIME_EPOCH, repeated here: oci/ is below image/).
ENTRY_MTIME = 946684800
_OWN_NAMES = (TOC_NAME, PREFETCH_LANDMARK, NO_PREFETCH_LANDMARK)  # entries the writer adds

_XATTR = "SCHILY.xattr."

_TYPES = {
    tarfile.REGTYPE: "reg", tarfile.AREGTYPE: "reg", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink", tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo",
}  # fmt: skip


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


def utf8_names(info: tarfile.TarInfo) -> None:
    """The entry's names are UTF-8: a TOC is JSON, and a name tarfile kept as bytes (an escaped
    surrogate) would be read by the snapshotter as another name."""
    for text in (info.name, info.linkname, *info.pax_headers):
        if not text.isascii() and any("\udc80" <= c <= "\udcff" for c in text):
            msg = f"the layer's entry {info.name!r} has a name that is not UTF-8, which a TOC cannot say"
            raise ValueError(msg)


def toc_entry(info: tarfile.TarInfo) -> dict[str, Any]:
    """The TOC's entry for ``info``, with the fields the snapshotter reads, empty ones left out
    as Go's ``omitempty`` does."""
    kind = _TYPES.get(info.type)
    if kind is None:
        msg = f"the layer's entry {info.name!r} is of tar type {info.type!r}, which eStargz cannot hold"
        raise ValueError(msg)
    utf8_names(info)
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
