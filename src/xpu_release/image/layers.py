"""Deterministic layer tarballs: the same files give the same bytes, on any runner, at any time.

A layer the classic builder writes carries the moment and the place of its build: mtimes of
"now", entries in the order the file system walked them, owner names, access and change times.
``normalize_layer`` rewrites it as a pure function of its files (reproducible-builds.org's
SOURCE_DATE_EPOCH rules, as ko, apko and rules_oci do):

- entries sorted by name, hard links pointing at the first name of their group;
- every mtime clamped to ``MTIME_EPOCH``, no atime or ctime, no owner names;
- numeric owners kept (a base's packages own files as other users), xattrs kept, sorted;
- no compiled bytecode (``__pycache__``): a timestamp ``.pyc`` records the mtime of its source,
  so it could not survive the clamp; the interpreter compiles at import instead.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

CHUNK = 1 << 20
# Bumped whenever the normalization rules change: cached results of an older rule are not reused.
RULES_VERSION = 2
# Where file mtimes are clamped to: one fixed moment (2000-01-01T00:00:00Z, as Bazel's rules_pkg
# does), not the release's date. A layer must be a function of its files alone: were its mtimes
# the release's SOURCE_DATE_EPOCH, every unchanged layer would be new again each month, and an
# upgrade would ship the whole image. The release's epoch dates the config instead.
MTIME_EPOCH = 946684800
_XATTR = "SCHILY.xattr."
_KINDS = {
    tarfile.REGTYPE: "file",
    tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink",
}


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One file of a layer as the comparison sees it (``repro`` names the files that differ)."""

    name: str
    kind: str
    mode: int
    uid: int
    gid: int
    mtime: int
    size: int
    sha256: str
    link: str
    xattrs: tuple[tuple[str, str], ...]


def _is_bytecode(name: str) -> bool:
    parts = name.split("/")
    return "__pycache__" in parts or name.endswith((".pyc", ".pyo"))


def _is_layer_file(name: str) -> bool:
    return name not in ("", ".") and not _is_bytecode(name)


def _clean_name(name: str) -> str:
    name = name.removeprefix("./")
    return name.rstrip("/") if name not in ("", "/") else name


class _Hashing:
    """A write-only file object that hashes (and counts) what passes through it."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def normalize_layer(source: Path, dest: Path, epoch: int = MTIME_EPOCH) -> str:
    """Write ``source`` (an uncompressed layer tar) to ``dest`` normalized; return its diff_id.
    ``source`` may also be the engine's archive of a folder taken as the root (``/out/.``): its
    entry for that root itself (``.``) is no file of the layer, and is left out."""
    with tarfile.open(source, mode="r:") as src:
        members = [m for m in src.getmembers() if _is_layer_file(_clean_name(m.name))]
        by_name = {_clean_name(m.name): m for m in members}
        # A hard-link group is written as its first name (sorted) holding the data, the others
        # linking to it: then the order of the entries can never put a link before its target.
        canonical: dict[str, str] = {}
        groups: dict[str, list[str]] = {}
        for m in members:
            if m.islnk():
                target = _clean_name(m.linkname)
                groups.setdefault(target, [target]).append(_clean_name(m.name))
        for target, names in groups.items():
            if target in by_name:
                first = min(names)
                for n in names:
                    canonical[n] = first
        with dest.open("wb") as raw:
            out = _Hashing(raw)
            with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for name in sorted(by_name):
                    m = by_name[name]
                    info, data_from = _normalized_info(name, m, by_name, canonical, epoch)
                    if data_from is None:
                        tar.addfile(info)
                    else:
                        fh = src.extractfile(data_from)
                        assert fh is not None
                        with fh:
                            tar.addfile(info, fh)
        return out.digest()


def _normalized_info(
    name: str,
    m: tarfile.TarInfo,
    by_name: dict[str, tarfile.TarInfo],
    canonical: dict[str, str],
    epoch: int,
) -> tuple[tarfile.TarInfo, tarfile.TarInfo | None]:
    """The header to write for ``m`` and the member whose data follows it (None: no data)."""
    data_from: tarfile.TarInfo | None = None
    info = tarfile.TarInfo(name)
    if name in canonical:
        first = canonical[name]
        head = by_name[first]
        holder = by_name[_clean_name(head.linkname)] if head.islnk() else head
        if name == first:
            info.type = tarfile.REGTYPE
            info.size = holder.size
            data_from = holder
        else:
            info.type = tarfile.LNKTYPE
            info.linkname = first
        info.mode, info.uid, info.gid = holder.mode, holder.uid, holder.gid
        info.mtime = min(int(holder.mtime), epoch)
        xattr_from = holder
    else:
        info.type = m.type
        info.mode, info.uid, info.gid = m.mode, m.uid, m.gid
        info.linkname = m.linkname
        info.devmajor, info.devminor = m.devmajor, m.devminor
        info.mtime = min(int(m.mtime), epoch)
        if m.isreg():
            info.size = m.size
            data_from = m
        xattr_from = m
    info.uname = info.gname = ""
    info.pax_headers = {k: v for k, v in sorted(xattr_from.pax_headers.items()) if k.startswith(_XATTR)}
    return info, data_from


def entries(path: Path) -> Iterator[Entry]:
    """The files of a layer tar with their metadata and content hashes, in archive order."""
    with tarfile.open(path, mode="r:") as tar:
        for m in tar:
            sha = ""
            if m.isreg():
                fh = tar.extractfile(m)
                assert fh is not None
                h = hashlib.sha256()
                while chunk := fh.read(CHUNK):
                    h.update(chunk)
                sha = h.hexdigest()
            yield Entry(
                name=_clean_name(m.name),
                kind=_KINDS.get(m.type, f"type {m.type!r}"),
                mode=m.mode,
                uid=m.uid,
                gid=m.gid,
                mtime=int(m.mtime),
                size=m.size,
                sha256=sha,
                link=m.linkname,
                xattrs=tuple(sorted((k, v) for k, v in m.pax_headers.items() if k.startswith(_XATTR))),
            )


def compare(a: Path, b: Path, limit: int = 20) -> list[str]:
    """Human-readable differences between two layer tars: which files, and in what."""
    left = {e.name: e for e in entries(a)}
    right = {e.name: e for e in entries(b)}
    out: list[str] = []
    for name in sorted(set(left) | set(right)):
        x, y = left.get(name), right.get(name)
        if x == y:
            continue
        if x is None:
            out.append(f"only in the second build: /{name}")
        elif y is None:
            out.append(f"only in the first build: /{name}")
        else:
            fields = [
                f"{f}: {getattr(x, f)!r} ≠ {getattr(y, f)!r}"
                for f in ("kind", "mode", "uid", "gid", "mtime", "size", "sha256", "link", "xattrs")
                if getattr(x, f) != getattr(y, f)
            ]
            out.append(f"/{name}: " + "; ".join(fields))
        if len(out) >= limit:
            out.append("…")
            break
    order_a = [e.name for e in entries(a)]
    order_b = [e.name for e in entries(b)]
    if not out and order_a != order_b:
        out.append("the same files in another order")
    return out
