"""A command's deadline for answers: how long it waits, in a row, for registries that give none.

Each request has its own timeouts (``RetryPolicy``) and retries; alone they multiply (six
attempts of 60 s held ``promote`` for 361 s at an endpoint that took the connection and never
answered). The command's deadline bounds the whole wait instead: once registries have been
asked for ``seconds`` in a row and none gave a usable answer, the command stops, whichever
request, retry or pause it is in. Each attempt's timeout is what is left of it, and a pause
before a retry that would outlast it is not taken. An answer from any registry (a whole body
read, or the headers of a stream) starts the count again, so a publish of many gigabytes is
never cut short while one endpoint is still answering; only a wait with nothing coming is.

While a request waits, the user is told (``say``) once it has waited ``notice`` seconds
(``NOTICE``), so a command that waits is never silent.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from ..errors import WireError
from ..progress import Sink

DEFAULT_SECONDS = 50.0  # every hang ends within a minute (issue 53: "no hang over 60 s")
NOTICE = 10.0  # seconds a request waits before the user is told
LEAST = 1.0  # an attempt is given at least this long, or not made


class Deadline:
    """The deadline of one command; shared by every client the command makes (``channel``)."""

    def __init__(self, seconds: float = DEFAULT_SECONDS, say: Sink = lambda _: None,
                 notice: float = NOTICE) -> None:  # fmt: skip
        self.seconds = seconds
        self.say = say
        self.notice = notice
        self._lock = threading.Lock()
        self._since: float | None = None  # when the wait with no answer began
        self._last = ""  # the last failure's words
        self._down = True  # whether the last failure was no answer (exit 10), not a wrong one (7)

    def left(self) -> float:
        """Seconds the command may still wait with no answer."""
        with self._lock:
            since = self._since
        return self.seconds if since is None else self.seconds - (time.monotonic() - since)

    def timeout(self, per_request: float, what: str) -> float:
        """An attempt's timeout: ``per_request``, or what is left if less; ``expired`` if too
        little is left to try."""
        left = self.left()
        if left < LEAST:
            raise self.expired(what)
        return min(per_request, left)

    def pause(self, delay: float, what: str) -> float:
        """``delay`` before a retry, if the deadline leaves room for an attempt after it."""
        if self.left() - delay < LEAST:
            raise self.expired(what)
        return delay

    def answered(self) -> None:
        """A registry gave a usable answer: the wait in a row is over."""
        with self._lock:
            self._since = None

    def failed(self, since: float, why: str, *, down: bool) -> None:
        """An attempt begun at ``since`` (``time.monotonic``) brought no usable answer: ``why``;
        ``down``: no answer at all (rather than a wrong or too slow one)."""
        with self._lock:
            if self._since is None:
                self._since = since
            self._last, self._down = why, down

    def expired(self, what: str) -> WireError:
        with self._lock:
            last, down = self._last, self._down
        since = f" (the last: {last})" if last else ""
        msg = (f"{what}: stopped after {self.seconds:g} s in which no registry answered{since}; "
               f"the command's deadline is --deadline {self.seconds:g} (XPU_RELEASE_DEADLINE)")  # fmt: skip
        return WireError(msg, temporary=True, unanswered=down)

    def waiting(self, what: str, timeout: float) -> str:
        """The line said when an attempt has waited ``notice`` s for ``what`` (its ``timeout``)."""
        more = max(timeout - self.notice, 0)
        return f"{what}: no answer for {self.notice:g} s; waiting up to {more:.0f} s more"


NO_DEADLINE = Deadline(seconds=float("inf"))  # a client made outside any command (a library use)
_COMMAND = [NO_DEADLINE]  # the deadline of the command that runs


@contextlib.contextmanager
def command(deadline: Deadline) -> Iterator[Deadline]:
    """While the block runs, every client made (``channel.client_for``) shares ``deadline``,
    in whatever thread it works."""
    _COMMAND.append(deadline)
    try:
        yield deadline
    finally:
        _COMMAND.remove(deadline)


def current() -> Deadline:
    """The deadline of the command that runs (none outside a command)."""
    return _COMMAND[-1]
