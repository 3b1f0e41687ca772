"""A support date far in the future is valid by the schema (a day ``YYYY-MM-DD`` and a policy of
at most 240 months) but its end-of-life date lies past the calendar Python counts (year 9999):
``validate`` said the manifest was valid, then ``list`` and ``notes`` died with exit 70 (our
bug). A manifest ``validate`` accepts must never make another command exit 70; the one that
cannot be read must be refused by ``validate`` itself, located (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import run

REF = "training-cpu-pytorch:25.03"


def support(repo: Path, text: str) -> None:
    path = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize(
    "text",
    ["support:\n  months: 240\n  released: 9999-12-01\n", "support:\n  months: 1\n  released: 9999-12-31\n"],
)
def test_an_end_of_life_past_year_9999_is_refused_by_validate_and_never_an_internal_error(
    repo: Path, text: str
) -> None:
    support(repo, text)

    validated = run(repo, "validate", REF)
    listed = run(repo, "list")
    listed_json = run(repo, "list", "--json")
    notes = run(repo, "notes", REF, "--lang", "en")

    assert validated.exit_code == 2, validated.stdout
    assert "support" in validated.stderr
    for result in (listed, listed_json, notes):
        assert result.exit_code != 70, result.stderr
