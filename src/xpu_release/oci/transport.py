"""The transport under the registry client: one endpoint's HTTP session, TLS, the auth flows
(basic, bearer tokens per scope), retries with capped exponential backoff and jitter, and
statistics. It knows nothing of manifests or blobs (``registry.py`` does), as
go-containerregistry's ``transport`` package sits under its ``remote``.

Transient failures (429 with Retry-After, 5xx, connection resets, timeouts) are retried; 401
gets one answer to its challenge; 401/403/404 are otherwise definitive. Credentials never
travel over plain HTTP beyond loopback, and a token realm must be https unless the registry
itself is an insecure loopback one.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlparse

import requests
from requests.adapters import HTTPAdapter

from ..errors import RegistryAuthError, TLSVerifyFailed, WireError
from ..guard import limits
from ..guard.bodies import Pace, chunks, read_body
from ..guard.reading import ascii_int, parse_json
from ..guard.shown import shown
from ..progress import Sink
from ..secrets import redact
from .credentials import Credentials
from .endpoint import Endpoint

RETRYABLE = {429, 500, 502, 503, 504}
BLOCK = 1 << 20  # bytes of a request body per send: urllib3's 16 KiB took twice the CPU (bench)


class _Adapter(HTTPAdapter):
    """requests' adapter, sending a body a mebibyte at a time: a 2.35 GB blob to four
    endpoints is 9,000 reads and sends, not 575,000 (0.44 -> 0.19 CPU s per 800 MB here)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **{**kwargs, "blocksize": BLOCK})


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


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0
    timeout: float = 60.0  # of one socket operation (connect, one read)
    pace: Pace | None = None  # how fast a body must arrive (None: ``bodies.DEFAULT_PACE``)

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``: what ``Retry-After`` says, in whole
        seconds (capped; a date, a negative or a ``nan`` is not read), else capped backoff."""
        seconds = ascii_int(retry_after.strip(), most=6) if retry_after else None
        if seconds is not None:
            return min(float(seconds), self.max_delay * 4.0)
        capped = min(self.max_delay, self.base_delay * float(2**attempt))
        return capped / 2 + random.uniform(0, capped / 2)  # jitter, not crypto


class BrokenUpload(Exception):
    """An upload request failed in a way that a fresh upload session may not: restart it."""


class TokenRenewed(BrokenUpload):
    """A 401 in the middle of an upload (an expired token) was answered with a new token: the
    upload restarts with it, once; a second 401 is the registry's answer."""


class Transport:
    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | None,
        retry: RetryPolicy | None = None,
        on_retry: Sink | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry or (lambda _: None)
        self.base = f"{endpoint.scheme}://{endpoint.host}"
        self.session = requests.Session()
        self.session.mount("https://", _Adapter())
        self.session.mount("http://", _Adapter())
        # Passed on every request: a session-level `verify` loses to REQUESTS_CA_BUNDLE.
        self.verify: str | bool = endpoint.ca_file or True
        self._tokens: dict[str, str] = {}
        self.stats = {"requests": 0, "retries": 0, "uploaded_bytes": 0, "mounted": 0, "skipped_blobs": 0,
                      "sent_bytes": 0}  # fmt: skip

    def adopt(self, other: Transport) -> None:
        """Start with what ``other`` (a transport to the same endpoint, of the same run) has
        earned: its bearer tokens and its basic credentials, so a second client of one run does
        not authenticate again. A token that expires is renewed on its 401, by each on its own."""
        assert other.endpoint == self.endpoint
        self._tokens.update(other._tokens)
        self.session.auth = other.session.auth

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base}{path}"

    def authenticate(self, resp: requests.Response, scope: str) -> bool:
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
            what = f"{self.endpoint.name}: the token service"
            # the token answers this request's challenge
            self._tokens[scope] = fetch_token(realm, params, auth, self.retry, self.verify, what)
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
        limit: int = limits.MAX_SMALL_ANSWER_BYTES,
    ) -> requests.Response:
        """One API call with retries; returns a response whose status is in ``ok`` or 404
        (callers decide what 404 means); raises on anything else. Unless ``stream``, the body
        of an ``ok`` answer is read here, at most ``limit`` bytes at the transport's pace (a
        404's, at most a short preview); with ``stream`` the caller reads it (``bodies``)."""
        authed_once = False
        attempt = 0
        while True:
            self.stats["requests"] += 1
            try:
                resp = self.session.request(
                    method,
                    self.url(path),
                    verify=self.verify,
                    headers=self.with_token(headers or {}, scope),
                    data=data,
                    stream=True,  # read here, bounded (or by the caller, through `bodies`)
                    timeout=self.retry.timeout,
                    allow_redirects=True,
                )
            except requests.exceptions.SSLError:
                msg = f"{self.endpoint.name} ({self.endpoint.host}): TLS verification failed; check ca_file"
                raise TLSVerifyFailed(msg) from None
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
            ) as exc:
                if attempt + 1 >= self.retry.attempts:
                    why = type(exc).__name__
                    msg = f"{self.endpoint.name}: {method} {path} failed after {attempt + 1} attempts ({why})"
                    unanswered = isinstance(
                        exc, requests.ConnectionError | requests.exceptions.ConnectTimeout
                    )
                    raise WireError(msg, temporary=True, unanswered=unanswered) from None
                self.backoff(attempt, None, f"{type(exc).__name__}")
                attempt += 1
                continue
            except OSError:
                # requests reads the CA bundle before it connects: a ca_file that is missing or
                # unreadable is the registries file's mistake, told as a TLS failure (exit 7).
                msg = (
                    f"{self.endpoint.name} ({self.endpoint.host}): the ca_file {self.verify} cannot be "
                    "read as a CA bundle; check ca_file in the registries file"
                )
                raise TLSVerifyFailed(msg) from None
            if resp.status_code in ok or resp.status_code == 404:
                if stream:
                    return resp
                try:
                    preload(resp, f"{self.endpoint.name}: {method} {path}", limit, self.retry.pace)
                except WireError as exc:
                    if not exc.temporary or attempt + 1 >= self.retry.attempts:
                        raise
                    self.backoff(attempt, None, exc.message)
                    attempt += 1
                    continue
                return resp
            text = preview(resp, self.retry.pace)
            if resp.status_code == 401 and not authed_once:
                authed_once = True
                if self.authenticate(resp, scope):
                    continue
            if resp.status_code in (401, 403):
                code = resp.status_code
                msg = f"{self.endpoint.name} ({self.endpoint.host}) refused {method} {path} ({code})"
                raise RegistryAuthError(msg)
            if resp.status_code in RETRYABLE and attempt + 1 < self.retry.attempts:
                self.backoff(attempt, resp.headers.get("Retry-After"), str(resp.status_code))
                attempt += 1
                continue
            msg = f"{self.endpoint.name}: {method} {path} answered {resp.status_code}: {text}"
            raise WireError(msg, status=resp.status_code, temporary=resp.status_code in RETRYABLE)

    def with_token(self, headers: dict[str, str], scope: str) -> dict[str, str]:
        """``headers`` plus the bearer token earned for ``scope``, if any."""
        if scope in self._tokens:
            return {**headers, "Authorization": f"Bearer {self._tokens[scope]}"}
        return headers

    def backoff(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = self.retry.delay(attempt, retry_after)
        self.stats["retries"] += 1
        self.on_retry(f"{self.endpoint.name}: {why}, retrying in {delay:.1f} s")
        time.sleep(delay)

    def once(
        self, method: str, url: str, headers: dict[str, str], body: Any, scope: str, *, renew: bool = False
    ) -> requests.Response:
        """One upload request, no retry here: a broken upload session is restarted whole. With
        ``renew``, a 401 (a token that expired during a long upload) earns a new token and
        restarts the upload (TokenRenewed) instead of failing it."""
        headers = self.with_token(headers, scope)
        self.stats["requests"] += 1
        try:
            resp = self.session.request(
                method,
                self.url(url),
                headers=headers,
                data=body,
                timeout=self.retry.timeout,
                verify=self.verify,
                stream=True,
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise BrokenUpload(type(exc).__name__) from None
        resp._content = _preview_bytes(resp, self.retry.pace)  # no caller reads an upload answer's body
        if resp.status_code == 401 and renew:
            self._tokens.pop(scope, None)
            if self.authenticate(resp, scope):
                msg = "401: a new token was issued"
                raise TokenRenewed(msg)
        if resp.status_code in (401, 403):
            msg = f"{self.endpoint.name} refused {method} ({resp.status_code})"
            raise RegistryAuthError(msg)
        if resp.status_code in RETRYABLE:
            raise BrokenUpload(str(resp.status_code))
        return resp


# --- bodies: read here, bounded (guard.bodies) ---------------------------------------------------


def preload(resp: requests.Response, what: str, limit: int, pace: Pace | None) -> None:
    """Read an answer's body now, bounded: ``resp.content`` then holds it (a 404's body, which
    no caller reads, only up to a short preview)."""
    if resp.status_code == 404 or resp.request.method == "HEAD":
        body = _preview_bytes(resp, pace)
    else:
        body = read_body(resp, what=what, limit=limit, pace=pace)
    resp._content = body  # what requests itself does once it has read a body


def _preview_bytes(resp: requests.Response, pace: Pace | None) -> bytes:
    """At most ``MAX_ERROR_BODY_BYTES`` of a body no caller uses but in a message."""
    out = bytearray()
    try:
        for block in chunks(
            resp, what="", limit=limits.MAX_ERROR_BODY_BYTES, pace=pace, chunk=1 << 16, whole=True
        ):
            out += block
    except WireError:
        pass  # longer or slower than a message needs: what arrived is enough
    finally:
        resp.close()
    return bytes(out)


def preview(resp: requests.Response, pace: Pace | None) -> str:
    """The start of an error answer's text, as it may be shown: redacted, sanitized, short."""
    text = _preview_bytes(resp, pace)[:300].decode("utf-8", "replace")
    return shown(redact(text), 300)


def fetch_token(
    realm: str, params: dict[str, str], auth: tuple[str, str] | None, retry: RetryPolicy, verify: str | bool,
    what: str,
) -> str:  # fmt: skip
    """A bearer token from ``realm``'s token service (its answer bounded like any other)."""
    try:
        resp = requests.get(
            realm, params=params, auth=auth, timeout=retry.timeout, verify=verify, stream=True
        )
    except requests.RequestException as exc:
        msg = f"{what} failed: {type(exc).__name__}"
        raise WireError(msg, temporary=True) from None
    if resp.status_code in (401, 403):
        resp.close()
        msg = f"{what} refused our credentials ({resp.status_code})"
        raise RegistryAuthError(msg)
    if resp.status_code != 200:
        resp.close()
        msg = f"{what} answered {resp.status_code}"
        raise WireError(msg, status=resp.status_code, temporary=resp.status_code in RETRYABLE)
    body = read_body(resp, what=what, limit=limits.MAX_SMALL_ANSWER_BYTES, pace=retry.pace)
    data = parse_json(body, what=what, error=WireError)
    token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
    if not isinstance(token, str) or not token:
        msg = f"{what} answered without a token"
        raise WireError(msg)
    return token
