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
from dataclasses import dataclass

from ..errors import WireError
from ..progress import Sink

DEFAULT_SECONDS = 50.0  # every hang ends within a minute (issue 53: "no hang over 60 s")
NOTICE = 10.0  # seconds a request waits before the user is told
PROMPT = 2.0  # an answer slower than this was a wait, not an answer that starts the count again
LEAST = 1.0  # an attempt is given at least this long, or not made


class Expired(WireError):
    """The command's deadline ran out: no retry, no second message around it."""


@dataclass
class _Wait:
    """One wait in a row: of the command (every registry), or of one registry's origin."""

    since: float | None = None  # when it began (None: the last answer was prompt)
    answered: float = 0.0  # when the last prompt answer came
    last: str = ""  # the last failure's words
    down: bool = True  # whether the last failure was no answer (exit 10), not a wrong one (7)
    told: float = 0.0  # the seconds of it the user was last told of

    def left(self, seconds: float, now: float, since: float | None = None) -> float:
        began = self.since if since is None else since if self.since is None else min(self.since, since)
        return seconds if began is None else seconds - (now - began)

    def fail(self, since: float, why: str, down: bool, *, stalled: bool) -> None:
        began = since if stalled else max(since, self.answered)
        self.since = began if self.since is None else min(self.since, began) if stalled else self.since
        self.last, self.down = why, down


class Deadline:
    """The deadline of one command; shared by every client the command makes (``channel``).

    Two waits are kept: the command's (no registry answered) and each registry's own (``origin``:
    it did not answer, whatever the others did). When either has lasted ``seconds``, a request
    to that registry is no longer sent: a registry that does not answer is a row of the answer,
    never a wait that the others' answers keep alive; when no registry answers, the command
    stops. A wait begins when a request that brought no usable answer was sent whole (an upload's
    sending is not waiting), or the last prompt answer came, if later; an answer slower than
    ``PROMPT`` is itself a wait (a registry that answers just before every timeout is waited
    on); a streamed body that stalls waits from its last byte.
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
        self._all = _Wait()
        self._by: dict[str, _Wait] = {}

    def _waits(self, origin: str) -> tuple[_Wait, _Wait]:
        return self._all, self._by.setdefault(origin, _Wait())

    def left(self, origin: str = "", since: float | None = None) -> float:
        """Seconds ``origin`` may still be waited on (``since``: as if a wait had begun then, if
        not before: what an answer whose wait began then may still take)."""
        now = time.monotonic()
        with self._lock:
            return min(w.left(self.seconds, now, since) for w in self._waits(origin))

    def timeout(self, per_request: float, what: str, origin: str = "") -> float:
        """An attempt's timeout: ``per_request``, or what is left if less; ``Expired`` if too
        little is left to try."""
        left = self.left(origin)
        if left < LEAST:
            raise self.expired(what, origin)
        return min(per_request, left)

    def pause(self, delay: float, what: str, origin: str = "") -> float:
        """``delay`` before a retry, if the deadline leaves room for an attempt after it."""
        if self.left(origin) - delay < LEAST:
            raise self.expired(what, origin, pause=delay)
        return delay

    def answered(self, waited_from: float, origin: str = "", what: str = "") -> None:
        """``origin`` gave a usable answer, waited for since ``waited_from``: its wait in a row,
        and the command's, are over; unless the answer was slow, which is a wait of its own."""
        now = time.monotonic()
        if now - waited_from > PROMPT:
            took = now - waited_from
            self.failed(waited_from, f"answers that take {took:.0f} s", down=False, origin=origin)
            self._tell_slow(origin, what, took)
            return
        with self._lock:
            for w in self._waits(origin):
                w.since, w.answered, w.told = None, now, 0.0

    def failed(self, since: float, why: str, *, down: bool, origin: str = "", stalled: bool = False) -> None:
        """A wait on ``origin`` since ``since`` (``time.monotonic``) brought no usable answer:
        ``why``; ``down``: no answer at all (rather than a wrong or too slow one); ``stalled``:
        a body that stopped coming, its wait from its last byte whatever answered since."""
        with self._lock:
            for w in self._waits(origin):
                w.fail(since, why, down, stalled=stalled)

    def _tell_slow(self, origin: str, what: str, took: float) -> None:
        """Say, once each ``notice`` seconds of it, that a registry's slow answers are a wait."""
        now = time.monotonic()
        with self._lock:
            w = self._by.get(origin, self._all)
            waited = 0.0 if w.since is None else now - w.since
            if waited - w.told < self.notice:
                return
            w.told = waited
        self.say(f"{what}: answers take {took:.0f} s; no prompt answer for {waited:.0f} s of the "
                 f"deadline's {self.seconds:g}")  # fmt: skip

    def expired(self, what: str, origin: str = "", *, pause: float = 0.0) -> Expired:
        now = time.monotonic()
        with self._lock:
            waits = self._waits(origin)
            w = min(waits, key=lambda x: x.left(self.seconds, now))
            last, down, since = w.last, w.down, w.since
        waited = 0.0 if since is None else now - since
        said = f"stopped after {waited:.0f} s in which it gave no usable answer"
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
