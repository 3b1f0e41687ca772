"""Progress as a person sees it: lines, and meters (bytes compressed, sent, hashed).

On a terminal, meters are rich's progress display: one row per task with its bar, bytes done
of the total, MB/s and time left, kept at the bottom while the lines that matter print above
it; the live status line (build steps, layer chatter) is a row of its own. Without meters the
status line is the single line rewritten in place it always was. In CI logs (no terminal),
every line as it comes, and a meter as a plain line with the same figures at most every 10 s
per task (and once when it is done). With ``-q``, nothing.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import click

from ..progress import Meter, show_meters
from .output import verbosity

EVERY = 10.0  # seconds between a meter's lines in a CI log


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


class _Plain:
    """Meters as lines, for logs: at most one per task every ``EVERY`` seconds, and its last."""

    def __init__(self, write: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.clock = write, clock
        self.first: dict[str, tuple[float, int]] = {}
        self.last: dict[str, float] = {}
        self.ended: set[str] = set()

    def __call__(self, m: Meter) -> None:
        now = self.clock()
        start = self.first.setdefault(m.task, (now, m.done))
        if m.task in self.ended:
            return
        if m.task in self.last and not m.finished and now - self.last[m.task] < EVERY:
            return  # its first line, then one every EVERY seconds, and its last
        self.last[m.task] = now
        if m.finished:
            self.ended.add(m.task)
        elapsed, moved = now - start[0], m.done - start[1]
        rate = moved / elapsed if elapsed > 0 else 0.0
        text = f"{m.task}: {_mb(m.done)}" + (f" of {_mb(m.total)}" if m.total is not None else "")
        if rate > 0:
            text += f", {rate / 1e6:,.0f} MB/s"
            if m.total is not None and not m.finished:
                text += f", {max(0.0, (m.total - m.done) / rate):,.0f} s left"
        self.write(text + (" (done)" if m.finished else ""))


class _Bars:
    """Meters as rich's progress display on a terminal (stderr)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            refresh_per_second=4,
        )
        self.tasks: dict[str, Any] = {}
        self.status: Any = None
        self.progress.start()

    def __call__(self, m: Meter) -> None:
        task = self.tasks.get(m.task)
        if task is None:
            task = self.tasks[m.task] = self.progress.add_task(m.task, total=m.total)
        self.progress.update(task, completed=m.done, total=m.total)

    def line(self, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def status_line(self, text: str) -> None:
        if self.status is None:
            self.status = self.progress.add_task(text, total=None)
        self.progress.update(self.status, description=text)

    def close(self) -> None:
        if self.status is not None:
            self.progress.remove_task(self.status)
        self.progress.stop()


class LiveLine:
    """Progress output (see the module). Made once per command's stage run, in the command's
    own thread; callable from any thread."""

    open: ClassVar[list[LiveLine]] = []
    KEEP = ("==>", "    ", "pulling", "pushing", "copying", "smoke-testing", "Successfully", "released")

    def __init__(self, tty: bool | None = None) -> None:
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.quiet = verbosity().quiet  # read here: a worker thread has no click context
        self.width = shutil.get_terminal_size((100, 20)).columns
        self.dirty = False
        self.bars: _Bars | None = None
        self.plain = _Plain(lambda text: click.echo(text, err=True))
        self.lock = threading.RLock()
        LiveLine.open.append(self)
        atexit.register(self.close)
        show_meters(self.meter)

    @classmethod
    def close_all(cls) -> None:
        for live in cls.open:
            live.close()

    def close(self) -> None:
        """Leave the last status line on screen, ended, so later output starts on its own line."""
        with self.lock:
            if self.bars is not None:
                self.bars.close()
                self.bars = None
            if self.dirty:
                self._raw("\n")
                self.dirty = False

    def meter(self, m: Meter) -> None:
        if self.quiet:
            return
        with self.lock:
            if not self.tty:
                self.plain(m)
                return
            if self.bars is None:
                self._clear()
                self.bars = _Bars()
            self.bars(m)

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        with self.lock:
            if not self.tty:
                click.echo(line, err=True)
            elif line.startswith(self.KEEP) or "retrying" in line:
                if self.bars is not None:
                    self.bars.line(line)
                    return
                self._clear()
                click.echo(line, err=True)
            elif self.bars is not None:
                self.bars.status_line(line.strip()[: self.width // 2])
            else:
                self._raw("\r\x1b[K" + line.strip()[: self.width - 1])
                self.dirty = True

    def _clear(self) -> None:
        if self.dirty:
            self._raw("\r\x1b[K")
            self.dirty = False

    @staticmethod
    def _raw(text: str) -> None:
        # Written as is: click.echo would strip the control sequences it does not recognise.
        sys.stderr.write(text)
        sys.stderr.flush()


def line_sink() -> LiveLine:
    return LiveLine()
