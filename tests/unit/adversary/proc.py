"""The real CLI in a process of its own, for the attacks a thread cannot bound: a hang is ended
(the process killed at the deadline, so nothing keeps running after the test), and the memory
the process took is measured by the kernel (``wait4``'s peak resident size)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DOCUMENTED = set(range(16)) | {129, 130, 143}  # docs/reference/exit-codes.md, 70 excluded
ROOT = Path(__file__).resolve().parents[3]

# ``scan`` without Docker in the child, as ``cli.hostile.without_an_engine`` does in-process.
_NO_ENGINE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import pytest
from tests.unit.cli.hostile import without_an_engine
without_an_engine(pytest.MonkeyPatch())
from xpu_release.cli import main
sys.argv = ["xpu-release", *sys.argv[1:]]
main()
"""


# The child is started by a small launcher of its own, which waits for it and writes its peak to
# the pipe whose end it is given: Linux keeps a process's peak resident size across exec, so a
# child forked straight from this (large) test process would start its peak at this one's size.
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), str(usage.ru_maxrss).encode())
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


@dataclass(frozen=True)
class Ran:
    code: int | None  # None: still running at the deadline (killed)
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float  # the process's peak resident memory

    @property
    def hung(self) -> bool:
        return self.code is None


def run_cli(
    root: Path, argv: list[str], *, env: dict[str, str] | None = None, deadline: float = 20.0,
    stdin: Path | None = None, no_engine: bool = False,
) -> Ran:  # fmt: skip
    """``xpu-release --root ROOT ARGV`` in a child process, killed at ``deadline``; its cache is
    ``ROOT/../cache`` unless ``env`` names another; its standard input ``stdin`` (else none);
    with ``no_engine``, the engine and the SBOM stand in (``cli.hostile.without_an_engine``)."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        (stdin or Path(os.devnull)).open("rb") as given,
    ):
        start = time.monotonic()
        command = ["-c", _NO_ENGINE] if no_engine else ["-m", "xpu_release"]
        peak_r, peak_w = os.pipe()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                str(peak_w),
                sys.executable,
                *command,
                "--root",
                str(root),
                *argv,
            ],
            stdout=out,
            stderr=err,
            stdin=given,
            pass_fds=(peak_w,),
            start_new_session=True,  # the launcher and the CLI: killed together at the deadline
            env={
                **os.environ,
                "NO_COLOR": "1",
                "XPU_RELEASE_CACHE": str(root.parent / "cache"),
                **(env or {}),
            },
        )
        os.close(peak_w)
        try:
            proc.wait(deadline)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        seconds = time.monotonic() - start
        with os.fdopen(peak_r, "rb") as peak:
            said = peak.read().decode() or "0"
        hung = seconds >= deadline
        out.seek(0)
        err.seek(0)
        return Ran(
            code=None if hung else proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            seconds=seconds,
            peak_mb=int(said) / 1024,
        )


def a_users_error_of(ran: Ran, code: int | None = None) -> None:
    """What outside data may end in: no hang, a documented code, no traceback."""
    assert not ran.hung, f"still running after {ran.seconds:.0f} s (a hang); stderr: {ran.stderr[-500:]}"
    assert ran.code in DOCUMENTED, (ran.code, ran.stderr[-1000:])
    assert "Traceback" not in ran.stderr, ran.stderr[-1000:]
    assert "internal error" not in ran.stderr, ran.stderr[-1000:]
    if code is not None:
        assert ran.code == code, (ran.code, ran.stderr[-1000:])
