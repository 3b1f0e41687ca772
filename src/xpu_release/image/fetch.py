"""Fetch wheels and artifacts on the host, verified by sha256, into a content-addressed cache.

Build containers never reach the network: what they install is fetched here first, checked
against the lock or the manifest, and copied into the build context.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..errors import BuildFailed
from ..files import sha256_file, touch
from ..guard.bodies import chunks
from ..guard.limits import MAX_ARTIFACT_BYTES
from ..secrets import redact
from ..settings import cache_dir, cache_folder


def _download(url: str, dest: Path, token: str | None) -> None:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        shutil.copyfile(unquote(parsed.path), dest)
        return
    from ..oci.connection import outside_session  # requests, imported by the commands that fetch

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with outside_session() as session, session.get(url, headers=headers, stream=True, timeout=60) as resp:
        if resp.status_code in (401, 403):
            msg = f"{url} refused us ({resp.status_code}); set XPU_RELEASE_ARTIFACT_TOKEN"
            raise BuildFailed(msg)
        resp.raise_for_status()
        with dest.open("wb") as f:  # bounded in size and pace: a trickling server fails, never hangs
            for block in chunks(resp, what=url, limit=MAX_ARTIFACT_BYTES):
                f.write(block)


def fetch(
    url: str, sha256: str, filename: str, *, token: str | None = None, pip_fallback: str | None = None
) -> Path:
    """The cached file for ``sha256``, downloading ``url`` (or ``pip download`` of
    ``pip_fallback``) on a miss. A file whose digest differs is refused and not cached."""
    target = cache_dir() / "blobs" / sha256 / filename
    if target.is_file():
        touch(target.parent)
        return target
    cache_folder("blobs", sha256)  # a folder inside the cache, never a link out of it
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / filename
        try:
            _download(url, partial, token)
        except Exception as exc:  # OSError, our own refusal, or requests' errors
            if not pip_fallback:
                why = str(exc) if isinstance(exc, BuildFailed) else f"{type(exc).__name__}: {exc}"
                msg = f"cannot fetch {url}: {redact(why)}"
                raise BuildFailed(msg) from None
            partial = _pip_download(pip_fallback, Path(tmp), url)
        got = sha256_file(partial)
        if got != sha256:
            msg = f"{filename} from {url} has sha256 {got}, expected {sha256}; refusing it"
            raise BuildFailed(msg)
        partial.replace(target)
    return target


def _pip_download(requirement: str, into: Path, url: str) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(into / "pip"),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    files = list((into / "pip").glob("*")) if (into / "pip").is_dir() else []
    if proc.returncode != 0 or len(files) != 1:
        msg = f"cannot fetch {url}, nor `pip download {requirement}`: {proc.stderr.strip()[-500:]}"
        raise BuildFailed(msg)
    return files[0]


def link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
