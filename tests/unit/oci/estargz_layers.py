"""eStargz layers made for the tests: a normalized layer tar, our writer's layer of it, the
check fed in blocks, and a TOC edited and written again (a TOC that lies, well formed)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from xpu_release.oci import estargz, estargzwrite, toc
from xpu_release.oci.codec import DEFAULT, Codec
from xpu_release.oci.estargz import (
    FOOTER_SIZE,
    TOC_DIGEST_ANNOTATION,
    TOC_NAME,
    UNCOMPRESSED_SIZE_ANNOTATION,
    Written,
)

MIB = 1 << 20
BIG = os.urandom(9 * MIB)  # three chunks: two whole, one of 1 MiB
EXACT = os.urandom(4 * MIB)  # one whole chunk


def layer_tar(files: dict[str, bytes | None] | None = None) -> bytes:
    """A normalized layer tar (sorted, PAX, mtimes clamped), as ``image.layers`` writes one."""
    links = files is None
    files = files or {
        "usr/": None, "usr/bin/": None, "usr/bin/big": BIG, "usr/bin/exact": EXACT,
        "usr/bin/empty": b"", "usr/bin/small": b"hello\n", "usr/lib/": None,
    }  # fmt: skip
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime = 946684800
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        if links:
            link = tarfile.TarInfo("usr/bin/hard")
            link.type, link.linkname, link.mtime = tarfile.LNKTYPE, "usr/bin/small", 946684800
            tar.addfile(link)
            sym = tarfile.TarInfo("usr/bin/sym")
            sym.type, sym.linkname, sym.mtime = tarfile.SYMTYPE, "small", 946684800
            sym.pax_headers = {"SCHILY.xattr.user.note": "\udcff\udcfe binary"}
            tar.addfile(sym)
    return out.getvalue()


def written(
    source: bytes, prefetch: tuple[str, ...] = (), codec: Codec = DEFAULT
) -> tuple[Written, bytes, bytes]:
    tar_out, blob_out = io.BytesIO(), io.BytesIO()
    with ThreadPoolExecutor(2) as pool:
        w = estargzwrite.write(
            io.BytesIO(source), tar_out, blob_out, codec=codec, pool=pool, prefetch=prefetch
        )
    return w, tar_out.getvalue(), blob_out.getvalue()


def problem_of(blob: bytes, annotations: dict[str, str], block: int = MIB) -> str | None:
    check_ = toc.LayerCheck(annotations)
    for i in range(0, len(blob), block):
        check_.feed(blob[i : i + block])
    return check_.problem


def toc_of(blob: bytes) -> dict[str, Any]:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        member = tar.getmember(TOC_NAME)
        data = tar.extractfile(member)
        assert data is not None
        parsed: dict[str, Any] = json.loads(data.read())
        return parsed


def with_toc(blob: bytes, edit: Callable[[dict[str, Any]], None]) -> tuple[bytes, dict[str, str]]:
    """The blob with its TOC edited by ``edit`` and written again as our writer would (its own
    member, the footer), and the annotations that name the new TOC: a TOC that lies, well formed."""
    offset = int(blob[-FOOTER_SIZE:][16:32], 16)
    doc = toc_of(blob)
    edit(doc)
    data = json.dumps(doc, separators=(",", ":")).encode()
    info = tarfile.TarInfo(TOC_NAME)
    info.size, info.mode, info.mtime = len(data), 0o644, 946684800
    head = info.tobuf(tarfile.PAX_FORMAT)
    member = head + data + b"\0" * (-len(data) % 512) + b"\0" * 1024
    body = blob[:offset] + gzip.compress(member, mtime=0)
    unpacked = len(gzip.decompress(blob[:offset])) + len(member)
    annotations = {TOC_DIGEST_ANNOTATION: "sha256:" + hashlib.sha256(data).hexdigest(),
                   UNCOMPRESSED_SIZE_ANNOTATION: str(unpacked)}  # fmt: skip
    return body + estargz.footer(offset), annotations
