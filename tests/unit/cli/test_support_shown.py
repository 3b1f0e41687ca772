"""Where a release's support stands is said by ``list``, ``doctor`` and the notes, from the
manifest alone (no registry is asked for it): supported, ending soon, end of life."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from xpu_release.errors import StackError
from xpu_release.image.engine import Engine

from ..helpers import run

CLOSED = (
    "registries:\n"
    "  hub: {host: '127.0.0.1:1', insecure: true}\n"
    "  public: {host: '127.0.0.1:1', insecure: true}\n"
    "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
)


def supported_until(repo: Path, day: date) -> None:
    path = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text() + f"support:\n  until: {day.isoformat()}\n")


@pytest.mark.parametrize(
    ("days", "state", "words"),
    [(400, "supported", "supported until"), (30, "ending-soon", "ending soon: supported until"),
     (0, "end-of-life", "end of life since"), (-10, "end-of-life", "end of life since")],
)  # fmt: skip
def test_list_says_where_each_release_stands(repo: Path, days: int, state: str, words: str) -> None:
    day = date.today() + timedelta(days=days)
    supported_until(repo, day)

    listed = run(repo, "list")
    as_json = {r["ref"]: r for r in json.loads(run(repo, "list", "--json").stdout)}

    assert f"training-cpu-pytorch:25.03  {words} {day.isoformat()}" in listed.stdout
    assert as_json["training-cpu-pytorch:25.03"]["support"]["state"] == state
    assert as_json["pytorch-cpu-sdk:2.13.0"]["support"]["state"] == "unknown"
    assert "pytorch-cpu-sdk:2.13.0\n" in listed.stdout  # no date: nothing said


def test_doctor_says_it_and_never_fails_for_it(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(cls: type) -> Engine:
        msg = "no engine here"
        raise StackError(msg)

    monkeypatch.setattr(Engine, "connect", classmethod(no_engine))
    (repo / "closed.yaml").write_text(CLOSED)
    supported_until(repo, date.today() - timedelta(days=1))

    result = run(
        repo, "--registries", str(repo / "closed.yaml"), "doctor", "training-cpu-pytorch:25.03", "--json"
    )

    checks = {c["what"]: c for c in json.loads(result.stdout)}
    support = checks["training-cpu-pytorch:25.03 support"]
    assert support["ok"] is True
    assert support["detail"].startswith("end of life since ")


def test_the_notes_give_the_date_in_both_languages(repo: Path) -> None:
    supported_until(repo, date(2027, 3, 31))

    en = run(repo, "notes", "training-cpu-pytorch:25.03", "--lang", "en")
    zh = run(repo, "notes", "training-cpu-pytorch:25.03", "--lang", "zh")

    assert "| End of life | 2027-03-31 |" in en.stdout
    assert "| 终止支持日期 | 2027-03-31 |" in zh.stdout
