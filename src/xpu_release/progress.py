"""Progress: the one type every stage reports through (a line at a time), and meters: figures
that move (bytes compressed, sent, hashed), reported to the display the CLI chose. The CLI
decides how both look (``cli/output.py``); stages only report."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

Sink = Callable[[str], None]


# --- meters: figures that move (bytes compressed, sent, hashed) --------------------------------


@dataclass(frozen=True)
class Meter:
    """Where one task stands: ``done`` of ``total`` (None: not known ahead) in ``unit``."""

    task: str  # e.g. "compressing layer 3 of 8", "sending to vpc/cn-beijing"
    done: int
    total: int | None = None
    unit: str = "B"

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total


Gauge = Callable[[Meter], None]
_gauges: list[Gauge] = [lambda _: None]


def show_meters(gauge: Gauge | None) -> None:
    """Where meters go from now on (the CLI's display, once per command; None: nowhere)."""
    _gauges[0] = gauge or (lambda _: None)


def meter(m: Meter) -> None:
    """Report where a task stands. Cheap: stages call it as often as they like, the display
    decides what to show and how often."""
    _gauges[0](m)


class Tally:
    """A meter that counts up from any thread: ``add`` bytes as they are done."""

    def __init__(self, task: str, total: int | None = None, unit: str = "B") -> None:
        self.task, self.total, self.unit = task, total, unit
        self.done = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n
            meter(Meter(self.task, self.done, self.total, self.unit))
