"""Outside text echoed raw. outside-data.md: "Outside text shown to you (advisory ids, tags, a
registry's error text) has control characters, escape sequences and bidirectional overrides
written as visible escapes (\\n, \\x1b, \\u202e), so a log line cannot be forged."

``osv._safe`` escapes an advisory's id, aliases, summary and details, but not the versions of
its ranges: a ``fixed`` event is printed as it is, by ``scan`` (stdout and the gate's error on
stderr) and into the record. ``diff`` prints a release record's finding ids and package names
as they are (the record schema takes any string)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..cli.hostile import a_users_error, advisory, invoke, record_value, without_an_engine
from ..cli.test_hostile_inputs import scan

FORGED = "error: forged"


def _forged_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith(FORGED)]


def test_an_advisorys_fixed_version_cannot_forge_a_line(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_an_engine(monkeypatch)
    osv = tmp_path / "osv"
    osv.mkdir()
    events = [{"introduced": "0"}, {"fixed": f"1.1\n{FORGED}: nothing found, passed\x1b[2J"}]
    record = advisory()
    record["affected"][0]["ranges"] = [{"type": "ECOSYSTEM", "events": events}]
    (osv / "a.json").write_text(json.dumps(record))

    result = scan(repo, osv)

    a_users_error(result, 14)
    assert not _forged_lines(result.stdout), result.stdout  # today: "error: forged: …" a line of its own
    assert not _forged_lines(result.stderr), result.stderr
    assert "\x1b" not in result.output


def test_a_records_finding_cannot_forge_a_line_in_diff(repo: Path) -> None:
    for image, finding in (
        ("training-cpu-pytorch", f"CVE-1\n{FORGED} id"),
        ("training-xpu-pytorch", "CVE-2"),
    ):
        path = repo / "out" / "releases" / image / "25.03.json"
        path.parent.mkdir(parents=True)
        value = record_value(id=finding, package=f"demo\n{FORGED} package\u202e")
        path.write_text(
            json.dumps({**value, "ref": f"{image}:25.03", "manifest": f"manifests/{image}/25.03.yaml"})
        )

    result = invoke(repo, ["diff", "training-cpu-pytorch:25.03", "training-xpu-pytorch:25.03"])

    a_users_error(result, 0)
    assert not _forged_lines(result.stdout), result.stdout  # today: two forged lines
    assert "\u202e" not in result.stdout


def test_a_records_finding_cannot_forge_a_line_in_the_notes(repo: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    value = record_value(id=f"CVE-1\n{FORGED} id", package=f"demo\n{FORGED} package", vex="not_affected",
                         justification=f"reviewed\n{FORGED} justification\u202e")  # fmt: skip
    record.write_text(json.dumps(value))

    result = invoke(repo, ["notes", "training-cpu-pytorch:25.03", "--lang", "en", "--record", str(record)])

    a_users_error(result, 0)
    assert "## Security" in result.stdout
    assert not _forged_lines(result.stdout), result.stdout  # today: three forged lines in the notes
    assert "\u202e" not in result.stdout
