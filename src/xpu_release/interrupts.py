"""Signals held back while a step that must finish whole runs: creating a container.

An interrupt (Ctrl-C, a CI cancel's SIGTERM, a closed terminal's SIGHUP) that lands while the
engine is creating or starting a container leaves the engine with a container the caller never
heard of: the request was sent, the answer not read. Removing it by name right then races the
engine's own creation, and a container can outlive the run. So the request runs whole, then the
interrupt is delivered as it would have been (the caller's ``finally`` removes what was made).
A second signal while held is not held: someone who presses Ctrl-C twice means it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the block; deliver what was caught after it (through
    the handler that was in place), at once from the second one on: then every one caught so
    far, in order. Outside the main thread (where Python runs handlers) it holds nothing; a
    signal that was ignored stays ignored. A signal that lands while the handlers are swapped
    in or put back is held or delivered too, never lost, and no handler is left swapped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}  # signal → the handler in place before
    swapped: list[int] = []  # the signals whose handler is ``hold`` now
    caught: list[int] = []

    def release() -> None:
        """Put every handler back, then deliver what was caught (a signal that lands meanwhile
        reaches ``hold`` while its own is not back yet, and is in ``caught`` in time)."""
        while swapped:
            sig = swapped.pop()
            signal.signal(sig, saved[sig])
        pending = caught[:]
        caught.clear()
        for signum in pending:
            _deliver(signum, saved[signum])

    def hold(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)
        if len(caught) > 1:  # the second: now
            release()

    try:
        for sig in HELD:
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN or old is None:
                continue
            saved[sig] = old
            swapped.append(sig)  # before the swap: a signal right after it finds it to put back
            signal.signal(sig, hold)
        yield
    finally:
        release()


def _deliver(signum: int, handler: Any) -> None:
    """``signum`` as ``handler`` (back in place) takes it."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
