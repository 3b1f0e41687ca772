"""The one way in for a registry's answer bodies: bounded in size (declared and sent), in time (a
deadline for a body read whole, a minimum rate for every body), and stopped where the size the
caller expects ends.

A socket's read timeout does not bound a read: a server that sends one byte every few seconds
resets it with each byte and holds a reader for ever. So bodies are read a piece at a time
(``read1``: whatever has arrived, never waiting to fill a buffer), and between pieces the
clock is checked: each ``Pace.window`` seconds must bring ``Pace.min_rate`` bytes a second,
and a body read whole must be done within ``Pace.deadline``. A body larger than it may be (its
``Content-Length``, or what arrives) is refused at the first byte past the bound: a blob that a
manifest lists at 11 bytes is read for 11 bytes (and one more, to see there is more), never a
terabyte.

Every refusal is a ``WireError`` naming the answer and the bound; a broken or timed-out
connection is one marked temporary (a retry may help).
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import urllib3.exceptions

from ..errors import WireError
from . import limits
from .reading import ascii_int
from .shown import shown


@dataclass(frozen=True, kw_only=True)
class Pace:
    """How fast a body must arrive: ``min_rate`` bytes a second over every ``window`` seconds,
    and a body read whole within ``deadline`` seconds. Tests shrink these to run fast."""

    min_rate: float = limits.MIN_RATE
    window: float = limits.RATE_WINDOW
    deadline: float = limits.BODY_DEADLINE


DEFAULT_PACE = Pace()  # read when a caller passes none, so a test can replace it for a whole run

_BROKEN = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def declared_length(resp: Any, what: str) -> int | None:
    """The ``Content-Length`` an answer declares (None: none), refused when it is no length."""
    text = resp.headers.get("Content-Length")
    if text is None:
        return None
    length = ascii_int(text.strip(), most=19)
    if length is None:
        msg = f"{what}: the answer declares a Content-Length of {shown(text, 40)!r}, which is no length"
        raise WireError(msg)
    return length


class _Clock:
    """The pace one body is read at."""

    def __init__(self, pace: Pace, what: str, *, whole: bool) -> None:
        self.pace, self.what, self.whole = pace, what, whole
        self.start = self.window_start = time.monotonic()
        self.window_bytes = 0

    def tick(self, received: int) -> None:
        now = time.monotonic()
        self.window_bytes += received
        if self.whole and now - self.start > self.pace.deadline:
            msg = f"{self.what}: the answer did not arrive within {self.pace.deadline:.0f} s; stopped"
            raise WireError(msg, temporary=True)
        elapsed = now - self.window_start
        if elapsed >= self.pace.window:
            rate = self.window_bytes / elapsed
            if rate < self.pace.min_rate:
                least = self.pace.min_rate
                msg = (f"{self.what}: the answer arrives at {rate:.0f} bytes/s over the last {elapsed:.0f} s,"
                       f" below the minimum of {least:.0f} bytes/s; stopped")  # fmt: skip
                raise WireError(msg, temporary=True)
            self.window_start, self.window_bytes = now, 0


def chunks(resp: Any, *, what: str, limit: int, exact: bool = False, pace: Pace | None = None,
           chunk: int = 1 << 20, whole: bool = False) -> Generator[bytes, None, None]:  # fmt: skip
    """The body of ``resp`` (a streamed ``requests`` answer) in pieces of up to ``chunk`` bytes,
    at most ``limit`` bytes (``exact``: exactly ``limit``, a blob of a known size), at ``pace``.
    The answer is closed when the iterator ends or is closed."""
    pace = pace or DEFAULT_PACE
    # A body sent compressed (Content-Encoding) declares its compressed length: what arrives,
    # inflated, is bounded below instead.
    encoded = resp.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity")
    declared = None if encoded else declared_length(resp, what)
    if declared is not None and (declared > limit or (exact and declared != limit)):
        bound = f"the {limit} bytes expected" if exact else f"the limit of {limit} bytes"
        msg = f"{what}: the answer declares {declared} bytes, not within {bound}; not read"
        resp.close()
        raise WireError(msg)
    clock = _Clock(pace, what, whole=whole)
    raw = resp.raw
    total = 0
    buf = bytearray()
    try:
        while True:
            try:
                piece = raw.read1(min(chunk - len(buf), limit + 1 - total), decode_content=True)
            except _BROKEN as exc:
                msg = f"{what}: the answer broke after {total} bytes ({type(exc).__name__})"
                raise WireError(msg, temporary=True) from None
            if not piece:
                break
            total += len(piece)
            if total > limit:
                bound = f"the {limit} bytes expected" if exact else f"the limit of {limit} bytes"
                msg = f"{what}: the answer sends more than {bound}; stopped"
                raise WireError(msg)
            clock.tick(len(piece))
            buf += piece
            if len(buf) >= chunk:
                yield bytes(buf)
                buf.clear()
        if exact and total != limit:
            msg = f"{what}: the answer ends after {total} of the {limit} bytes expected"
            raise WireError(msg, temporary=True)
        if buf:
            yield bytes(buf)
    finally:
        resp.close()


def read_body(resp: Any, *, what: str, limit: int, pace: Pace | None = None) -> bytes:
    """The whole body of ``resp`` (streamed), at most ``limit`` bytes, within the deadline."""
    return b"".join(chunks(resp, what=what, limit=limit, pace=pace, whole=True))
