"""The gate is honest: an exception counts only for what it is written about, only when it
gives a reason, only until a review within the horizon, and never when it contradicts another
(issue #38, item 4). And the VEX a release publishes names its packages so that scanners match
them (issue #37, item 4)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from xpu_release.evidence.scan import gate_failure, scan
from xpu_release.evidence.vex import published_at, read_vex
from xpu_release.evidence.vexdoc import release_vex, unqualified
from xpu_release.oci.endpoint import Endpoint

from .test_vulnerabilities import SBOM, TODAY, advisories, spec, vex_file

IMAGE_ID = "sha256:" + "7" * 64
OTHER = "sha256:" + "8" * 64


def excepting(product: str, **fields: Any) -> dict[str, Any]:
    return {
        "vulnerability": {"name": "CVE-2026-0001"},
        "products": [{"@id": product, "subcomponents": [{"@id": "pkg:pypi/demo"}]}],
        "status": "not_affected",
        "justification": "vulnerable_code_not_in_execute_path",
        "review_by": str(TODAY + timedelta(days=90)),
        **fields,
    }


def demo_blocks(
    tmp_path: Path, *statements: dict[str, Any], repositories: frozenset[str] = frozenset()
) -> bool:
    read, problems = read_vex(vex_file(tmp_path, *statements), "vex.openvex.json", today=TODAY)
    assert problems == []
    result = scan(spec(), SBOM, advisories(tmp_path), read, today=TODAY, digests=frozenset({IMAGE_ID}),
                  repositories=repositories)  # fmt: skip
    return next(f for f in result.findings if f.package.name == "demo").blocking


# --- a product is honoured as exactly as it is written -----------------------------------------


@pytest.mark.parametrize(
    ("product", "blocks"),
    [
        ("pkg:oci/demo-image", False),  # every release of the image
        ("pkg:oci/demo-image@25.03", False),  # this version
        (f"pkg:oci/demo-image@{IMAGE_ID.replace(':', '%3A')}", False),  # this image
        ("pkg:oci/demo-image@25.04", True),  # another version
        (f"pkg:oci/demo-image@{OTHER.replace(':', '%3A')}", True),  # another image
        ("pkg:oci/other-image", True),  # another image family
    ],
)
def test_a_statement_about_a_version_or_digest_counts_for_that_one_only(
    tmp_path: Path, product: str, blocks: bool
) -> None:
    assert demo_blocks(tmp_path, excepting(product)) is blocks


PUBLIC = Endpoint(registry="public", role="public", region=None, host="Registry.Ex:5000", namespace="xpu")
OURS = published_at("demo-image", [PUBLIC])
HERE = "registry.ex%3A5000%2Fxpu%2Fdemo-image"


@pytest.mark.parametrize(
    ("product", "blocks"),
    [
        (f"pkg:oci/demo-image?repository_url={HERE}", False),
        (f"pkg:oci/demo-image?repository_url=https%3A%2F%2F{HERE}%2F", False),
        (f"pkg:oci/demo-image@25.03?repository_url={HERE}", False),
        (f"pkg:oci/demo-image@25.04?repository_url={HERE}", True),
        ("pkg:oci/demo-image?repository_url=registry.ex%3A5000%2Fxpu%2Fother-image", True),
        ("pkg:oci/demo-image?repository_url=elsewhere.example%2Fxpu%2Fdemo-image", True),
        ("pkg:oci/xpu/demo-image", True),  # a namespace is another repository's image
    ],
)
def test_a_repository_url_counts_where_the_release_is_published_only(
    tmp_path: Path, product: str, blocks: bool
) -> None:
    assert {"registry.ex:5000/xpu/demo-image"} == OURS
    assert demo_blocks(tmp_path, excepting(product), repositories=OURS) is blocks


def test_a_repository_url_counts_for_nothing_where_the_scan_knows_no_repository(tmp_path: Path) -> None:
    assert demo_blocks(tmp_path, excepting(f"pkg:oci/demo-image?repository_url={HERE}")) is True


# --- a reason, and a review within the horizon --------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"justification": None, "impact_statement": "   "},
        {"justification": None, "impact_statement": "\n\t"},
        {"status": "affected", "justification": None, "action_statement": "  "},
    ],
    ids=["blank-impact", "whitespace-impact", "blank-action"],
)
def test_a_blank_reason_is_no_reason(tmp_path: Path, fields: dict[str, Any]) -> None:
    statement = {k: v for k, v in excepting("pkg:oci/demo-image", **fields).items() if v is not None}

    _, problems = read_vex(vex_file(tmp_path, statement), "images/demo/vex.openvex.json", today=TODAY)

    assert len(problems) == 1
    assert str(problems[0]).startswith("images/demo/vex.openvex.json:")
    assert "needs" in str(problems[0])


def test_a_review_a_century_ahead_is_refused_with_its_line(tmp_path: Path) -> None:
    statement = excepting("pkg:oci/demo-image", review_by="2126-12-01")

    path = vex_file(tmp_path, statement)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"review_by"' in text)

    _, problems = read_vex(path, "images/demo/vex.openvex.json", today=TODAY)

    (problem,) = problems
    assert str(problem).startswith(f"images/demo/vex.openvex.json:{line}:")
    assert "2126-12-01 is further ahead than 2027-12-03" in str(problem)
    assert "security.review_horizon_days" in str(problem)


def test_the_horizon_is_the_manifests_to_set(tmp_path: Path) -> None:
    statement = excepting("pkg:oci/demo-image", review_by=str(TODAY + timedelta(days=400)))
    path = vex_file(tmp_path, statement)

    _, yearly = read_vex(path, "v", today=TODAY)
    _, two_years = read_vex(path, "v", today=TODAY, horizon_days=730)

    assert len(yearly) == 1
    assert two_years == []


def test_the_scan_stage_reads_the_horizon_from_the_manifest() -> None:
    assert spec().review_horizon_days == 365
    assert replace(spec(), review_horizon_days=30).review_horizon_days == 30


# --- statements that contradict each other -------------------------------------------------------


def test_conflicting_statements_for_one_finding_stop_the_gate_naming_both(tmp_path: Path) -> None:
    not_affected = excepting("pkg:oci/demo-image")
    affected = excepting("pkg:oci/demo-image", status="affected", justification=None,
                         action_statement="upgrade when 1.2 is out")  # fmt: skip
    read, problems = read_vex(
        vex_file(tmp_path, not_affected, {k: v for k, v in affected.items() if v is not None}), "v.json"
    )
    assert problems == []

    result = scan(spec(), SBOM, advisories(tmp_path), read, today=TODAY)

    assert not result.passed
    (conflict,) = result.conflicts
    assert conflict.startswith("CVE-2026-0001 in demo 1.0: ")
    assert "v.json:8 says not_affected" in conflict
    assert "says affected" in conflict
    assert "conflicting statements for CVE-2026-0001" in gate_failure(result)


def test_two_statements_that_agree_are_no_conflict(tmp_path: Path) -> None:
    assert not demo_blocks(tmp_path, excepting("pkg:oci/demo-image"), excepting("pkg:oci/demo-image@25.03"))


# --- the published VEX names packages the way scanners match them --------------------------------


def test_the_release_vex_names_packages_without_qualifiers(tmp_path: Path) -> None:
    # trivy names bash `...?arch=amd64&distro=debian-12.15`; a VEX purl with the SBOM's own
    # qualifiers (distro=debian-12) matched nothing there, and the finding stayed open.
    statement = {
        "vulnerability": {"name": "CVE-2026-0002"},
        "products": [{"@id": "pkg:oci/demo-image", "subcomponents": [{"@id": "pkg:deb/debian/libssl3"}]}],
        "status": "not_affected",
        "justification": "vulnerable_code_not_in_execute_path",
        "review_by": str(TODAY + timedelta(days=30)),
    }
    read, _ = read_vex(vex_file(tmp_path, statement), "v", today=TODAY)
    result = scan(spec(), SBOM, advisories(tmp_path), read, today=TODAY)

    (entry,) = release_vex(result, previous=None).entries

    assert entry.packages == ("pkg:deb/debian/libssl3@3.0.20-1~deb12u2",)


@pytest.mark.parametrize(
    ("purl", "plain"),
    [
        (
            "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12",
            "pkg:deb/debian/bash@5.2.15-2%2Bb7",
        ),
        ("pkg:pypi/demo@1.0", "pkg:pypi/demo@1.0"),
        ("not a purl", "not a purl"),
    ],
)
def test_unqualified_drops_only_the_qualifiers(purl: str, plain: str) -> None:
    assert unqualified(purl) == plain
