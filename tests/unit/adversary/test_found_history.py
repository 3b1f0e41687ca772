"""The re-scan history (``out/releases/<image>/<version>.watch/*.json``, written by ``watch``) is
outside data like the release record beside it (a CI cache restores it, a merge request edits it),
but ``history.latest`` reads it with ``read_text`` + ``json.loads``, past the guarded layer:
``list``, ``status`` and ``diff`` read it for every release. docs/using/outside-data.md: a FIFO is
never opened (it would hang the run), reads are bounded, outside text is shown escaped; and no
input ends in exit 70."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ..cli.hostile import record_value
from .proc import a_users_error_of, run_cli

IMAGE, VERSION = "training-cpu-pytorch", "25.03"
REF = f"{IMAGE}:{VERSION}"


def _history(repo: Path) -> Path:
    """A release record of REF, and its (empty) re-scan history folder."""
    record = repo / "out" / "releases" / IMAGE / f"{VERSION}.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(record_value()))
    folder = record.with_name(f"{VERSION}.watch")
    folder.mkdir()
    return folder


@pytest.mark.parametrize("argv", [["list"], ["diff", REF, REF]], ids=["list", "diff"])
def test_a_fifo_in_the_rescan_history_is_never_waited_on(repo: Path, argv: list[str]) -> None:
    os.mkfifo(_history(repo) / "20990101T000000.000000Z.json")

    ran = run_cli(repo, argv, deadline=20)

    a_users_error_of(ran)  # today: still running at the deadline (blocked opening the FIFO)


def test_a_history_entry_named_with_a_unicode_digit_is_no_internal_error(repo: Path) -> None:
    # "²".isdigit() is True, int("²") raises: _order's sort key crashes the whole command
    (_history(repo) / "20260101T000000.000000Z-².json").write_text("{}")

    ran = run_cli(repo, ["list"])

    a_users_error_of(ran, 0)  # today: exit 70, ValueError: invalid literal for int()


def test_a_history_entry_cannot_forge_a_line_in_list(repo: Path) -> None:
    entry = {"ref": REF, "state": "up to date\nerror: forged line\x1b]0;owned\x07",
             "checked_at": "x\r\u202e", "open": {"high\nerror: forged count": 1},
             "superseded_by": "p\x1b[2J"}  # fmt: skip
    (_history(repo) / "20260101T000000.000000Z.json").write_text(json.dumps(entry))

    ran = run_cli(repo, ["list"])

    a_users_error_of(ran, 0)
    lines = ran.stdout.splitlines()
    assert not [line for line in lines if line.startswith("error:")], ran.stdout
    assert not {"\x1b", "\x07", "\r", "\u202e"} & set(ran.stdout), repr(ran.stdout)


def test_a_huge_history_entry_is_not_read_whole(repo: Path) -> None:
    # a sparse file: nothing on disk, 512 MB to whoever reads it whole
    with (_history(repo) / "20260101T000000.000000Z.json").open("wb") as f:
        f.truncate(512 << 20)

    ran = run_cli(repo, ["list"], deadline=60)

    a_users_error_of(ran, 0)
    assert ran.peak_mb < 300, f"{ran.peak_mb:.0f} MB to read a history entry (a record is bounded at 16 MiB)"
