"""The HTTP connection under the transport: how a request goes out and what counts as an answer.

- **Headers have a deadline.** A socket's timeout bounds one read, and a server that sends a
  header byte every few seconds resets it for ever (a mirror once ran for its full 900 s). So
  the status line and the headers must arrive whole within the request's read timeout of the
  request being sent: at that moment the connection is shut, and the wait ends as a timeout.
  Bodies are bounded by ``guard.bodies`` (a deadline and a minimum rate).
- **A URL a registry names is checked** (an upload's ``Location``, a redirect, a token realm):
  http or https, well formed, never from https down to plain http.
- **The CA file is read through the guard** (``checked_ca_file``): a regular file, bounded,
  holding certificates, before requests is handed its path (a FIFO hung every command).
- **Every failure of the HTTP client is told for what it is** (``failure``): no connection (a
  registry that does not answer), a timeout, an answer that is not HTTP, a header we cannot
  read, a TLS failure; never as something else.
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.auth import HTTPBasicAuth
from requests.utils import get_auth_from_url
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..errors import TLSVerifyFailed, WireError
from ..guard import limits
from ..guard.reading import read_file
from ..guard.shown import shown
from .endpoint import Endpoint, Origin

if TYPE_CHECKING:
    from requests.sessions import _Settings

BLOCK = 1 << 20  # bytes of a request body per send: urllib3's 16 KiB took twice the CPU (bench)


class _Alarm:
    """One deadline of the watchdog: ``action`` runs at it unless ``disarm`` came first."""

    __slots__ = ("_action", "_lock", "fired", "settled")

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action
        self._lock = threading.Lock()
        self.fired = self.settled = False

    def ring(self) -> None:
        with self._lock:
            if not self.settled and self._action is not None:
                self.fired = self.settled = True
                self._action()

    def disarm(self) -> bool:
        """No ring after this (and what it would have done is let go); whether it rang before."""
        with self._lock:
            self.settled, self._action = True, None
            return self.fired


class _Watchdog:
    """Every answer's deadline on one thread of the process (a timer thread started per request
    cost a thread each: some 90 a publish of a small image, thousands for a release with many
    referrers). Deadlines are kept in a heap; a disarmed one is dropped when it comes up. A
    forked child starts with none of its parent's (they are the parent's connections)."""

    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._ready = threading.Condition()
        self._heap: list[tuple[float, int, _Alarm]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], None]) -> _Alarm:
        alarm = _Alarm(action)
        with self._ready:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), alarm))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="xpu-release-deadlines", daemon=True)
                self._thread.start()
            self._ready.notify()
        return alarm

    def _run(self) -> None:
        with self._ready:
            while True:
                while self._heap and self._heap[0][2].settled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._ready.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._ready.wait(wait)
                    continue
                with contextlib.suppress(Exception):  # one connection's trouble ends no other deadline
                    heapq.heappop(self._heap)[2].ring()  # a socket shut: returns at once


WATCHDOG = _Watchdog()


def _shut(sock: Any) -> None:
    """Shut ``sock`` so that a read waiting on it returns at once (TLS through an HTTPS proxy is a
    wrapper without ``shutdown``: its socket underneath); already closed: nothing waits on it."""
    raw = sock if hasattr(sock, "shutdown") else getattr(sock, "socket", None)
    with contextlib.suppress(OSError):
        if raw is not None:
            raw.shutdown(socket.SHUT_RDWR)
        else:
            sock.close()


def socket_of(resp: Any) -> Any:
    """The socket an answer's body arrives on (None: not found, or the body was read)."""
    fp = getattr(getattr(resp, "raw", None), "_fp", None)
    return getattr(getattr(getattr(fp, "fp", None), "raw", None), "_sock", None)


def read_within(resp: Any, seconds: float, read: Callable[[], Any], what: str) -> Any:
    """``read()`` of ``resp``'s body, its socket shut at ``seconds``: a read blocked on a body
    that never comes returns then (the pace's clock only runs when bytes arrive), as a
    temporary WireError saying so."""
    sock = socket_of(resp)
    alarm = WATCHDOG.arm(max(seconds, 0.0), lambda: _shut(sock)) if sock is not None else None
    try:
        got = read()
    except WireError:
        if alarm is None or not alarm.disarm():
            raise
        got = None
    fired = alarm.disarm() if alarm is not None else False
    if fired:
        msg = f"{what}: the answer did not arrive within {seconds:.0f} s; stopped"
        raise WireError(msg, temporary=True)
    return got


_SENT = threading.local()  # when this thread's last request was sent whole (``sent_since``)


def sent_since(began: float) -> float:
    """When the request this thread began at ``began`` (``time.monotonic``) was sent whole, its
    body too (``began`` if it was not): from then on, the client waits for its answer."""
    at = getattr(_SENT, "at", None)
    return at if at is not None and at >= began else began


class _HeadersDeadline:
    """A connection whose answer's status line and headers must arrive within its read timeout
    (``timeout``, which urllib3 sets just before it waits for them), however they trickle."""

    sock: socket.socket | None
    timeout: Any

    def getresponse(self) -> Any:
        _SENT.at = time.monotonic()  # the request is sent whole: what follows is waiting
        deadline, sock = self.timeout, self.sock
        if not isinstance(deadline, int | float) or sock is None:
            return super().getresponse()  # type: ignore[misc]
        alarm = WATCHDOG.arm(deadline, lambda: _shut(sock))
        try:
            response = super().getresponse()  # type: ignore[misc]
        except Exception:
            if not alarm.disarm():  # not cut by the deadline: the failure is what it says
                raise
            response = None
        finally:  # on every way out (an interrupt too): no shutdown of a socket after its request
            fired = alarm.disarm()
        if fired:  # cut, or cut the moment the headers arrived: the connection is gone either way
            msg = f"the answer's headers did not arrive within {deadline:g} s"
            raise TimeoutError(msg) from None
        return response


class _Connection(_HeadersDeadline, HTTPConnection):
    pass


class _TLSConnection(_HeadersDeadline, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


class Adapter(HTTPAdapter):
    """requests' adapter with the headers' deadline, sending a body a mebibyte at a time: a
    2.35 GB blob to four endpoints is 9,000 reads and sends, not 575,000 (0.44 -> 0.19 CPU s
    per 800 MB here)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **{**kwargs, "blocksize": BLOCK})
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}


def _as_sent(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """The request's own ``Authorization``, as the transport set it; else the login its URL
    carries (``https://user:token@host/…``), as requests itself takes it; else none."""
    if "Authorization" not in request.headers:
        user, password = get_auth_from_url(request.url or "")
        if user or password:
            HTTPBasicAuth(user, password)(request)
    return request


class _OwnLogins(requests.Session):
    """A session whose logins are xpu-release's own, and that reads the environment once:

    - ``~/.netrc`` is never read. requests reads it (or ``$NETRC``) for every request that has
      no ``auth``, and for every redirect: a file outside the guard (a FIFO there hung every
      request), and an entry for a registry's host replaced the ``Authorization`` we send. A
      login comes from the settings (``XPU_RELEASE_USERNAME``, the artifact token) or from an
      artifact URL's own ``user:token@``, nowhere else.
    - The environment's proxy and CA settings (``HTTPS_PROXY``, ``NO_PROXY``,
      ``REQUESTS_CA_BUNDLE``) still apply, read once per origin and session instead of on every
      request (each read walked the whole environment)."""

    def __init__(self) -> None:
        super().__init__()
        self.auth = _as_sent  # an auth of the session's: requests then looks for no other
        self._environment: dict[tuple[str, str, str], _Settings] = {}

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        """requests' own on a redirect (our ``Authorization`` never goes to another host),
        without reading ``~/.netrc`` for the new one."""
        before, after = response.request.url or "", prepared_request.url or ""
        if "Authorization" in prepared_request.headers and self.should_strip_auth(before, after):  # type: ignore[no-untyped-call]
            del prepared_request.headers["Authorization"]

    def merge_environment_settings(
        self, url: str | bytes | None, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> _Settings:
        if proxies or not isinstance(url, str):  # proxies of the caller's: requests' own merge
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        parsed = urlsplit(url)
        key = (parsed.scheme, parsed.netloc, repr((stream, verify, cert)))
        found = self._environment.get(key)
        if found is None:
            found = super().merge_environment_settings(url, {}, stream, verify, cert)
            self._environment[key] = found
        proxies = dict(found["proxies"])  # the caller's own copy
        return {
            "proxies": proxies,
            "stream": found["stream"],
            "verify": found["verify"],
            "cert": found["cert"],
        }


class _Session(_OwnLogins):
    """A session that leaves redirects to the transport: requests reads a redirect's
    ``Location`` even when told not to follow it (``http://[::1`` raised its ValueError there)."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


def session() -> requests.Session:
    """A session for one endpoint: the adapter above for http and https, redirects not read."""
    made = _Session()
    made.mount("https://", Adapter())
    made.mount("http://", Adapter())
    return made


def outside_session() -> requests.Session:
    """A session for an artifact server (fetch, preflight): requests' redirects (our
    ``Authorization`` dropped at another host), the logins and environment of ``_OwnLogins``."""
    return _OwnLogins()


# --- hosts and URLs -----------------------------------------------------------------------------


def followed(base: str, location: str, *, what: str) -> str:
    """The URL a registry names (``Location``), resolved against the URL that named it, if it is
    one we may follow: http or https, well formed, not from https down to plain http. WireError
    (exit 7) naming it otherwise."""
    try:
        url = urljoin(base, location.strip())
    except ValueError:
        url = ""
    target, source = Origin.of(url), Origin.of(base)
    if target is None:
        msg = f"{what}: the registry names {shown(location, 120)!r}, no http or https URL; not followed"
        raise WireError(msg)
    if source is not None and source.scheme == "https" and target.scheme == "http":
        msg = f"{what}: the registry names {shown(location, 120)!r}, plain HTTP from HTTPS; not followed"
        raise WireError(msg)
    return url


# --- TLS ---------------------------------------------------------------------------------------

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----")


def checked_ca_file(endpoint: Endpoint) -> str:
    """The endpoint's ``ca_file``, once it is known to be a regular file (a FIFO would hang
    every request: the TLS library opens it as it connects), within ``MAX_CA_BYTES``, holding
    PEM certificates that load; TLSVerifyFailed (exit 7, the registries file's TLS) naming it
    otherwise. The path is what requests is handed (it reads the file itself)."""
    path = Path(endpoint.ca_file or "")
    what = f"{endpoint.name} ({endpoint.host}): the ca_file {shown(path, 200)}"
    hint = "; check ca_file in the registries file"
    text = read_file(path, what=what, limit=limits.MAX_CA_BYTES, error=lambda m: TLSVerifyFailed(m + hint))
    pems = _PEM.findall(text.decode("ascii", "replace"))
    try:
        ssl.create_default_context(cadata="\n".join(pems)) if pems else None
    except (ssl.SSLError, ValueError):
        pems = []
    if not pems:
        msg = f"{what} holds no PEM certificate that loads{hint}"
        raise TLSVerifyFailed(msg)
    return str(path)


# --- failures ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """What went wrong with one request, as the transport tells it: ``why`` in a few words;
    ``temporary``: trying again may help; ``unanswered``: no answer came at all (no connection,
    or no status line within the timeout), as opposed to one that is not HTTP."""

    why: str
    temporary: bool
    unanswered: bool = False


class Failed(Exception):
    """A request that brought no usable answer (the transport retries it, or says why not)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.why)
        self.failure = failure


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (urllib3 and requests wrap the real failure in their args)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 20:
        e = todo.pop()
        if any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [a for a in e.args if isinstance(a, BaseException)]
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
    return seen


def failure(exc: requests.RequestException) -> Failure:
    """How a failure of the HTTP client is told (TLS is the caller's: ``requests.SSLError``)."""
    name = type(exc).__name__
    causes = _causes(exc)
    if isinstance(exc, requests.exceptions.ReadTimeout):  # the status line did not come in time
        said = next((str(c) for c in causes if isinstance(c, TimeoutError) and "headers" in str(c)), "")
        return Failure(f"{name}: {said}" if said else name, temporary=True, unanswered=True)
    if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
        dropped = ConnectionError | http.client.IncompleteRead  # a connection closed: no answer
        wrong = [c for c in causes if isinstance(c, http.client.HTTPException) and not isinstance(c, dropped)]
        garbage = wrong[0] if wrong else None
        if garbage is not None:  # it answered, with something that is not HTTP
            said = shown(str(garbage), 60)
            return Failure(f"the answer is not HTTP: {type(garbage).__name__} {said}", temporary=True)
        return Failure(name, temporary=True, unanswered=isinstance(exc, requests.ConnectionError))
    if isinstance(exc, requests.Timeout):
        return Failure(name, temporary=True, unanswered=isinstance(exc, requests.ConnectTimeout))
    if isinstance(exc, requests.exceptions.InvalidHeader):
        return Failure(f"the answer has a header we cannot read ({shown(str(exc), 80)})", temporary=False)
    if isinstance(exc, requests.TooManyRedirects):
        return Failure("too many redirects", temporary=False)
    return Failure(f"{name}: {shown(str(exc), 80)}", temporary=False)
