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
import math
import threading
import time
from collections.abc import Iterator

from ..errors import WireError
from ..progress import Sink

DEFAULT_SECONDS = 50.0  # every hang ends within a minute (issue 53: "no hang over 60 s")
NOTICE = 10.0  # seconds a request waits before the user is told; an answer slower than this is a wait
LEAST = 1.0  # an attempt is given at least this long, or not made


class Expired(WireError):
    """The command's deadline ran out: no retry, no second message around it."""


class Deadline:
    """The deadline of one command; shared by every client the command makes (``channel``).

    The wait in a row begins when an attempt that brought no usable answer began (or the last
    prompt answer came, if later), or when an answer that took longer than ``notice`` was asked
    for: a registry that answers each request just before a timeout is waited on, not answered.
    The wait for an answer begins once the request is sent (an upload's sending is not waiting).
    """

    def __init__(self, seconds: float = DEFAULT_SECONDS, say: Sink = lambda _: None,
                 notice: float = NOTICE) -> None:  # fmt: skip
        if math.isnan(seconds) or seconds <= 0:
            msg = f"a deadline is a number of seconds above 0, not {seconds}"
            raise ValueError(msg)
        self.seconds = seconds
        self.say = say
        self.notice = notice
        self._lock = threading.Lock()
        self._since: float | None = None  # when the wait with no answer began
        self._answered = 0.0  # when the last prompt answer came (time.monotonic)
        self._last = ""  # the last failure's words
        self._down = True  # whether the last failure was no answer (exit 10), not a wrong one (7)

    def left(self, since: float | None = None) -> float:
        """Seconds the command may still wait with no answer (``since``: as if a wait had begun
        then, if not before: what an answer whose wait began then may still take)."""
        with self._lock:
            began = self._since
        if since is not None:
            began = since if began is None else min(began, since)
        return self.seconds if began is None else self.seconds - (time.monotonic() - began)

    def timeout(self, per_request: float, what: str) -> float:
        """An attempt's timeout: ``per_request``, or what is left if less; ``Expired`` if too
        little is left to try."""
        left = self.left()
        if left < LEAST:
            raise self.expired(what)
        return min(per_request, left)

    def pause(self, delay: float, what: str) -> float:
        """``delay`` before a retry, if the deadline leaves room for an attempt after it."""
        if self.left() - delay < LEAST:
            raise self.expired(what, pause=delay)
        return delay

    def answered(self, waited_from: float) -> None:
        """A registry gave a usable answer, waited for since ``waited_from``: the wait in a row is
        over, unless this answer was itself a wait (it took longer than ``notice``)."""
        now = time.monotonic()
        if now - waited_from > self.notice:
            self.failed(waited_from, f"an answer that took {now - waited_from:.0f} s", down=False)
            return
        with self._lock:
            self._since, self._answered = None, now

    def failed(self, since: float, why: str, *, down: bool) -> None:
        """An attempt waited on since ``since`` (``time.monotonic``) brought no usable answer:
        ``why``; ``down``: no answer at all (rather than a wrong or too slow one)."""
        with self._lock:
            if self._since is None:
                self._since = max(since, self._answered)
            self._last, self._down = why, down

    def expired(self, what: str, *, pause: float = 0.0) -> Expired:
        with self._lock:
            last, down, since = self._last, self._down, self._since
        waited = 0.0 if since is None else time.monotonic() - since
        said = f"stopped after {waited:.0f} s in which no registry answered"
        if pause >= LEAST:
            said += f" (a pause of {pause:.0f} s before the next attempt would outlast the deadline)"
        if last and last not in what:
            said += f"; the last: {last}"
        msg = f"{what}: {said}; the command's deadline is --deadline {self.seconds:g} (XPU_RELEASE_DEADLINE)"
        return Expired(msg, temporary=True, unanswered=down)

    def waiting(self, what: str, timeout: float) -> str:
        """The line said when an attempt has waited ``notice`` s for ``what`` (its ``timeout``)."""
        more = max(timeout - self.notice, 0)
        return f"{what}: no answer for {self.notice:g} s; waiting up to {more:.0f} s more"


NO_DEADLINE = Deadline(seconds=math.inf)  # a client made outside any command (a library use)
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
