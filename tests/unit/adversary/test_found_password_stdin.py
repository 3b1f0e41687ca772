"""``--password-stdin`` reads a line of standard input with ``sys.stdin.readline()``: unbounded.
A file without a newline given by mistake (``--password-stdin < image.tar``), or a stream that
never ends, is read whole into memory (500 MB of input: 1 GB resident), then used as a password.
outside-data.md: every read of outside data is bounded (a key is 64 KiB, a docker config 1 MiB)."""

from __future__ import annotations

from pathlib import Path

from ..cli.hostile import REF, layout
from .proc import a_users_error_of, run_cli


def test_a_password_on_stdin_is_read_bounded(repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    layout(source)
    given = tmp_path / "no-newline"
    with given.open("wb") as f:
        f.truncate(400 << 20)  # sparse: 400 MB of zeros and no line end

    ran = run_cli(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", "127.0.0.1:1/ns/x",
                         "--username", "u", "--password-stdin"], stdin=given, deadline=60)  # fmt: skip

    a_users_error_of(ran)
    assert ran.peak_mb < 200, f"{ran.peak_mb:.0f} MB to read a password"  # today: ~850 MB
