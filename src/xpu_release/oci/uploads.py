"""Blob uploads (OCI distribution spec): monolithic (POST, then one PUT) or chunked (PATCH with
Content-Range, then an empty PUT). A broken upload starts again from a fresh session; a token
that expires during one is renewed once. The ``Location`` each answer names is checked by the
transport, which sends credentials to the endpoint's own origin only (a ``Location`` on another
host, a storage service's, is sent none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import requests

from ..errors import WireError
from .transport import BrokenUpload, TokenRenewed, Transport


def upload_blob(
    t: Transport, name: str, repo: str, digest: str, path: Path, *, chunk_size: int | None = None
) -> None:
    """Upload ``path`` as ``digest``: monolithic (POST then PUT) or, with ``chunk_size``,
    chunked (PATCH with Content-Range). A broken upload restarts from a fresh session; a
    token that expires during it is renewed once."""
    scope = f"repository:{repo}:pull,push"
    size = path.stat().st_size
    renewals = 1
    for attempt in range(t.retry.attempts):
        start = t.request("POST", f"/v2/{repo}/blobs/uploads/", scope=scope, ok=(202,))
        location = t.url(_location(start, name), start.url)
        try:
            if chunk_size:
                location = _patch_chunks(t, location, path, size, chunk_size, scope, renewals > 0)
            sep = "&" if "?" in location else "?"
            # Chunked: the chunks are sent, the closing PUT is empty; monolithic: it carries all.
            final = f"{location}{sep}digest={digest}"
            _put_final(t, final, None if chunk_size else path, scope, renewals > 0)
        except TokenRenewed:
            renewals -= 1
            t.on_retry(f"{name}: token expired during the upload of {digest[:19]}; renewed")
            continue
        except BrokenUpload as exc:
            t.backoff(attempt, None, f"upload of {digest[:19]} broke ({exc})")
            continue
        t.stats["uploaded_bytes"] += size
        return
    msg = f"{name}: upload of {digest} kept breaking"
    raise WireError(msg)


def _patch_chunks(
    t: Transport, location: str, path: Path, size: int, chunk_size: int, scope: str, renew: bool
) -> str:
    with path.open("rb") as f:
        offset = 0
        while offset < size:
            block = f.read(chunk_size)
            end = offset + len(block) - 1
            headers = {
                "Content-Type": "application/octet-stream",
                "Content-Range": f"{offset}-{end}",
                "Content-Length": str(len(block)),
            }
            resp = t.once("PATCH", location, headers, block, scope, renew=renew)
            t.stats["sent_bytes"] += len(block)
            if resp.status_code != 202:
                msg = f"PATCH answered {resp.status_code}"
                raise BrokenUpload(msg)
            location = t.url(resp.headers.get("Location") or location, location)
            offset = end + 1
    return location


def _location(resp: requests.Response, name: str) -> str:
    """Where an upload goes on, as the answer that started it says (checked by ``Transport.url``:
    a URL on another host is sent no credentials, one we cannot follow is refused)."""
    location = resp.headers.get("Location")
    if not location:
        msg = f"{name}: the registry started an upload without saying where it goes (no Location)"
        raise WireError(msg)
    return location


def _put_final(t: Transport, url: str, path: Path | None, scope: str, renew: bool) -> None:
    headers = {"Content-Type": "application/octet-stream"}
    if path is None:
        resp = t.once("PUT", url, {**headers, "Content-Length": "0"}, b"", scope, renew=renew)
    else:
        with path.open("rb") as f:
            size = path.stat().st_size
            headers["Content-Length"] = str(size)
            resp = t.once("PUT", url, headers, _Counted(f, size, t.stats), scope, renew=renew)
    if resp.status_code != 201:
        msg = f"PUT answered {resp.status_code}"
        raise BrokenUpload(msg)


class _Counted:
    """A file as an upload's body, counting ``sent_bytes`` as the HTTP client reads it (the
    publish display shows them while a large blob is on its way)."""

    def __init__(self, f: BinaryIO, size: int, stats: dict[str, int]) -> None:
        self.f, self.size, self.stats = f, size, stats

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.stats["sent_bytes"] += len(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        while data := self.read(1 << 16):
            yield data
