"""The vulnerability gate's rules, one test each, on small OSV records made for the tests (their
ids say so: TEST-…): the OSV evaluation rules per ecosystem, aliases, severity, reading
advisories offline, and reviewed exceptions (OpenVEX)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import ConfigError
from xpu_release.evidence.matching import affects, at_or_above, severity
from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.scan import packages_of, scan
from xpu_release.evidence.vex import read_vex
from xpu_release.manifest import Repo

ROOT = Path(__file__).resolve().parents[3]
TODAY = date(2026, 12, 3)


def record(rid: str, eco: str, name: str, *events: dict[str, str], versions: tuple[str, ...] = (),
           aliases: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:  # fmt: skip
    ranges = [{"type": "ECOSYSTEM", "events": list(events)}] if events else []
    return {"schema_version": "1.6.0", "id": rid, "aliases": list(aliases), "summary": f"{rid} summary",
            "affected": [{"package": {"ecosystem": eco, "name": name}, "ranges": ranges,
                          "versions": list(versions)}], **extra}  # fmt: skip


def hit(rec: dict[str, Any], version: str, name: str = "demo", eco: str = "PyPI") -> bool:
    return affects(rec, eco, name, version) is not None


# --- PyPI --------------------------------------------------------------------------------------


def test_introduced_opens_and_fixed_closes_exclusively() -> None:
    rec = record("TEST-1", "PyPI", "demo", {"introduced": "1.0"}, {"fixed": "1.5"})
    assert [hit(rec, v) for v in ("0.9", "1.0", "1.4.9", "1.5", "2.0")] == [False, True, True, False, False]


def test_introduced_zero_means_from_the_first_version() -> None:
    rec = record("TEST-2", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.0"})
    assert hit(rec, "0.0.1")
    assert not hit(rec, "1.0")


def test_last_affected_closes_inclusively() -> None:
    rec = record("TEST-3", "PyPI", "demo", {"introduced": "0"}, {"last_affected": "2.0"})
    assert hit(rec, "2.0")
    assert not hit(rec, "2.0.1")


def test_limit_caps_the_range() -> None:
    rec = record("TEST-4", "PyPI", "demo", {"introduced": "0"}, {"limit": "3.0"})
    assert hit(rec, "2.9")
    assert not hit(rec, "3.0")


def test_several_introduced_and_fixed_events_make_several_ranges() -> None:
    rec = record("TEST-5", "PyPI", "demo", {"introduced": "1.0"}, {"fixed": "1.2"}, {"introduced": "2.0"},
                 {"fixed": "2.3"})  # fmt: skip
    assert [hit(rec, v) for v in ("1.1", "1.5", "2.1", "2.3")] == [True, False, True, False]


def test_an_explicit_versions_list_matches_exactly() -> None:
    rec = record("TEST-6", "PyPI", "demo", versions=("1.0.0", "1.0.2"))
    assert hit(rec, "1.0")  # PEP 440: 1.0 == 1.0.0
    assert not hit(rec, "1.0.1")


def test_versions_are_ordered_by_pep_440_not_as_text() -> None:
    rec = record("TEST-7", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.10"})
    assert hit(rec, "1.9")  # as text "1.9" > "1.10"
    assert hit(rec, "1.10rc1")  # a pre-release of the fix is still before it


def test_a_local_label_is_compared_by_its_public_version() -> None:
    rec = record("TEST-8", "PyPI", "torch", {"introduced": "0"}, {"fixed": "2.13.1"})
    assert hit(rec, "2.13.0+cpu", name="torch")
    assert not hit(rec, "2.13.1+cpu", name="torch")


def test_pypi_names_are_pep_503_normalised() -> None:
    rec = record("TEST-9", "PyPI", "Flash_Attn", {"introduced": "0"}, {"fixed": "9"})
    assert hit(rec, "1.0", name="flash-attn")
    assert hit(rec, "1.0", name="flash.attn")


def test_git_ranges_are_ignored() -> None:
    rec = record("TEST-10", "PyPI", "demo")
    rec["affected"][0]["ranges"] = [{"type": "GIT", "repo": "https://example.invalid/demo",
                                     "events": [{"introduced": "0"}, {"fixed": "abc123"}]}]  # fmt: skip
    assert not hit(rec, "1.0")


def test_a_record_of_another_package_or_ecosystem_does_not_match() -> None:
    rec = record("TEST-11", "PyPI", "demo", {"introduced": "0"})
    assert not hit(rec, "1.0", name="other")
    assert not hit(rec, "1.0", eco="Debian:12")


# --- Debian ------------------------------------------------------------------------------------


def test_debian_versions_follow_debians_rules() -> None:
    rec = record("TEST-12", "Debian:12", "openssl", {"introduced": "0"}, {"fixed": "3.0.20-1~deb12u3"})
    assert hit(rec, "3.0.20-1~deb12u2", name="openssl", eco="Debian:12")  # ~ sorts before anything
    assert not hit(rec, "3.0.20-1", name="openssl", eco="Debian:12")
    assert not hit(rec, "1:0.1-1", name="openssl", eco="Debian:12")  # an epoch outranks everything


def test_the_sbom_gives_debian_packages_by_source_with_the_source_version() -> None:
    sbom = json.dumps({"components": [
        {"purl": "pkg:deb/debian/libssl3@3.0.20-1~deb12u2?arch=amd64&distro=debian-12&upstream=openssl"},
        {"purl": "pkg:deb/debian/openssl@3.0.20-1~deb12u2?arch=amd64&distro=debian-12"},
        {"purl": "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12",
         "properties": [{"name": "io.xpu-release:source-version", "value": "5.2.15-2"}]},
        {"purl": "pkg:pypi/torch@2.13.0%2Bcpu"},
    ]}).encode()  # fmt: skip

    found = {(p.ecosystem, p.name, p.version): p.binaries for p in packages_of(sbom)}

    assert found == {
        ("PyPI", "torch", "2.13.0+cpu"): (),
        ("Debian:12", "openssl", "3.0.20-1~deb12u2"): ("libssl3", "openssl"),
        ("Debian:12", "bash", "5.2.15-2"): ("bash",),
    }


# --- severity ----------------------------------------------------------------------------------


def test_severity_is_the_base_score_of_the_cvss_vector() -> None:
    rec = record("TEST-13", "PyPI", "demo", severity=[
        {"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}])  # fmt: skip
    assert severity(rec)[:2] == ("critical", 9.8)


def test_without_a_vector_the_ecosystem_rating_is_used() -> None:
    rec = record("TEST-14", "PyPI", "demo", database_specific={"severity": "MODERATE"})
    assert severity(rec)[0] == "medium"


def test_with_neither_severity_is_unknown_never_low() -> None:
    rec = record("TEST-15", "PyPI", "demo")
    assert severity(rec)[0] == "unknown"
    assert not at_or_above("unknown", "low")


# --- reading advisories ------------------------------------------------------------------------


def write_records(folder: Path, *records: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in records:
        (folder / f"{r['id']}.json").write_text(json.dumps(r))
    return folder


def test_withdrawn_records_and_other_schema_versions_are_skipped_and_counted(tmp_path: Path) -> None:
    live = record("TEST-16", "PyPI", "demo", {"introduced": "0"})
    gone = {**record("TEST-17", "PyPI", "demo", {"introduced": "0"}), "withdrawn": "2026-01-01T00:00:00Z"}
    future = {**record("TEST-18", "PyPI", "demo", {"introduced": "0"}), "schema_version": "2.0.0"}
    folder = write_records(tmp_path / "osv", live, gone, future)
    (folder / "broken.json").write_text("{")

    adv = Advisories([folder], tmp_path / "cache")

    assert [a.id for a in adv.lookup("PyPI", "demo")] == ["TEST-16"]
    assert (adv.counts.records, adv.counts.withdrawn, adv.counts.other_schema, adv.counts.unreadable) == (
        1,
        1,
        1,
        1,
    )


def test_an_export_archive_is_indexed_once_by_its_sha256(tmp_path: Path) -> None:
    archive = tmp_path / "PyPI" / "all.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(50):
            r = record(f"TEST-Z{i}", "PyPI", f"pkg{i % 5}", {"introduced": "0"})
            z.writestr(f"{r['id']}.json", json.dumps(r))
    cache = tmp_path / "cache"

    first = Advisories([tmp_path], cache)
    indexes = sorted((cache / "advisories").iterdir())
    second = Advisories([archive], cache)

    assert len(first.lookup("PyPI", "pkg3")) == 10
    assert len(second.lookup("PyPI", "Pkg3")) == 10  # PEP 503
    assert len(indexes) == 1
    assert sorted((cache / "advisories").iterdir()) == indexes  # not built again
    assert second.counts.records == 50


def test_a_damaged_index_is_made_again(tmp_path: Path) -> None:
    archive = tmp_path / "all.zip"
    with zipfile.ZipFile(archive, "w") as z:
        r = record("TEST-D1", "PyPI", "demo", {"introduced": "0"})
        z.writestr("TEST-D1.json", json.dumps(r))
    cache = tmp_path / "cache"
    Advisories([archive], cache).close()
    (index,) = (cache / "advisories").iterdir()
    index.write_bytes(b"not a database" * 100)  # a killed writer, a full disk

    adv = Advisories([archive], cache)

    assert [a.id for a in adv.lookup("PyPI", "demo")] == ["TEST-D1"]


def test_a_path_that_is_no_advisory_set_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="OSV"):
        Advisories([tmp_path / "notes.txt"], tmp_path / "cache")


# --- the gate ----------------------------------------------------------------------------------

SBOM = json.dumps({"components": [
    {"purl": "pkg:pypi/demo@1.0"},
    {"purl": "pkg:pypi/safe@1.0"},
    {"purl": "pkg:deb/debian/libssl3@3.0.20-1~deb12u2?arch=amd64&distro=debian-12&upstream=openssl"},
]}).encode()  # fmt: skip
CRITICAL = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]
LOW = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:L/AC:H/PR:H/UI:R/S:U/C:L/I:N/A:N"}]


def spec() -> Any:
    return replace(Repo(ROOT).load_ref("training-cpu-pytorch:25.03"), image="demo-image")


def vex_file(tmp_path: Path, *statements: dict[str, Any]) -> Path:
    path = tmp_path / "vex.openvex.json"
    doc = {"@context": "https://openvex.dev/ns/v0.2.0", "@id": "https://example.invalid/vex/1",
           "author": "release engineering", "timestamp": "2026-12-01T00:00:00Z", "version": 1,
           "statements": list(statements)}  # fmt: skip
    path.write_text(json.dumps(doc, indent=2))
    return path


def advisories(tmp_path: Path) -> Advisories:
    folder = write_records(
        tmp_path / "osv",
        record("TEST-PY-1", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.1"}, aliases=("CVE-2026-0001",),
               severity=CRITICAL),
        record("TEST-GHSA-1", "PyPI", "demo", {"introduced": "0"}, {"fixed": "1.2"},
               aliases=("CVE-2026-0001",)),
        record("TEST-DEB-1", "Debian:12", "openssl", {"introduced": "0"}, {"fixed": "3.0.20-1~deb12u3"},
               aliases=("CVE-2026-0002",), severity=LOW),
    )  # fmt: skip
    return Advisories([folder], tmp_path / "cache")


def test_a_finding_at_the_threshold_without_exception_blocks(tmp_path: Path) -> None:
    result = scan(spec(), SBOM, advisories(tmp_path), (), today=TODAY)

    demo = next(f for f in result.findings if f.package.name == "demo")
    assert demo.ids == ("CVE-2026-0001", "TEST-GHSA-1", "TEST-PY-1")  # one finding, the CVE first
    assert demo.fixed == ("1.1", "1.2")
    assert demo.level == "critical"
    assert demo.blocking
    ssl = next(f for f in result.findings if f.package.name == "openssl")
    assert (ssl.level, ssl.blocking, ssl.package.binaries) == ("low", False, ("libssl3",))
    assert not result.passed
    assert len(result.findings) == 2


def test_a_reviewed_exception_lets_the_release_pass(tmp_path: Path) -> None:
    statements, problems = read_vex(
        vex_file(
            tmp_path,
            {
                "vulnerability": {"name": "CVE-2026-0001"},
                "products": [{"@id": "pkg:oci/demo-image", "subcomponents": [{"@id": "pkg:pypi/demo"}]}],
                "status": "not_affected",
                "justification": "vulnerable_code_not_in_execute_path",
                "review_by": "2027-03-31",
            },
        ),
        "vex.openvex.json",
    )

    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    assert problems == []
    assert result.passed
    demo = next(f for f in result.findings if f.package.name == "demo")
    assert demo.exception is not None
    assert demo.exception.where == "vex.openvex.json:8"


def test_an_expired_exception_stops_counting_and_says_so(tmp_path: Path) -> None:
    statements, _ = read_vex(
        vex_file(
            tmp_path,
            {
                "vulnerability": {"name": "TEST-PY-1"},
                "products": ["pkg:pypi/demo@1.0"],
                "status": "affected",
                "action_statement": "upgrade demo when 1.2 is out",
                "review_by": "2026-11-30",
            },
        ),
        "vex.json",
    )

    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    demo = next(f for f in result.findings if f.package.name == "demo")
    assert demo.blocking
    assert "expired on 2026-11-30" in demo.note


def test_an_exception_that_matches_nothing_is_stale_and_fails_the_gate_with_its_line(tmp_path: Path) -> None:
    statements, _ = read_vex(
        vex_file(
            tmp_path,
            {
                "vulnerability": {"name": "CVE-2026-0001"},
                "products": [{"@id": "pkg:oci/demo-image", "subcomponents": [{"@id": "pkg:pypi/demo"}]}],
                "status": "not_affected",
                "justification": "component_not_present",
                "review_by": "2027-03-31",
            },
            {
                "vulnerability": {"name": "CVE-2020-9999"},
                "products": ["pkg:pypi/demo"],
                "status": "not_affected",
                "justification": "component_not_present",
                "review_by": "2027-03-31",
            },
        ),
        "vex.json",
    )

    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    assert not result.passed
    assert [s.vulnerability for s in result.stale] == ["CVE-2020-9999"]
    assert result.stale[0].where == "vex.json:26"  # where its statement opens


def test_a_statement_about_another_image_is_not_this_images(tmp_path: Path) -> None:
    statements, _ = read_vex(
        vex_file(
            tmp_path,
            {
                "vulnerability": {"name": "CVE-2026-0001"},
                "products": [{"@id": "pkg:oci/other-image"}],
                "status": "not_affected",
                "justification": "component_not_present",
                "review_by": "2027-03-31",
            },
        ),
        "v",
    )

    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    assert result.stale == ()  # not stale either: it is another image's
    assert next(f for f in result.findings if f.package.name == "demo").blocking


def test_fixed_is_a_claim_not_an_exception(tmp_path: Path) -> None:
    statements, _ = read_vex(
        vex_file(
            tmp_path,
            {"vulnerability": {"name": "CVE-2026-0001"}, "products": ["pkg:pypi/demo"], "status": "fixed"},
        ),
        "v",
    )

    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    demo = next(f for f in result.findings if f.package.name == "demo")
    assert demo.blocking
    assert "says fixed, but 1.0 is affected" in demo.note


def test_unknown_severity_blocks_unless_the_manifest_says_otherwise(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "osv", record("TEST-U-1", "PyPI", "safe", {"introduced": "0"}))
    adv = Advisories([folder], tmp_path / "cache")

    strict = scan(spec(), SBOM, adv, (), today=TODAY)
    lenient = scan(replace(spec(), fail_on_unknown=False), SBOM, adv, (), today=TODAY)

    assert [f.level for f in strict.findings] == ["unknown"]
    assert not strict.passed
    assert lenient.passed


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ({"vulnerability": {"name": "CVE-1"}, "status": "not_affected", "review_by": "2027-01-01"},
         "justification"),
        ({"vulnerability": {"name": "CVE-1"}, "status": "affected", "review_by": "2027-01-01"},
         "action_statement"),
        ({"vulnerability": {"name": "CVE-1"}, "status": "under_investigation"}, "review_by"),
        ({"vulnerability": {"name": "CVE-1"}, "status": "maybe"}, "status must be one of"),
        ({"status": "fixed"}, "vulnerability name"),
        ({"vulnerability": {"name": "CVE-1"}, "status": "fixed", "products": ["not a purl"]}, "package URL"),
    ],
)  # fmt: skip
def test_the_shape_of_a_vex_statement_is_checked_with_its_line(
    tmp_path: Path, statement: dict[str, Any], says: str
) -> None:
    _, problems = read_vex(vex_file(tmp_path, statement), "images/demo/vex.openvex.json")

    assert problems, statement
    assert says in str(problems[0])
    assert str(problems[0]).startswith("images/demo/vex.openvex.json:")


# --- SARIF and the commands --------------------------------------------------------------------


def test_the_sarif_output_passes_sarifs_own_schema(tmp_path: Path) -> None:
    import jsonschema

    from xpu_release.evidence.sarif import to_sarif

    from ...needs import sarif_schema

    schema_file = sarif_schema()
    statements, _ = read_vex(
        vex_file(
            tmp_path,
            {
                "vulnerability": {"name": "CVE-2026-0002"},
                "products": ["pkg:deb/debian/libssl3"],
                "status": "not_affected",
                "justification": "component_not_present",
                "review_by": "2027-03-31",
            },
        ),
        "v",
    )
    result = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    doc = json.loads(to_sarif(result, manifest="manifests/demo/1.0.yaml", version="0.1.0"))

    jsonschema.Draft202012Validator(json.loads(schema_file.read_text())).validate(doc)
    levels = {r["ruleId"]: r["level"] for r in doc["runs"][0]["results"]}
    assert levels == {"CVE-2026-0001": "error", "CVE-2026-0002": "note"}
    rules = {r["id"]: r["properties"]["security-severity"] for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["CVE-2026-0001"] == "9.8"


def test_scan_without_advisories_is_a_config_error(repo: Path) -> None:
    from ..helpers import run

    result = run(repo, "scan", "training-cpu-pytorch:25.03")

    assert result.exit_code == 3
    assert "--advisories" in result.stderr


def test_validate_checks_the_shape_of_an_images_vex_file(repo: Path) -> None:
    from ..helpers import run

    path = repo / "images" / "training-cpu-pytorch" / "vex.openvex.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    vex_file(path.parent, {"vulnerability": {"name": "CVE-1"}, "status": "not_affected"})

    result = run(repo, "validate")

    assert result.exit_code == 2
    assert "images/training-cpu-pytorch/vex.openvex.json:" in result.stderr
    assert "justification" in result.stderr


def test_no_scan_needs_a_reason(repo: Path) -> None:
    from ..helpers import run

    result = run(repo, "release", "training-cpu-pytorch:25.03", "--no-scan", " ")

    assert result.exit_code == 3
    assert "needs a reason" in result.stderr


def test_advisories_that_do_not_exist_fail_a_dry_run_as_they_would_fail_the_release(repo: Path) -> None:
    from click.testing import CliRunner

    from xpu_release.cli import cli

    args = ["--root", str(repo), "release", "training-cpu-pytorch:25.03", "--dry-run"]
    result = CliRunner().invoke(cli, args, env={"XPU_RELEASE_ADVISORIES": "/nonexistent/osv"})

    assert result.exit_code == 3
    assert "advisories: /nonexistent/osv does not exist" in result.stderr


# --- advisories and VEX are outside data: whatever they hold, never an error of ours ---------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["PyPI", "Debian:12", "six", "0", "1.0", "ECOSYSTEM", "GIT", "CVSS_V3", "introduced",
                       "fixed", "pkg:pypi/six", "not_affected", "2027-01-01"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "aliases", "affected", "package", "ecosystem", "name", "ranges", "type",
                         "events", "introduced", "fixed", "last_affected", "limit", "versions", "severity",
                         "score", "schema_version", "withdrawn", "database_specific", "vulnerability",
                         "products", "subcomponents", "@id", "status", "justification", "review_by",
                         "action_statement"]),
        inner, max_size=6),
    max_leaves=30,
)  # fmt: skip


@given(record=JSON, version=st.sampled_from(["1.0", "1.16.0", "2.13.0+cpu", "not a version", "1:2.3-4~b1"]))
def test_any_json_as_an_advisory_is_matched_or_skipped_never_an_exception(record: Any, version: str) -> None:
    from xpu_release.evidence.osv import Counts, _keys, _usable

    if isinstance(record, dict):
        record = {**record, "id": "TEST-H"}
    if _usable(record, Counts()):
        _keys(record)
        for eco in ("PyPI", "Debian:12"):
            affects(record, eco, "six", version)
        severity(record)


@given(statement=JSON)
def test_any_json_as_a_vex_statement_is_read_or_named_as_a_problem(statement: Any) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        statements, problems = read_vex(vex_file(Path(tmp), statement), "vex.json")
    assert len(statements) + len(problems) >= 1  # each statement is either taken or named
    for p in problems:
        assert str(p).startswith("vex.json:")
