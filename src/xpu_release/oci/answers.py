"""An answer's body, read where the transport got it: bounded (``guard.bodies``) and within
the command's deadline (``deadline``): a whole body read at once (``preload_within``), a
streamed one piece by piece (``body_pieces``), an error body's preview for a message; and when
the wait for an answer began, and a URL as a message may show it (``bare``).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from typing import Protocol
from urllib.parse import urlsplit

import requests

from ..errors import WireError
from ..guard import bodies, limits
from ..guard.bodies import Pace, chunks, read_body
from ..guard.shown import shown
from .connection import WATCHDOG, read_within, sent_since
from .deadline import Deadline


class _Policy(Protocol):
    @property
    def pace(self) -> Pace | None: ...


class Paced(Protocol):
    """What reads a streamed body asks of its transport (``transport.Transport``): the command's
    deadline, the origin it charges a stall to, and its retry policy's pace a body must keep."""

    deadline: Deadline
    base: str

    @property
    def retry(self) -> _Policy: ...


def wait_began(began: float, timeout: float) -> float:
    """When the wait of a request begun at ``began`` that failed began: once it was sent whole,
    or, for one whose sending stalled, its last ``timeout``."""
    sent = sent_since(began)
    return sent if sent > began else max(began, time.monotonic() - timeout)


def waited_from(resp: requests.Response) -> float:
    """When the client began to wait for ``resp`` (``Transport._exchange``)."""
    return float(getattr(resp, "waited_from", time.monotonic()))


def bare(url: str) -> str:
    """``url`` as a message may show it: no query (a presigned URL's signature), no login."""
    parts = urlsplit(url)
    return shown(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}", 120)


def preload_within(
    deadline: Deadline, origin: str, resp: requests.Response, what: str, limit: int, pace: Pace | None
) -> None:
    """Read an answer's body now, bounded (``resp.content`` then holds it; a 404's, which no
    caller reads, only up to a short preview), within what the command's deadline leaves of the
    wait that began when the request was sent. A body read whole credits the answer; one too
    slow, or that broke, is charged."""
    waited = waited_from(resp)
    pace = pace or bodies.DEFAULT_PACE
    seconds = min(pace.deadline, max(deadline.left(origin, since=waited), 0.0))
    pace = replace(pace, deadline=seconds)
    if resp.status_code == 404 or resp.request.method == "HEAD":
        try:
            body, whole = read_within(resp, seconds, lambda: _preview(resp, pace), what)
        except WireError:
            body, whole = b"", False
    else:
        try:
            whole_body = lambda: read_body(resp, what=what, limit=limit, pace=pace)  # noqa: E731
            body, whole = read_within(resp, seconds, whole_body, what), True
        except WireError as exc:
            if exc.temporary:
                deadline.failed(waited, exc.message, down=False, origin=origin)
            raise
    resp._content = body  # what requests itself does once it has read a body
    if whole:
        deadline.answered(waited, origin, what)
    else:
        deadline.failed(waited, f"{what}: the answer's body did not arrive", down=False, origin=origin)


def body_pieces(t: Paced, resp: requests.Response, *, what: str, limit: int, exact: bool = True,
                chunk: int = 1 << 20) -> Generator[bytes, None, None]:  # fmt: skip
    """A streamed body's pieces (``bodies.chunks``, at the transport's pace), told when a piece
    is ``notice`` seconds in coming, and a stall charged to the command's deadline from the last
    byte that came (whatever answered since: a body that stopped is a wait)."""
    deadline, origin = t.deadline, t.base
    last = time.monotonic()
    pieces = chunks(resp, what=what, limit=limit, exact=exact, pace=t.retry.pace, chunk=chunk)
    try:
        while True:
            alarm = WATCHDOG.arm(deadline.notice, lambda: deadline.say(f"{what}: its body is slow in coming"))
            try:
                piece = next(pieces, None)
            except WireError as exc:
                if exc.temporary:
                    deadline.failed(last, exc.message, down=False, origin=origin, stalled=True)
                raise
            finally:
                alarm.disarm()
            if piece is None:
                return
            last = time.monotonic()
            yield piece
    finally:
        pieces.close()


def _preview(resp: requests.Response, pace: Pace | None) -> tuple[bytes, bool]:
    """At most ``MAX_ERROR_BODY_BYTES`` of a body no caller uses but in a message, and whether
    it came whole (or was longer than a message needs), rather than too slowly or broken."""
    out = bytearray()
    try:
        for block in chunks(
            resp, what="", limit=limits.MAX_ERROR_BODY_BYTES, pace=pace, chunk=1 << 16, whole=True
        ):
            out += block
    except WireError as exc:
        return bytes(out), not exc.temporary  # what arrived is enough for a message
    finally:
        resp.close()
    return bytes(out), True


def preview_bytes(resp: requests.Response, pace: Pace | None) -> bytes:
    return _preview(resp, pace)[0]


def preview(resp: requests.Response, pace: Pace | None) -> str:
    """The start of an error answer's text, as it may be shown: redacted, sanitized, short."""
    text = preview_bytes(resp, pace).decode("utf-8", "replace")
    return shown(text, 300)  # a secret it quotes is hidden before it is cut
