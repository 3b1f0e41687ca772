"""``interrupts.signals_held`` (held around a container's create) promises: the first signal
caught is delivered after the block, through the handler that was in place; a second one at
once; the handlers are put back. Two ways it broke that:

- a signal that lands while the handlers are being swapped in (before the block's ``try``) ends
  the setup with the handlers swapped so far left as ``hold``: the run unwinds (its ``finally``
  removes containers) with Ctrl-C swallowed once, and a process that goes on keeps it so;
- a second signal delivered at once cleared the handlers it held, so the first one caught was
  never delivered: a handler that returns (one that counts or logs) saw one of two signals.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from xpu_release.cli.app import Terminated
from xpu_release.interrupts import signals_held

from ..image.test_interrupted_create import cli_handlers  # noqa: F401  (autouse: the command line's handlers)


def test_a_signal_while_the_handlers_are_swapped_in_leaves_none_swapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = signal.signal

    def swapping(sig: int, handler: Any) -> Any:
        old = real(sig, handler)
        if sig == signal.SIGINT and handler is not signal.default_int_handler:
            os.kill(os.getpid(), signal.SIGTERM)  # a CI cancel lands now: its handler raises here
        return old

    monkeypatch.setattr(signal, "signal", swapping)
    try:
        with pytest.raises(Terminated), signals_held():
            pytest.fail("the block ran after the interrupt")
    finally:
        monkeypatch.setattr(signal, "signal", real)

    # today: SIGINT's handler is still the hold of a block that never ran
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_signals_while_held_are_both_delivered() -> None:
    got: list[int] = []

    def counting(signum: int, _frame: object) -> None:  # a handler that returns
        got.append(signum)

    signal.signal(signal.SIGHUP, counting)
    signal.signal(signal.SIGTERM, counting)
    with signals_held():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)

    assert sorted(got) == sorted([signal.SIGTERM, signal.SIGHUP])  # today: [SIGHUP], the first lost
    assert signal.getsignal(signal.SIGHUP) is counting
    assert signal.getsignal(signal.SIGTERM) is counting


def test_the_same_signal_twice_while_held_is_delivered_twice() -> None:
    got: list[int] = []

    def counting(signum: int, _frame: object) -> None:
        got.append(signum)

    signal.signal(signal.SIGHUP, counting)
    with signals_held():
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)  # after the second, the handler is its own again

    assert got == [signal.SIGHUP] * 3  # today: 2
