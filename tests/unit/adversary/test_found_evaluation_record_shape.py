"""Found by review (issue 41): docs/using/evaluation.md says "The record's schema types every
field the notes and `diff` read: a record edited into another shape is refused (exit 12), never
half-rendered". The schema (image/evaluation.py ``EVALUATION_SCHEMA``) requires only ``status``
and ``reason``: a record whose evaluation says it passed (or failed) and carries nothing else is
read as a record, and its notes say "Measured with ``: None rounds ... CPU set None and None MB
... the ratio of medians of None ( is better) ... by more than None %", with an empty table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import DamagedFileError
from xpu_release.release.model import record as records

from ..release.test_evaluate import REF, notes_of
from ..release.test_record import COMPLETE


def read_back(path: Path) -> records.ReleaseRecord | DamagedFileError:
    try:
        return records.read(path)
    except DamagedFileError as exc:
        return exc


@pytest.mark.parametrize("status", ["passed", "failed"])
def test_an_evaluation_edited_down_to_its_status_is_refused_or_said_whole(
    repo: Path, tmp_path: Path, status: str
) -> None:
    edited: dict[str, Any] = {"status": status, "reason": "edited by hand"}
    path = tmp_path / "25.03.json"
    records.write(replace(COMPLETE, ref=REF, evaluation=edited), path)
    got = read_back(path)
    if isinstance(got, DamagedFileError):  # refused: exit 12, as the docs say
        assert got.exit_code == 12
        return
    for lang in ("en", "zh"):
        notes = notes_of(repo, REF, edited, lang)
        assert "None" not in notes, notes  # never half-rendered
