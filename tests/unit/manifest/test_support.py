"""Support dates (``support:``): where a release stands on a day, how the dates are inherited and
checked, and that they are metadata only: setting or moving one changes neither the Dockerfile,
nor the manifest's content hash, nor the image's inputs digest (so never the image)."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from xpu_release.image.inputs import BuildInputs
from xpu_release.image.render import render
from xpu_release.manifest import Repo, inherit, rules
from xpu_release.manifest.registries import load_registries
from xpu_release.manifest.support import SOON_DAYS, Support, add_months, calver_month, state
from xpu_release.manifest.types import Checker
from xpu_release.manifest.yamlsrc import Source

from ..helpers import run

ROOT = Path(__file__).resolve().parents[3]
TODAY = date(2026, 12, 5)


class Release:
    def __init__(self, version: str, support: Support | None) -> None:
        self.version = version
        self.support = support


@pytest.mark.parametrize(
    ("support", "version", "expected", "end"),
    [
        (None, "25.03", "unknown", None),
        (Support(months=12), "2.13.0", "unknown", None),  # no date to count from
        (Support(until=date(2027, 6, 1)), "1.0", "supported", date(2027, 6, 1)),
        (Support(until=date(2026, 12, 6)), "1.0", "ending-soon", date(2026, 12, 6)),  # one day left
        (Support(until=TODAY), "1.0", "end-of-life", TODAY),  # the date itself is end of life
        (Support(months=12), "25.03", "end-of-life", date(2026, 3, 1)),
        (Support(months=24), "25.03", "supported", date(2027, 3, 1)),
        (Support(months=12, released=date(2026, 1, 31)), "2.13.0", "ending-soon", date(2027, 1, 31)),
        (Support(months=1, until=date(2030, 1, 1)), "26.11", "supported", date(2030, 1, 1)),  # until wins
    ],
)
def test_where_a_release_stands_on_a_day(
    support: Support | None, version: str, expected: str, end: date | None
) -> None:
    standing = state(Release(version, support), TODAY)

    assert standing.state == expected
    if end is not None:
        assert standing.end == end
    assert standing.end_of_life is (expected == "end-of-life")


def test_soon_is_sixty_days_before_the_date() -> None:
    at_the_edge = state(Release("1.0", Support(until=date(2027, 2, 3))), TODAY)
    a_day_before = state(Release("1.0", Support(until=date(2027, 2, 4))), TODAY)

    assert SOON_DAYS == 60
    assert (at_the_edge.state, at_the_edge.days_left) == ("ending-soon", 60)
    assert (a_day_before.state, a_day_before.days_left) == ("supported", 61)
    assert at_the_edge.words() == "ending soon: supported until 2027-02-03 (60 days left)"
    assert state(Release("1.0", Support(until=TODAY)), TODAY).words() == f"end of life since {TODAY}"


@pytest.mark.parametrize(
    ("start", "months", "end"),
    [(date(2025, 3, 1), 12, date(2026, 3, 1)), (date(2026, 1, 31), 1, date(2026, 2, 28)),
     (date(2024, 1, 31), 1, date(2024, 2, 29)), (date(2025, 11, 15), 3, date(2026, 2, 15))],
)  # fmt: skip
def test_months_are_calendar_months(start: date, months: int, end: date) -> None:
    assert add_months(start, months) == end


@pytest.mark.parametrize(
    ("version", "month"),
    [("25.03", date(2025, 3, 1)), ("25.03.1", date(2025, 3, 1)), ("26.12-rc1", date(2026, 12, 1)),
     ("25.13", None), ("2.13.0", None), ("1.0", None)],
)  # fmt: skip
def test_a_calendar_version_names_its_month(version: str, month: date | None) -> None:
    assert calver_month(version) == month


# --- inherited, checked ------------------------------------------------------------------------


def test_only_the_familys_policy_is_inherited() -> None:
    dates = {"until": date(2026, 1, 1), "released": date(2025, 3, 2)}
    parent = {"version": "25.03", "support": {"months": 12, **dates}}

    child = inherit.Case.of(parent, {"version": "25.04"})
    own = inherit.Case.of(parent, {"version": "25.04", "support": {"until": date(2027, 1, 1)}})
    dates_only = inherit.Case.of({"version": "25.03", "support": dates}, {"version": "25.04"})
    for c in (child, own, dates_only):
        assert inherit.support_dates_belong_to_their_release(c) == []

    assert child.data["support"] == {"months": 12}
    assert own.data["support"] == {"months": 12, "until": date(2027, 1, 1)}
    assert "support" not in dates_only.data


def _rule_problems(data: dict[str, object]) -> list[tuple[str, str]]:
    checker = Checker(Source(file="m.yaml", data=data))
    rules.support_months_count_from_a_date(rules.Resolved(data, None), checker)
    return [(p.path, p.message) for p in checker.problems]


def test_months_need_a_date_to_count_from() -> None:
    assert _rule_problems({"version": "25.03", "support": {"months": 12}}) == []
    assert _rule_problems({"version": "2.13.0", "support": {"months": 12, "released": "2026-01-01"}}) == []
    assert _rule_problems({"version": "2.13.0", "support": {"months": 12, "until": "2026-01-01"}}) == []
    ((where, message),) = _rule_problems({"version": "2.13.0", "support": {"months": 12}})
    assert where == "support.months"
    assert "support.released" in message


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("support:\n  until: 2026-02-30\n", "cannot be read as a date"),
        ("support:\n  until: '2026-02-30'\n", "no day of the calendar"),
        ("support:\n  until: 2026-03-01T10:00:00Z\n", "is a time"),
        ("support:\n  until: next year\n", "expected a date YYYY-MM-DD"),
        ("support:\n  months: 0\n", "out of range"),
        ("support:\n  monhts: 12\n", "did you mean 'months'"),
    ],
)
def test_a_wrong_support_date_is_a_located_manifest_error(repo: Path, written: str, said: str) -> None:
    path = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text() + written)

    result = run(repo, "validate", "training-cpu-pytorch:25.03")

    assert result.exit_code == 2, result.stderr
    assert "manifests/training-cpu-pytorch/25.03.yaml:" in result.stderr
    assert said in result.stderr
    assert "Traceback" not in result.stderr


# --- metadata only -------------------------------------------------------------------------------


def _inputs(root: Path, ref: str) -> tuple[str, str, str]:
    """What the image is made of: the Dockerfile, the manifest's content hash, the inputs digest."""
    spec = Repo(root).load_ref(ref)
    registries = load_registries(root)
    inputs = BuildInputs.read(root, spec, registries).digest
    return render(root, spec, registries).text, spec.content_hash, inputs


@pytest.mark.parametrize("support", ["support:\n  until: 2027-03-31\n", "support:\n  months: 18\n",
                                     "support:\n  months: 6\n  until: '2025-01-01'\n"])  # fmt: skip
def test_a_support_date_never_changes_the_image_inputs(repo: Path, support: str) -> None:
    ref = "training-cpu-pytorch:25.03"
    lock = Path("images/training-cpu-pytorch/25.03/requirements.lock")
    shutil.copy(ROOT / lock, repo / lock)
    before = _inputs(repo, ref)
    path = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text() + support)

    after = _inputs(repo, ref)
    checked = run(repo, "render", "--all", "--check")

    assert Repo(repo).load_ref(ref).support is not None
    assert after == before
    assert checked.exit_code == 0, checked.stderr  # the committed Dockerfile is still current
