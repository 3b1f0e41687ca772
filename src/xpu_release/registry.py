"""A client for the OCI distribution API on ``requests``.

Ping, basic auth and the bearer-token flow, manifests with the full Accept list, blob HEAD,
cross-repository mount, monolithic and chunked upload. Everything read or written is checked
against its digest (``Docker-Content-Digest`` too). Transient failures (429 with Retry-After,
5xx, connection resets, timeouts) are retried with capped exponential backoff and jitter;
401/403/404 are definitive and never retried.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlencode, urljoin, urlparse

import requests

from .credentials import Credentials
from .endpoints import Endpoint
from .errors import PublishError, RegistryAuthError
from .secrets import redact

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
RETRYABLE = {429, 500, 502, 503, 504}
CHUNK = 8 << 20


def _is_loopback(host: str) -> bool:
    """``host[:port]`` names this machine: localhost, 127.0.0.0/8 or ::1."""
    import ipaddress

    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0
    timeout: float = 60.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_delay * 4.0)
            except ValueError:
                pass
        capped = min(self.max_delay, self.base_delay * float(2**attempt))
        return capped / 2 + random.uniform(0, capped / 2)  # jitter, not crypto


@dataclass(frozen=True, kw_only=True)
class Manifest:
    digest: str
    media_type: str
    body: bytes

    @property
    def data(self) -> dict[str, Any]:
        return json.loads(self.body)  # type: ignore[no-any-return]

    def blobs(self) -> list[tuple[str, int]]:
        """(digest, size) of the config and every layer."""
        d = self.data
        if "manifests" in d:
            msg = f"{self.digest} is an image index; multi-platform copies are not supported yet"
            raise PublishError(msg)
        return [(d["config"]["digest"], d["config"]["size"])] + [
            (x["digest"], x["size"]) for x in d["layers"]
        ]

    @property
    def config_digest(self) -> str:
        """The config's digest; "" for an image index (several platforms: no config of its own)."""
        return str((self.data.get("config") or {}).get("digest") or "")


class RegistryClient:
    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry or (lambda _: None)
        self.base = f"{endpoint.scheme}://{endpoint.host}"
        self.session = requests.Session()
        # Passed on every request: a session-level `verify` loses to REQUESTS_CA_BUNDLE.
        self.verify: str | bool = endpoint.ca_file or True
        self._tokens: dict[str, str] = {}
        self.stats = {"requests": 0, "retries": 0, "uploaded_bytes": 0, "mounted": 0, "skipped_blobs": 0}

    # --- transport ---------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base}{path}"

    def _authenticate(self, resp: requests.Response, scope: str) -> bool:
        """Answer a 401 challenge once: basic credentials, or a bearer token from the realm.
        Credentials never travel over plain HTTP beyond loopback, and a token realm must be
        https unless the registry itself is an insecure loopback one."""
        challenge = resp.headers.get("WWW-Authenticate", "")
        if self.credentials is not None:
            self._check_transport(challenge)
        if self.credentials is None and not challenge.lower().startswith("bearer"):
            msg = f"{self.endpoint.name} ({self.endpoint.host}) wants credentials and we have none"
            raise RegistryAuthError(msg)
        if challenge.lower().startswith("basic"):
            assert self.credentials is not None
            self.session.auth = (self.credentials.username, self.credentials.password)
            return True
        if challenge.lower().startswith("bearer"):
            params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            realm = params.pop("realm", "")
            params.setdefault("scope", scope)
            auth = (self.credentials.username, self.credentials.password) if self.credentials else None
            try:
                token_resp = requests.get(
                    realm, params=params, auth=auth, timeout=self.retry.timeout, verify=self.verify
                )
            except requests.RequestException as exc:
                msg = f"token service of {self.endpoint.name} failed: {type(exc).__name__}"
                raise PublishError(msg) from None
            if token_resp.status_code in (401, 403):
                code = token_resp.status_code
                msg = f"{self.endpoint.name} ({self.endpoint.host}) refused our credentials ({code})"
                raise RegistryAuthError(msg)
            token_resp.raise_for_status()
            body = token_resp.json()
            token = body.get("token") or body.get("access_token")
            self._tokens[scope] = token  # the token answers this request's challenge
            return True
        return False

    def _check_transport(self, challenge: str) -> None:
        loopback = _is_loopback(self.endpoint.host)
        if self.endpoint.scheme == "http" and not loopback:
            msg = (
                f"{self.endpoint.name} ({self.endpoint.host}) asks for credentials over plain HTTP; "
                "they are sent over HTTPS only (insecure registries: loopback only)"
            )
            raise RegistryAuthError(msg)
        if challenge.lower().startswith("bearer"):
            realm = dict(re.findall(r'(\w+)="([^"]*)"', challenge)).get("realm", "")
            parsed = urlparse(realm)
            local = self.endpoint.scheme == "http" and loopback and _is_loopback(parsed.netloc)
            if parsed.scheme != "https" and not local:
                msg = (
                    f"{self.endpoint.name} ({self.endpoint.host}) names the token realm {realm!r}; "
                    "credentials go to an https realm only"
                )
                raise RegistryAuthError(msg)

    def request(
        self,
        method: str,
        path: str,
        *,
        scope: str = "",
        headers: dict[str, str] | None = None,
        data: bytes | BinaryIO | None = None,
        stream: bool = False,
        ok: tuple[int, ...] = (200,),
    ) -> requests.Response:
        """One API call with retries; returns a response whose status is in ``ok`` or 404
        (callers decide what 404 means); raises on anything else."""
        authed_once = False
        attempt = 0
        while True:
            self.stats["requests"] += 1
            try:
                resp = self.session.request(
                    method,
                    self._url(path),
                    verify=self.verify,
                    headers=self._with_token(headers or {}, scope),
                    data=data,
                    stream=stream,
                    timeout=self.retry.timeout,
                    allow_redirects=True,
                )
            except requests.exceptions.SSLError:
                msg = f"{self.endpoint.name} ({self.endpoint.host}): TLS verification failed; check ca_file"
                raise PublishError(msg) from None
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
            ) as exc:
                if attempt + 1 >= self.retry.attempts:
                    why = type(exc).__name__
                    msg = f"{self.endpoint.name}: {method} {path} failed after {attempt + 1} attempts ({why})"
                    raise PublishError(msg) from None
                self._backoff(attempt, None, f"{type(exc).__name__}")
                attempt += 1
                continue
            if resp.status_code in ok or resp.status_code == 404:
                return resp
            if resp.status_code == 401 and not authed_once:
                authed_once = True
                if self._authenticate(resp, scope):
                    continue
            if resp.status_code in (401, 403):
                code = resp.status_code
                msg = f"{self.endpoint.name} ({self.endpoint.host}) refused {method} {path} ({code})"
                raise RegistryAuthError(msg)
            if resp.status_code in RETRYABLE and attempt + 1 < self.retry.attempts:
                self._backoff(attempt, resp.headers.get("Retry-After"), str(resp.status_code))
                attempt += 1
                continue
            text = redact(resp.text[:300])
            msg = f"{self.endpoint.name}: {method} {path} answered {resp.status_code}: {text}"
            raise PublishError(msg)

    def _with_token(self, headers: dict[str, str], scope: str) -> dict[str, str]:
        """``headers`` plus the bearer token earned for ``scope``, if any."""
        if scope in self._tokens:
            return {**headers, "Authorization": f"Bearer {self._tokens[scope]}"}
        return headers

    def _backoff(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = self.retry.delay(attempt, retry_after)
        self.stats["retries"] += 1
        self.on_retry(f"{self.endpoint.name}: {why}, retrying in {delay:.1f} s")
        time.sleep(delay)

    # --- API -------------------------------------------------------------------------------

    def ping(self) -> None:
        self.request("GET", "/v2/")

    def _manifest(self, method: str, repo: str, reference: str) -> requests.Response:
        return self.request(
            method,
            f"/v2/{repo}/manifests/{reference}",
            scope=f"repository:{repo}:pull",
            headers={"Accept": MANIFEST_ACCEPT},
        )

    def head_manifest(self, repo: str, reference: str) -> str | None:
        """The digest ``reference`` points at, or None."""
        resp = self._manifest("HEAD", repo, reference)
        if resp.status_code == 404:
            return None
        digest = resp.headers.get("Docker-Content-Digest")
        if digest:
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
            msg = f"{self.endpoint.name}: manifest {repo}:{reference} claims {claimed} but hashes to {digest}"
            raise PublishError(msg)
        if reference.startswith("sha256:") and reference != digest:
            msg = f"{self.endpoint.name}: manifest {reference} hashes to {digest}"
            raise PublishError(msg)
        media = resp.headers.get("Content-Type", "").split(";")[0] or json.loads(body).get("mediaType", "")
        return Manifest(digest=digest, media_type=media, body=body)

    def put_manifest(self, repo: str, reference: str, manifest: Manifest) -> None:
        resp = self.request(
            "PUT",
            f"/v2/{repo}/manifests/{reference}",
            scope=f"repository:{repo}:pull,push",
            headers={"Content-Type": manifest.media_type},
            data=manifest.body,
            ok=(201, 200),
        )
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: PUT manifest {repo}:{reference} answered 404"
            raise PublishError(msg)
        claimed = resp.headers.get("Docker-Content-Digest")
        if claimed and claimed != manifest.digest:
            msg = f"{self.endpoint.name}: stored {repo}:{reference} as {claimed}, expected {manifest.digest}"
            raise PublishError(msg)

    def blob_exists(self, repo: str, digest: str) -> bool:
        resp = self.request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull")
        return resp.status_code == 200

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount within this registry; False if the registry would not mount."""
        query = urlencode({"mount": digest, "from": from_repo})
        resp = self.request(
            "POST", f"/v2/{repo}/blobs/uploads/?{query}", scope=f"repository:{repo}:pull,push", ok=(201, 202)
        )
        if resp.status_code == 201:
            self.stats["mounted"] += 1
            return True
        if resp.status_code == 202 and resp.headers.get("Location"):
            self.request(
                "DELETE", resp.headers["Location"], scope=f"repository:{repo}:pull,push", ok=(204, 200)
            )
        return False

    def blob_bytes(self, repo: str, digest: str, limit: int = 4 << 20) -> bytes:
        """A small blob (an image config) in memory, its digest checked."""
        resp = self.request("GET", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull")
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is missing"
            raise PublishError(msg)
        body = resp.content[: limit + 1]
        if len(body) > limit or sha256_digest(body) != digest:
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is not what its digest says"
            raise PublishError(msg)
        return body

    def download_blob(self, repo: str, digest: str, dest: Path) -> None:
        """Stream a blob to ``dest``, verifying its digest; nothing is kept if it differs."""
        resp = self.request("GET", f"/v2/{repo}/blobs/{digest}", scope=f"repository:{repo}:pull", stream=True)
        if resp.status_code == 404:
            msg = f"{self.endpoint.name}: blob {digest} of {repo} is missing"
            raise PublishError(msg)
        h = hashlib.sha256()
        # A name of its own: two runs sharing the spool never write into each other's file.
        partial = dest.with_name(f"{dest.name}.{uuid.uuid4().hex}.partial")
        try:
            with partial.open("wb") as f:
                for block in resp.iter_content(1 << 20):
                    h.update(block)
                    f.write(block)
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            partial.unlink(missing_ok=True)
            msg = f"{self.endpoint.name}: download of {digest} broke ({type(exc).__name__})"
            raise PublishError(msg) from None
        if "sha256:" + h.hexdigest() != digest:
            partial.unlink(missing_ok=True)
            msg = f"{self.endpoint.name}: blob {digest} hashes to sha256:{h.hexdigest()}"
            raise PublishError(msg)
        partial.replace(dest)

    def upload_blob(self, repo: str, digest: str, path: Path, *, chunk_size: int | None = None) -> None:
        """Upload ``path`` as ``digest``: monolithic (POST then PUT) or, with ``chunk_size``,
        chunked (PATCH with Content-Range). A broken upload restarts from a fresh session."""
        scope = f"repository:{repo}:pull,push"
        size = path.stat().st_size
        for attempt in range(self.retry.attempts):
            start = self.request("POST", f"/v2/{repo}/blobs/uploads/", scope=scope, ok=(202,))
            location = urljoin(self.base + "/", start.headers.get("Location", ""))
            try:
                if chunk_size:
                    location = self._patch_chunks(location, path, size, chunk_size, scope)
                sep = "&" if "?" in location else "?"
                # Chunked: the chunks are sent, the closing PUT is empty; monolithic: it carries all.
                self._put_final(f"{location}{sep}digest={digest}", None if chunk_size else path, scope)
            except _BrokenUpload as exc:
                self._backoff(attempt, None, f"upload of {digest[:19]} broke ({exc})")
                continue
            self.stats["uploaded_bytes"] += size
            return
        msg = f"{self.endpoint.name}: upload of {digest} kept breaking"
        raise PublishError(msg)

    def _patch_chunks(self, location: str, path: Path, size: int, chunk_size: int, scope: str) -> str:
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
                resp = self._once("PATCH", location, headers, block, scope)
                if resp.status_code != 202:
                    msg = f"PATCH answered {resp.status_code}"
                    raise _BrokenUpload(msg)
                location = urljoin(self.base + "/", resp.headers.get("Location", location))
                offset = end + 1
        return location

    def _put_final(self, url: str, path: Path | None, scope: str) -> None:
        headers = {"Content-Type": "application/octet-stream"}
        if path is None:
            resp = self._once("PUT", url, {**headers, "Content-Length": "0"}, b"", scope)
        else:
            with path.open("rb") as f:
                headers["Content-Length"] = str(path.stat().st_size)
                resp = self._once("PUT", url, headers, f, scope)
        if resp.status_code != 201:
            msg = f"PUT answered {resp.status_code}"
            raise _BrokenUpload(msg)

    def _once(
        self, method: str, url: str, headers: dict[str, str], body: Any, scope: str
    ) -> requests.Response:
        """One upload request, no retry here: a broken upload session is restarted whole."""
        headers = self._with_token(headers, scope)
        self.stats["requests"] += 1
        try:
            resp = self.session.request(
                method,
                self._url(url),
                headers=headers,
                data=body,
                timeout=self.retry.timeout,
                verify=self.verify,
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise _BrokenUpload(type(exc).__name__) from None
        if resp.status_code in (401, 403):
            msg = f"{self.endpoint.name} refused {method} ({resp.status_code})"
            raise RegistryAuthError(msg)
        if resp.status_code in RETRYABLE:
            raise _BrokenUpload(str(resp.status_code))
        return resp

    def tags(self, repo: str) -> list[str]:
        resp = self.request("GET", f"/v2/{repo}/tags/list", scope=f"repository:{repo}:pull")
        if resp.status_code == 404:
            return []
        return list(resp.json().get("tags") or [])


class _BrokenUpload(Exception):
    pass
