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
import http.client
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..errors import TLSVerifyFailed, WireError
from ..guard import limits
from ..guard.reading import read_file
from ..guard.shown import shown
from .endpoint import Endpoint, Origin

BLOCK = 1 << 20  # bytes of a request body per send: urllib3's 16 KiB took twice the CPU (bench)


class _HeadersDeadline:
    """A connection whose answer's status line and headers must arrive within its read timeout
    (``timeout``, which urllib3 sets just before it waits for them), however they trickle."""

    sock: socket.socket | None
    timeout: Any

    def getresponse(self) -> Any:
        deadline, sock = self.timeout, self.sock
        if not isinstance(deadline, int | float) or sock is None:
            return super().getresponse()  # type: ignore[misc]
        lock, state = threading.Lock(), {"done": False, "stopped": False}

        def stop() -> None:
            with lock:
                if not state["done"]:
                    state["stopped"] = True
                    with contextlib.suppress(OSError):  # already closed: nothing waits on it
                        sock.shutdown(socket.SHUT_RDWR)  # the waiting read returns at once

        timer = threading.Timer(deadline, stop)
        timer.daemon = True
        timer.start()
        try:
            response = super().getresponse()  # type: ignore[misc]
        except Exception:
            if state["stopped"]:
                msg = f"the answer's headers did not arrive within {deadline:g} s"
                raise TimeoutError(msg) from None
            raise
        finally:
            timer.cancel()
            with lock:
                state["done"] = True
        if state["stopped"]:  # stopped the moment they arrived: the connection is gone
            msg = f"the answer's headers did not arrive within {deadline:g} s"
            raise TimeoutError(msg)
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


class _Session(requests.Session):
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
    ``temporary``: trying again may help; ``unanswered``: no answer came at all."""

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
    if isinstance(exc, requests.exceptions.ReadTimeout):
        said = next((str(c) for c in causes if isinstance(c, TimeoutError) and "headers" in str(c)), "")
        return Failure(f"{name}: {said}" if said else name, temporary=True)
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
