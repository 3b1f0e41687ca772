"""The ``seen`` of a re-scan history entry, written beside it: what the next ``watch`` reads for
the first day a scan saw each finding (the entry is twenty times its size). When it is missing,
damaged, a FIFO, or names another entry or release, the entry is read whole instead: the days
are the same either way."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from xpu_release.release.model.history import append, folder, latest_seen

IMAGE, VERSION = "training-cpu-pytorch", "25.03"
REF = f"{IMAGE}:{VERSION}"
NOW = datetime(2026, 12, 3, 1, 2, 3, tzinfo=UTC)


def entry(day: str) -> dict[str, object]:
    return {"ref": REF, "state": "needs a patch", "checked_at": "2026-12-03T01:02:03Z",
            "seen": [{"id": "CVE-2026-0001", "package": "accelerate", "first_seen": day}]}  # fmt: skip


def days(root: Path) -> dict[tuple[str, str], date]:
    return latest_seen(root, IMAGE, VERSION)


def test_the_seen_beside_the_entry_is_what_is_read(tmp_path: Path) -> None:
    path = append(tmp_path, IMAGE, VERSION, entry("2026-11-20"), NOW)
    beside = path.with_suffix(".seen")
    beside.write_text(beside.read_text().replace("2026-11-20", "2026-11-01"))  # only it says the 1st

    assert days(tmp_path) == {("CVE-2026-0001", "accelerate"): date(2026, 11, 1)}


@pytest.mark.parametrize("spoil", ["missing", "damaged", "fifo", "another entry", "another release"])
def test_without_a_good_seen_beside_it_the_entry_is_read_whole(tmp_path: Path, spoil: str) -> None:
    path = append(tmp_path, IMAGE, VERSION, entry("2026-11-20"), NOW)
    beside = path.with_suffix(".seen")
    text = beside.read_text()
    beside.unlink()
    if spoil == "damaged":
        beside.write_text(text[: len(text) // 2])
    elif spoil == "fifo":
        os.mkfifo(beside)  # never waited on
    elif spoil == "another entry":
        beside.write_text(text.replace(path.name, "20261101T000000.000000Z.json").replace("11-20", "01-01"))
    elif spoil == "another release":
        beside.write_text(text.replace(REF, f"{IMAGE}:25.02").replace("11-20", "01-01"))

    assert days(tmp_path) == {("CVE-2026-0001", "accelerate"): date(2026, 11, 20)}


def test_a_newer_entry_without_its_seen_is_read_whole_not_an_older_seen(tmp_path: Path) -> None:
    append(tmp_path, IMAGE, VERSION, entry("2026-11-20"), NOW)
    newer = append(tmp_path, IMAGE, VERSION, entry("2026-11-10"), NOW.replace(hour=2))
    newer.with_suffix(".seen").unlink()

    assert days(tmp_path) == {("CVE-2026-0001", "accelerate"): date(2026, 11, 10)}


def test_no_history_is_no_day(tmp_path: Path) -> None:
    assert days(tmp_path) == {}
    assert not folder(tmp_path, IMAGE, VERSION).exists()
