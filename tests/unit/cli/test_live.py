"""Progress a person can watch: on a terminal, meters are live bars with bytes, MB/s and time
left, the lines that matter above them; in a CI log, plain lines with the same figures at most
every 10 s per task; with -q, nothing."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from xpu_release.cli.live import EVERY, LiveLine, _Plain
from xpu_release.cli.output import Verbosity
from xpu_release.progress import Meter, Tally, meter, show_meters

from ..helpers import on_a_terminal

# A stage as publish runs one: a kept line, layer chatter, a layer compressed while bytes go
# to two endpoints, from worker threads.
STAGE = """
import threading, time
from xpu_release.cli.live import LiveLine
from xpu_release.progress import Meter, Tally, meter
live = LiveLine()
live("pushing 127.0.0.1:15001/ns/image")
live("layer 3: 120 MB saved")
layer = Tally("compressing layer 1 of 1 (isal:2)", 400_000_000)
def work():
    for _ in range(40):
        layer.add(10_000_000)
        meter(Meter("sending to vpc/cn-beijing", layer.done // 4))
        time.sleep(0.03)
t = threading.Thread(target=work); t.start(); t.join()
live("copying to vpc/cn-beijing")
live.close()
"""


def _on_a_terminal(code: str) -> str:
    return on_a_terminal([sys.executable, "-c", code], {"COLUMNS": "160"})


def test_on_a_terminal_a_meter_is_a_live_bar_with_bytes_rate_and_time_left() -> None:
    seen = _on_a_terminal(STAGE)

    assert "pushing 127.0.0.1:15001/ns/image" in seen
    assert "copying to vpc/cn-beijing" in seen
    assert "compressing layer 1 of 1 (isal:2)" in seen
    assert "400.0/400.0 MB" in seen  # bytes done of the total, at the end
    assert "MB/s" in seen  # the rate
    assert "0:00:0" in seen  # time left, as rich shows it
    assert "sending to vpc/cn-beijing" in seen
    assert "\x1b[?25l" in seen  # a live display (the cursor hidden while it draws)...
    assert seen.rstrip().endswith("\x1b[?25h") or "\x1b[?25h" in seen  # ...given back at the end


def test_in_a_log_the_same_figures_come_as_plain_lines() -> None:
    proc = subprocess.run([sys.executable, "-c", STAGE], capture_output=True, text=True, check=True)
    lines = proc.stderr.splitlines()

    assert lines[0] == "pushing 127.0.0.1:15001/ns/image"
    assert "layer 3: 120 MB saved" in lines
    assert "compressing layer 1 of 1 (isal:2): 400.0 MB of 400.0 MB" in proc.stderr
    assert "(done)" in proc.stderr
    assert "\x1b[" not in proc.stderr
    # 40 updates of each meter in about a second: its first figure and its last, nothing between
    assert sum("compressing layer" in line for line in lines) == 2
    assert lines[-1] == "copying to vpc/cn-beijing"


def test_a_log_line_at_most_every_ten_seconds_per_task_with_rate_and_time_left() -> None:
    now = [0.0]
    out: list[str] = []
    plain = _Plain(out.append, clock=lambda: now[0])
    for second in range(31):
        now[0] = float(second)
        plain(Meter("compressing layer 1 of 2 (isal:2)", second * 10_000_000, 400_000_000))
        plain(Meter("sending to public", second * 5_000_000))

    compressing = [line for line in out if line.startswith("compressing")]
    assert len(compressing) == 4  # at 0, 10, 20 and 30 s
    assert compressing[2] == "compressing layer 1 of 2 (isal:2): 200.0 MB of 400.0 MB, 10 MB/s, 20 s left"
    assert "sending to public: 150.0 MB, 5 MB/s" in out
    plain(Meter("compressing layer 1 of 2 (isal:2)", 400_000_000, 400_000_000))
    plain(Meter("compressing layer 1 of 2 (isal:2)", 400_000_000, 400_000_000))
    assert out[-1] == "compressing layer 1 of 2 (isal:2): 400.0 MB of 400.0 MB, 13 MB/s (done)"
    assert sum("(done)" in line for line in out) == 1
    assert EVERY == 10.0


def test_quiet_shows_no_meter_and_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    class Obj:
        verbosity = Verbosity(quiet=True)

    with click.Context(click.Command("x"), obj=Obj()):
        live = LiveLine(tty=False)
    live("pushing x")
    Tally("compressing layer 1 of 1", 10).add(10)
    live.close()

    assert capsys.readouterr().err == ""


def test_meters_go_nowhere_when_no_display_is_open() -> None:
    show_meters(None)
    meter(Meter("sending to public", 5))  # nothing to show it: no error, no output
