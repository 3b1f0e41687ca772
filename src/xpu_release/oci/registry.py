"""A client for the OCI distribution API, on ``transport.Transport``.

Manifests with the full Accept list, blob HEAD and download, cross-repository mount,
monolithic and chunked upload, tag lists with ``Link`` paging. Everything read or written is
checked against its digest (``Docker-Content-Digest`` too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlencode

import requests

from ..errors import RegistryAuthError, WireError
from ..guard import limits
from ..guard.bodies import declared_length
from ..guard.reading import Fail
from ..guard.shown import shown
from ..progress import Sink
from .credentials import Credentials
from .deadline import Deadline
from .endpoint import Endpoint
from .model import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    ImageIndex,
    ImageManifest,
    is_digest,
    is_media_type,
    parse,
)
from .store import sha256_digest
from .tags import tag_list
from .transport import RetryPolicy, Transport
from .uploads import upload_blob

__all__ = ["DOCKER_LIST", "DOCKER_MANIFEST", "OCI_INDEX", "OCI_MANIFEST", "Manifest", "RegistryClient",
           "RetryPolicy", "sha256_digest"]  # fmt: skip

MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
CHUNK = 8 << 20


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """A manifest or an index as bytes (what is stored, pushed and hashed: never re-serialized)
    and its parsed, checked view (``view``, ``model.py``)."""

    digest: str
    media_type: str
    body: bytes

    @classmethod
    def read(cls, body: bytes, *, digest: str, media_type: str, what: str, error: Fail) -> Manifest:
        """A manifest read from outside: parsed now, so that a damaged one is ``error`` naming
        ``what`` (a layout's damage, a registry's wrong answer), never a crash further on. The
        media type is the one it states, else the one it was served with (a registry that
        serves it as another type does not make it one: copies and index entries say what the
        bytes are)."""
        view = parse(body, what=what, error=error)
        media = next((m for m in (view.media_type, media_type) if is_media_type(m)), view.media_type)
        manifest = cls(digest=digest, media_type=media, body=body)
        manifest.__dict__["view"] = view  # the cached_property below, filled with what was checked
        return manifest

    @cached_property
    def view(self) -> ImageManifest | ImageIndex:
        """The parsed manifest (one this run made is parsed when first asked)."""
        return parse(self.body, what=self.digest)

    @property
    def is_index(self) -> bool:
        """An image index (several platforms' images): no config or layer of its own."""
        return isinstance(self.view, ImageIndex)

    @property
    def manifests(self) -> tuple[Descriptor, ...]:
        """The manifests an index lists (none for an image manifest)."""
        return self.view.manifests if isinstance(self.view, ImageIndex) else ()

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        """The layers of an image manifest (none for an index)."""
        return self.view.layers if isinstance(self.view, ImageManifest) else ()

    @property
    def subject(self) -> str:
        """The digest of the manifest this one refers to ("" for none)."""
        return self.view.subject.digest if self.view.subject is not None else ""

    def blobs(self) -> list[tuple[str, int]]:
        """(digest, size) of the config and every layer; none for an index, whose manifests are
        documents of their own (``manifests``), each with its blobs."""
        view = self.view
        return [(d.digest, d.size) for d in view.blobs()] if isinstance(view, ImageManifest) else []

    @property
    def config_digest(self) -> str:
        """The config's digest; "" for an image index (several platforms: no config of its own)."""
        return self.view.config.digest if isinstance(self.view, ImageManifest) else ""


class RegistryClient:
    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | None,
        retry: RetryPolicy | None = None,
        on_retry: Sink | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.t = Transport(endpoint, credentials, retry, on_retry, deadline)

    @property
    def stats(self) -> dict[str, int]:
        return self.t.stats

    # --- API -------------------------------------------------------------------------------

    def ping(self) -> None:
        self.t.request("GET", "/v2/")

    def _manifest(self, method: str, repo: str, reference: str) -> requests.Response:
        return self.t.request(
            method,
            f"/v2/{repo}/manifests/{reference}",
            scope=f"repository:{repo}:pull",
            headers={"Accept": MANIFEST_ACCEPT},
            limit=limits.MAX_MANIFEST_BYTES,
        )

    def head_manifest(self, repo: str, reference: str) -> str | None:
        """The digest ``reference`` points at, or None."""
        resp = self._manifest("HEAD", repo, reference)
        if resp.status_code == 404:
            return None
        digest = resp.headers.get("Docker-Content-Digest")
        if digest and is_digest(digest):  # a header that is no digest is not believed: the GET says
            return digest
        manifest = self.get_manifest(repo, reference)
        return manifest.digest if manifest else None

    def get_manifest(self, repo: str, reference: str) -> Manifest | None:
        """The manifest ``reference`` points at, its digest checked against its bytes, or None."""
        resp = self._manifest("GET", repo, reference)
        if resp.status_code == 404:
            return None
        body = resp.content
        digest = sha256_digest(body)
        claimed = resp.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            said = shown(claimed, 80)
            msg = f"{self.endpoint.name}: manifest {repo}:{reference} claims {said} but hashes to {digest}"
            raise WireError(msg)
        if reference.startswith("sha256:") and reference != digest:
            msg = f"{self.endpoint.name}: manifest {reference} hashes to {digest}"
            raise WireError(msg)
        media = resp.headers.get("Content-Type", "").split(";")[0].strip()
        what = f"{self.endpoint.name}: manifest {repo}:{reference}"
        return Manifest.read(body, digest=digest, media_type=media, what=what, error=WireError)

    def put_manifest(self, repo: str, reference: str, manifest: Manifest) -> None:
        """Write ``manifest`` at ``reference``. A registry that answers that a blob or manifest
        it names is unknown, while each of them is confirmed present by HEAD, is read as another
        writer linking the same content at that moment (distribution rewrites a repository's
        link files in place, so a concurrent reader can find one empty): the PUT is tried again
        after a pause. A reference really missing stays an error, naming it."""
        for attempt in range(self.t.retry.attempts):
            try:
                self._put_manifest(repo, reference, manifest)
                return
            except WireError as exc:
                if exc.status != 400 or not _names_unknown_content(str(exc)):
                    raise
                missing = _missing_references(self, repo, manifest)
                if missing:
                    msg = (
                        f"{self.endpoint.name}: {repo} does not hold {missing[0]}, which the manifest "
                        f"{manifest.digest[:19]} names; nothing is served from it"
                    )
                    raise WireError(msg, status=400) from None
                if attempt + 1 >= self.t.retry.attempts:
                    raise
                self.t.backoff(attempt, None, "a concurrent writer was linking a blob the manifest names")
        msg = f"{self.endpoint.name}: PUT manifest {repo}:{reference} was not accepted"
        raise WireError(msg)

    def _put_manifest(self, repo: str, reference: str, manifest: Manifest) -> None:
        resp = self.t.request(
            "PUT",
            f"/v2/{repo}/manifests/{reference}",
            scope=f"repository:{repo}:pull,push",
            headers={"Content-Type": manifest.media_type},
            data=manifest.body,
            ok=(201, 200),
        )
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: PUT manifest {repo}:{reference} answered 404"
            raise WireError(msg)
        claimed = resp.headers.get("Docker-Content-Digest")
        if claimed and claimed != manifest.digest:
            msg = f"{self.endpoint.name}: stored {repo}:{reference} as {claimed}, expected {manifest.digest}"
            raise WireError(msg)

    def blob_exists(self, repo: str, digest: str) -> bool:
        resp = self.t.request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull")
        return resp.status_code == 200

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount within this registry; False if the registry would not mount
        (or a token service will not let us read ``from_repo``: the blob is then uploaded)."""
        query, scope = urlencode({"mount": digest, "from": from_repo}), f"repository:{repo}:pull,push"
        try:
            resp = self.t.request("POST", f"/v2/{repo}/blobs/uploads/?{query}", scope=scope, ok=(201, 202))
        except RegistryAuthError:
            return False
        if resp.status_code == 201:
            self.t.stats["mounted"] += 1
            return True
        if resp.status_code == 202 and resp.headers.get("Location"):
            self.t.request("DELETE", resp.headers["Location"], scope=scope, ok=(204, 200))
        return False

    def ensure_blob(
        self,
        repo: str,
        digest: str,
        source: Callable[[], Path],
        *,
        mount_from: str | None = None,
        chunk_size: int | None = None,
    ) -> None:
        """Make ``repo`` hold the blob ``digest``: left alone if it is there (counted as
        skipped), mounted from ``mount_from`` (a repository of this registry) if that registry
        will, else uploaded from the file ``source()`` names (asked only then: it may have to
        fetch or write the file)."""
        if self.blob_exists(repo, digest):
            self.stats["skipped_blobs"] += 1
            return
        if mount_from is not None and self.mount_blob(repo, digest, mount_from):
            return
        self.upload_blob(repo, digest, source(), chunk_size=chunk_size)

    def blob_bytes(self, repo: str, digest: str, limit: int = limits.MAX_CONFIG_BYTES) -> bytes:
        """A small blob (a config, a document) in memory, at most ``limit`` bytes, digest checked."""
        path = f"/v2/{repo}/blobs/{digest}"
        resp = self.t.request("GET", path, scope=f"repository:{repo}:pull", limit=limit)
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is missing"
            raise WireError(msg)
        body = resp.content
        if sha256_digest(body) != digest:
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is not what its digest says"
            raise WireError(msg)
        return body

    def blob_size(self, repo: str, digest: str) -> int | None:
        """The size a blob is served with (HEAD; -1 if the registry does not say), None if missing."""
        resp = self.t.request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull")
        if resp.status_code == 404:
            return None
        length = declared_length(resp, f"{self.endpoint.name}: blob {digest} of {repo}")
        return length if length is not None else -1

    def open_blob(self, repo: str, digest: str) -> requests.Response:
        """A blob as a stream (``iter_content``); WireError if missing. The caller hashes it."""
        resp = self.t.request(
            "GET", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull", limit=None
        )
        if resp.status_code == 404:
            resp.close()
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is missing"
            raise WireError(msg)
        return resp

    def delete_manifest(self, repo: str, digest: str) -> None:
        """Remove a manifest (and every tag on it) by digest, where the registry allows deletes."""
        resp = self.t.request(
            "DELETE", f"/v2/{repo}/manifests/{digest}", scope=f"repository:{repo}:*", ok=(202, 200)
        )
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: no manifest {digest} in {repo} to delete"
            raise WireError(msg)

    def upload_blob(self, repo: str, digest: str, path: Path, *, chunk_size: int | None = None) -> None:
        """Upload ``path`` as ``digest`` (``uploads.upload_blob``: monolithic or chunked)."""
        upload_blob(self.t, self.endpoint.name, repo, digest, path, chunk_size=chunk_size)

    def tags(self, repo: str, *, page: int = 1000) -> list[str]:
        """Every tag of ``repo``, following ``Link: <…>; rel="next"`` pages (ACR and Harbor page
        tag lists; the distribution spec's ``n``/``last``), each tag once. A WireError for a
        list that does not end: a page that names a next one but brought no tag not seen before
        (a registry whose every page is empty and names another), more than ``MAX_TAG_PAGES``
        pages or ``MAX_TAGS`` tags."""
        return tag_list(self.t, repo, page)


def _missing_references(client: RegistryClient, repo: str, manifest: Manifest) -> list[str]:
    """What ``manifest`` names that ``repo`` does not hold (blobs by HEAD; the manifests an
    index lists, by HEAD of the manifest)."""
    view = manifest.view
    blobs = [d.digest for d in view.blobs()] if isinstance(view, ImageManifest) else []
    missing = [b for b in blobs if not client.blob_exists(repo, b)]
    listed = [d.digest for d in view.manifests] if isinstance(view, ImageIndex) else []
    return missing + [m for m in listed if client.head_manifest(repo, m) != m]


UNKNOWN_CONTENT = ("MANIFEST_BLOB_UNKNOWN", "BLOB_UNKNOWN", "MANIFEST_UNKNOWN", "DIGEST_INVALID")


def _names_unknown_content(message: str) -> bool:
    """A 400 on a manifest PUT that says content it names is unknown (or its link unreadable)."""
    return any(code in message for code in UNKNOWN_CONTENT)
