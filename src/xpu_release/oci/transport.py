"""The transport under the registry client: one endpoint's HTTP session, TLS, the auth flows
(basic, bearer tokens per scope), redirects, retries with capped exponential backoff and
jitter, and statistics. It knows nothing of manifests or blobs (``registry.py`` does), as
go-containerregistry's ``transport`` package sits under its ``remote``.

Transient failures (429 with Retry-After, 5xx, connection resets, timeouts) are retried; 401
gets one answer to its challenge; 401/403/404 are otherwise definitive. Our login goes to the
endpoint's own origin only (``scheme://host:port``): on every request, the authorization is
added for that origin and no other, so a redirect or an upload ``Location`` on another host
gets none; a token realm gets it as ``auth`` says. Redirects of a GET or HEAD are followed here,
each hop checked (``connection.followed``), at most ``MAX_REDIRECTS``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

import requests

from ..errors import RegistryAuthError, TLSVerifyFailed, WireError
from ..guard import limits
from ..guard.bodies import Pace
from ..guard.reading import ascii_int, parse_json
from ..guard.shown import shown
from ..progress import Sink
from .answers import bare, preload_within, preview, preview_bytes, wait_began, waited_from
from .auth import Challenge, anonymous_realm, check_login_goes, no_login, token_of
from .connection import (
    WATCHDOG,
    Failed,
    Failure,
    checked_ca_file,
    failure,
    followed,
    sent_since,
    session,
)
from .credentials import Credentials
from .deadline import NO_DEADLINE, Deadline, Expired
from .endpoint import Endpoint, Origin

RETRYABLE = {429, 500, 502, 503, 504}
REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0
    # Of one socket operation (connect, one read), and the deadline of an answer's status line
    # and headers once the request is sent (``connection``): a trickle does not reset it.
    timeout: float = 60.0
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
        deadline: Deadline | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry or (lambda _: None)
        self.deadline = deadline or NO_DEADLINE
        self.base = f"{endpoint.scheme}://{endpoint.host}"
        self.origin = Origin.of(self.base + "/")
        self.session = session()
        self._verify: str | bool | None = None  # the CA bundle, once checked (``verify``)
        self._basic: str | None = None  # our login, once a Basic challenge asked for it
        self._tokens: dict[str, str] = {}
        self.stats = {"requests": 0, "retries": 0, "uploaded_bytes": 0, "mounted": 0, "skipped_blobs": 0,
                      "sent_bytes": 0}  # fmt: skip

    def adopt(self, other: Transport) -> None:
        """Start with what ``other`` (a transport to the same endpoint, of the same run) has
        earned: its bearer tokens and its basic login, so a second client of one run does not
        authenticate again. A token that expires is renewed on its 401, by each on its own."""
        assert other.endpoint == self.endpoint
        self._tokens.update(other._tokens)
        self._basic = other._basic
        self._verify = other._verify

    @property
    def verify(self) -> str | bool:
        """What requests checks the host's TLS with: the endpoint's ``ca_file``, read once
        through the guard (a regular file, bounded, holding certificates), else the system's."""
        if self._verify is None:
            self._verify = checked_ca_file(self.endpoint) if self.endpoint.ca_file else True
        return self._verify

    def url(self, path: str, base: str | None = None) -> str:
        """The URL of an API ``path`` of this endpoint, or of a URL the registry named (an
        upload's ``Location``, relative to ``base``, the URL of the answer that named it),
        checked as a redirect is (``connection.followed``)."""
        if base is None and path.startswith("/") and not path.startswith("//"):
            return f"{self.base}{path}"
        return followed(base or self.base + "/", path, what=self.endpoint.name)

    def authorization(self, url: str, scope: str) -> str | None:
        """Our ``Authorization`` for a request to ``url``: the bearer token earned for ``scope``
        or our basic login, and only when ``url`` is on the endpoint's own origin."""
        if Origin.of(url) != self.origin:
            return None
        if scope in self._tokens:
            return f"Bearer {self._tokens[scope]}"
        return self._basic

    # --- one exchange ----------------------------------------------------------------------------

    def send(self, method: str, url: str, *, headers: dict[str, str], data: Any = None, scope: str = "",
             login: tuple[Origin | None, str] | None = None, params: dict[str, str] | None = None,
             ) -> requests.Response:  # fmt: skip
        """One exchange, its answer's body not read: ``method`` on ``url``, with this endpoint's
        authorization for ``scope``, or with ``login`` (an origin and the ``Authorization``
        that goes to it and nowhere else). Redirects of a GET or HEAD are followed, each hop
        checked; a hop to another origin is sent no authorization. ``connection.Failed`` when
        no usable answer came; TLSVerifyFailed; WireError for a redirect we do not follow."""
        for _ in range(limits.MAX_REDIRECTS + 1):
            origin, authorization = login or (self.origin, self.authorization(url, scope))
            sent = dict(headers)
            if authorization is not None and Origin.of(url) == origin:
                sent["Authorization"] = authorization
            resp = self._exchange(method, url, sent, data, params)
            location = resp.headers.get("Location")
            if resp.status_code not in REDIRECTS or method not in ("GET", "HEAD") or not location:
                return resp
            resp.close()
            url = followed(url, location, what=f"{self.endpoint.name}: {method} {bare(url)}")
            params = None  # the redirect's URL is whole
        msg = f"{self.endpoint.name}: {method} was redirected more than {limits.MAX_REDIRECTS} times; stopped"
        raise WireError(msg)

    def _exchange(self, method: str, url: str, headers: dict[str, str], data: Any,
                  params: dict[str, str] | None) -> requests.Response:  # fmt: skip
        """One request on the wire, within what the command's deadline leaves; a long wait told.
        A failure is charged to the deadline from when its answer was waited for (``sent_since``);
        an answer, once its body is read (``preload_within``: the response says ``waited_from``)."""
        self.stats["requests"] += 1
        what = f"{self.endpoint.name}: {method} {bare(url)}"
        timeout = self.deadline.timeout(self.retry.timeout, what, self.base)
        began = time.monotonic()
        told = self.deadline
        sending = data is not None and not isinstance(data, bytes)  # an upload: its meter tells it
        alarm = WATCHDOG.arm(told.notice, lambda: None if sending else told.say(told.waiting(what, timeout)))
        try:
            resp = self.session.request(
                method, url, params=params, headers=headers, data=data, verify=self.verify,
                stream=True, timeout=timeout, allow_redirects=False,
            )  # fmt: skip
        except requests.exceptions.SSLError:
            msg = f"{self.endpoint.name} ({self.endpoint.host}): TLS verification failed; check ca_file"
            raise TLSVerifyFailed(msg) from None
        except requests.RequestException as exc:
            said = failure(exc)
            self.deadline.failed(wait_began(began, timeout), said.why, down=said.unanswered, origin=self.base)
            raise Failed(said) from None
        except ValueError as exc:  # a URL the HTTP client cannot send to, past our checks
            why = f"the URL cannot be used ({shown(str(exc), 80)})"
            raise Failed(Failure(why, temporary=False)) from None
        finally:
            alarm.disarm()
        resp.waited_from = sent_since(began)  # type: ignore[attr-defined]
        if resp.status_code in RETRYABLE:
            self.deadline.failed(waited_from(resp), f"{resp.status_code}", down=True, origin=self.base)
        return resp

    # --- with retries and authentication ---------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        scope: str = "",
        headers: dict[str, str] | None = None,
        data: bytes | BinaryIO | None = None,
        ok: tuple[int, ...] = (200,),
        limit: int | None = limits.MAX_SMALL_ANSWER_BYTES,
    ) -> requests.Response:
        """One API call with retries; returns a response whose status is in ``ok`` or 404
        (callers decide what 404 means); raises on anything else. The body of an ``ok`` answer is
        read here, at most ``limit`` bytes at the transport's pace (a 404's, at most a short
        preview); with ``limit=None`` the caller streams it (``answers.body_pieces``)."""
        attempt, authed_once = 0, False
        url = self.url(path)
        what = f"{self.endpoint.name}: {method} {shown(path, 200)}"
        while True:
            try:
                resp = self.send(method, url, headers=headers or {}, data=data, scope=scope)
                if resp.status_code in ok or resp.status_code == 404:
                    if limit is None:
                        self.deadline.answered(waited_from(resp), self.base, what)
                    else:
                        preload_within(self.deadline, self.base, resp, what, limit, self.retry.pace)
                    return resp
                text = preview(resp, self.retry.pace)
                if resp.status_code == 401 and not authed_once:
                    authed_once = True
                    if authenticate(self, resp, scope):
                        continue
            except Expired:
                raise
            except (Failed, WireError) as exc:  # no answer, or a body too slow, a token service down
                final = given_up(exc, what, attempt + 1, self.retry.attempts)
                if final is not None:
                    raise final from None
                self.backoff(attempt, None, exc.failure.why if isinstance(exc, Failed) else exc.message)
                attempt, authed_once = attempt + 1, authed_once and isinstance(exc, Failed)
                continue
            if resp.status_code in RETRYABLE and attempt + 1 < self.retry.attempts:
                self.backoff(attempt, resp.headers.get("Retry-After"), str(resp.status_code))
                attempt += 1
                continue
            raise refused(self.endpoint, f"{method} {path}", resp.status_code, text)

    def backoff(self, attempt: int, retry_after: str | None, why: str) -> None:
        name = self.endpoint.name
        what = why if why.startswith(f"{name}:") else f"{name}: {why}"
        delay = self.deadline.pause(self.retry.delay(attempt, retry_after), what, self.base)
        self.stats["retries"] += 1
        self.on_retry(f"{self.endpoint.name}: {why}, retrying in {delay:.1f} s")
        time.sleep(delay)

    def once(
        self, method: str, url: str, headers: dict[str, str], body: Any, scope: str, *, renew: bool = False
    ) -> requests.Response:
        """One upload request, no retry here: a broken upload session is restarted whole. With
        ``renew``, a 401 (a token that expired during a long upload) earns a new token and
        restarts the upload (TokenRenewed) instead of failing it."""
        what = f"{self.endpoint.name}: {method} of an upload"
        try:
            resp = self.send(method, self.url(url), headers=headers, data=body, scope=scope)
        except Failed as exc:
            if exc.failure.temporary:
                raise BrokenUpload(exc.failure.why) from None
            msg = f"{what}: {exc.failure.why}"
            raise WireError(msg) from None
        resp._content = preview_bytes(resp, self.retry.pace)  # no caller reads an upload answer's body
        if resp.status_code == 401 and renew:
            self._tokens.pop(scope, None)
            if authenticate(self, resp, scope):
                msg = "401: a new token was issued"
                raise TokenRenewed(msg)
        if resp.status_code in (401, 403):
            msg = f"{self.endpoint.name} refused {method} ({resp.status_code})"
            raise RegistryAuthError(msg)
        if resp.status_code in RETRYABLE:
            raise BrokenUpload(str(resp.status_code))
        self.deadline.answered(waited_from(resp), self.base)
        return resp


def authenticate(t: Transport, resp: requests.Response, scope: str) -> bool:
    """Answer a 401 challenge once: our basic login, or a bearer token from the realm (with
    our login where ``auth.check_login_goes`` lets it go, else anonymously)."""
    challenge = Challenge.read(resp.headers.get("WWW-Authenticate", ""))
    if t.credentials is not None:
        check_login_goes(t.endpoint, challenge)
    elif challenge.scheme != "bearer":
        raise no_login(t.endpoint)
    if challenge.scheme == "basic":
        assert t.credentials is not None
        t._basic = t.credentials.basic
        return True
    if challenge.scheme == "bearer":
        realm = anonymous_realm(t.endpoint, challenge)
        params = {k: v for k, v in challenge.params.items() if k != "realm"}
        params.setdefault("scope", scope)
        t._tokens[scope] = fetch_token(t, realm, params)  # it answers this request's challenge
        return True
    return False


def fetch_token(t: Transport, realm: str, params: dict[str, str]) -> str:
    """A bearer token from ``realm``'s token service (its answer bounded like any other, within
    the command's deadline), asked with our login where there is one (``authenticate`` checked
    the realm). A token service that is down is the registry down (``unanswered``)."""
    what = f"{t.endpoint.name}: the token service"
    login = (Origin.of(realm), t.credentials.basic) if t.credentials is not None else (None, "")
    try:
        resp = t.send("GET", realm, headers={}, params=params, login=login)
    except Failed as exc:
        said = exc.failure
        msg = f"{what} failed: {said.why}"
        raise WireError(msg, temporary=said.temporary, unanswered=said.unanswered) from None
    if resp.status_code in (401, 403):
        resp.close()
        msg = f"{what} refused our credentials ({resp.status_code})"
        raise RegistryAuthError(msg)
    if resp.status_code != 200:
        resp.close()
        down = resp.status_code in RETRYABLE
        msg = f"{what} answered {resp.status_code}"
        raise WireError(msg, status=resp.status_code, temporary=down, unanswered=down)
    preload_within(t.deadline, t.base, resp, what, limits.MAX_SMALL_ANSWER_BYTES, t.retry.pace)
    return token_of(parse_json(resp.content, what=what, error=WireError), what)


def given_up(exc: Failed | WireError, what: str, attempts: int, most: int) -> WireError | None:
    """What a request that got no answer (``Failed``) or no whole one (a temporary
    ``WireError``) after ``attempts`` of ``most`` raises; None: another attempt may do."""
    if isinstance(exc, WireError):
        return exc if not exc.temporary or attempts >= most else None
    said = exc.failure
    if not said.temporary:
        return WireError(f"{what}: {said.why}")
    if attempts >= most:
        msg = f"{what} failed after {attempts} attempts ({said.why})"
        return WireError(msg, temporary=True, unanswered=said.unanswered)
    return None


def refused(endpoint: Endpoint, call: str, status: int, text: str) -> RegistryAuthError | WireError:
    """What an answer that is no success, and is not tried again, raises: 401 and 403 refuse
    our login; another status is the registry's error (one that says "try later" through every
    retry: the endpoint is down)."""
    if status in (401, 403):
        return RegistryAuthError(f"{endpoint.name} ({endpoint.host}) refused {call} ({status})")
    down = status in RETRYABLE
    msg = f"{endpoint.name}: {call} answered {status}: {text}"
    return WireError(msg, status=status, temporary=down, unanswered=down)
