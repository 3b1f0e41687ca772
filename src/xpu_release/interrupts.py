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
    """Hold SIGINT, SIGTERM and SIGHUP for the block; deliver the first one caught after it
    (through the handler that was in place), a second one at once. Outside the main thread
    (where Python runs handlers) it holds nothing; a signal that was ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    caught: list[int] = []

    def deliver(signum: int) -> None:
        handler = previous.get(signum)
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous.clear()
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(signum)

    def hold(signum: int, _frame: FrameType | None) -> None:
        if caught:  # the second: now
            deliver(signum)
        caught.append(signum)

    for sig in HELD:
        old = signal.getsignal(sig)
        if old is signal.SIG_IGN or old is None:
            continue
        previous[sig] = old
        signal.signal(sig, hold)
    try:
        yield
    finally:
        if previous:
            if caught:
                deliver(caught[0])
            else:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
