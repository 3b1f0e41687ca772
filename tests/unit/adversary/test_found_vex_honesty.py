"""The gate's honesty, where a statement is written so that it looks like more (or less) than it
says. vulnerability-gate.md: "A product is honoured as written ... A statement about another
version or another digest silences nothing in this build"; "an impact_statement or an
action_statement that is empty or only blanks is no reason: the statement is refused".

- ``Subject.is_named_by`` compares a ``pkg:oci`` product's name only: its namespace
  (``pkg:oci/someone-else/demo-image``) and its ``repository_url`` qualifier (the repository
  the purl spec says the image lives in) are ignored, so a statement about another
  repository's image of the same last name silences this one.
- ``_str`` strips ASCII-ish blanks (``str.strip``) only: a statement of one zero-width space
  (U+200B) or one Braille blank (U+2800) is invisible in review yet counts as a reason.
- ``scan --today 9999-12-31``: the horizon is today + 365 days, past ``date.max``: exit 70."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xpu_release.evidence.vex import read_vex

from ..cli.hostile import a_users_error, advisory
from ..cli.test_hostile_inputs import scan
from ..evidence.test_gate_honesty import demo_blocks, excepting
from ..evidence.test_vulnerabilities import TODAY, vex_file


@pytest.mark.parametrize(
    "product",
    [
        "pkg:oci/someone-else/demo-image",
        "pkg:oci/demo-image?repository_url=docker.io%2Fsomeone-else%2Fdemo-image",
    ],
    ids=["another namespace", "another repository_url"],
)
def test_a_statement_about_another_repositorys_image_silences_nothing(tmp_path: Path, product: str) -> None:
    assert demo_blocks(tmp_path, excepting(product)) is True  # today: False, the finding is excepted


@pytest.mark.parametrize(
    "fields",
    [
        {"justification": None, "impact_statement": "\u200b"},
        {"justification": None, "impact_statement": "\u2800\u3000"},
        {"status": "affected", "justification": None, "action_statement": "\u200b\u200c\ufeff"},
    ],
    ids=["zero-width impact", "braille-blank impact", "zero-width action"],
)
def test_an_invisible_reason_is_no_reason(tmp_path: Path, fields: dict[str, Any]) -> None:
    statement = {k: v for k, v in excepting("pkg:oci/demo-image", **fields).items() if v is not None}

    _, problems = read_vex(vex_file(tmp_path, statement), "images/demo/vex.openvex.json", today=TODAY)

    assert len(problems) == 1, "a statement no reviewer can see is taken as a reason"


def test_scan_today_at_the_end_of_the_calendar_is_no_internal_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ..cli.hostile import without_an_engine

    without_an_engine(monkeypatch)
    osv = tmp_path / "osv"
    osv.mkdir()
    (osv / "a.json").write_text(json.dumps(advisory()))
    vex = repo / "images" / "training-cpu-pytorch" / "vex.openvex.json"
    statement = {"vulnerability": {"name": "TEST-1"}, "products": ["pkg:pypi/demo@1.0"],
                 "status": "under_investigation", "review_by": "2027-01-01"}  # fmt: skip
    vex.write_text(json.dumps({"@context": "https://openvex.dev/ns/v0.2.0", "statements": [statement]}))

    result = scan(repo, osv, "--today", "9999-12-31")

    a_users_error(result)  # today: exit 70, OverflowError: date value out of range
