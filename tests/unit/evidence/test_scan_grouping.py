"""Records of one package that name one vulnerability (by id or alias) are one finding, however
they are joined, and grouping them is near-linear: a package may have thousands of advisories
(Debian's ``linux``), and an archive of 50,000 tiny records must not hold the gate for minutes."""

from __future__ import annotations

from pathlib import Path

from xpu_release.evidence.judging import _groups
from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.scan import scan

from ..guard.hostile import deadline
from .test_vulnerabilities import SBOM, TODAY, record, spec, write_records


def ids(records: list[dict[str, object]], groups: list[list[int]]) -> list[list[str]]:
    return [[str(records[n]["id"]) for n in g] for g in groups]


def test_records_joined_only_through_a_later_one_are_one_group_in_the_order_met() -> None:
    records = [
        {"id": "A", "aliases": ["CVE-1"]},
        {"id": "B", "aliases": ["CVE-2"]},
        {"id": "C"},
        {"id": "D", "aliases": ["CVE-2", "CVE-1"]},  # the bridge, met last
        {"id": "C", "aliases": 7},  # an alias list that is not one: the id still joins
    ]

    assert ids(records, _groups(records)) == [["A", "B", "D"], ["C", "C"]]


def test_a_joined_finding_has_every_fixed_version_of_its_records(tmp_path: Path) -> None:
    folder = write_records(
        tmp_path / "osv",
        record("TEST-A", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.1"}, aliases=("CVE-2026-7",)),
        record("TEST-B", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.3"}, aliases=("GHSA-x",)),
        record(
            "TEST-C", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.2"}, aliases=("GHSA-x", "CVE-2026-7")
        ),
        record("TEST-D", "PyPI", "demo", {"introduced": "0"}, {"fixed": "9.0"}),  # another one
    )
    result = scan(spec(), SBOM, Advisories([folder], tmp_path / "cache"), (), today=TODAY)

    demo = sorted((f.ids, f.fixed) for f in result.findings if f.package.name == "demo")
    assert demo == [
        (("CVE-2026-7", "GHSA-x", "TEST-A", "TEST-B", "TEST-C"), ("1.1", "1.2", "1.3")),
        (("TEST-D",), ("9.0",)),
    ]


def test_grouping_fifty_thousand_records_of_one_package_takes_moments() -> None:
    chained = [{"id": f"R-{n}", "aliases": [f"R-{n - 1}"]} for n in range(25_000)]  # one long chain
    apart = [{"id": f"S-{n}", "aliases": [f"CVE-{n}"]} for n in range(25_000)]  # each its own

    with deadline(10):  # quadratic: some 25 minutes
        groups = _groups(chained + apart)

    assert len(groups) == 1 + 25_000
    assert len(groups[0]) == 25_000
