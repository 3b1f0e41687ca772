"""The vulnerability gate on the real stack: the fixture image's SBOM (read from the built image,
as publish attaches it) against a small advisory set made for the test (ids TEST-…, aliases in
the reserved CVE-2099 range): one finding in a pip package, one in a Debian source package, one
covered by a VEX statement, and one stale exception."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from ..needs import sarif_schema
from .conftest import NO_EVALUATE, Cli
from .test_publish import REF, registries_file, served

pytestmark = pytest.mark.integration

CRITICAL = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]
HIGH = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"}]


def osv(rid: str, alias: str, eco: str, name: str, severity: list[dict[str, str]]) -> dict[str, Any]:
    return {"schema_version": "1.6.0", "id": rid, "aliases": [alias], "summary": f"{rid}, made for the test",
            "modified": "2026-12-01T00:00:00Z", "severity": severity,
            "affected": [{"package": {"ecosystem": eco, "name": name}, "ranges": [
                {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "99"}]}]}]}  # fmt: skip


# Reviewed again within the review horizon (a year by default; further ahead is refused).
REVIEW_BY = str(date.today() + timedelta(days=180))


def statement(cve: str, purl: str, **fields: str) -> dict[str, Any]:
    return {"vulnerability": {"name": cve}, "products": [{"@id": f"pkg:oci/{REF.split(':')[0]}",
            "subcomponents": [{"@id": purl}]}], "review_by": REVIEW_BY, **fields}  # fmt: skip


def write_vex(path: Path, *statements: dict[str, Any]) -> None:
    path.write_text(json.dumps({
        "@context": "https://openvex.dev/ns/v0.2.0", "@id": "https://example.invalid/vex/xpu-fixture",
        "author": "the integration tests", "timestamp": "2026-12-01T00:00:00Z", "version": 1,
        "statements": list(statements)}, indent=2))  # fmt: skip


@pytest.fixture
def advisories(tmp_path: Path) -> Path:
    folder = tmp_path / "osv"
    folder.mkdir()
    records = [
        osv("TEST-PY-1", "CVE-2099-0001", "PyPI", "six", CRITICAL),
        osv("TEST-DEB-1", "CVE-2099-0002", "Debian:12", "bash", HIGH),  # bash's source: bash
        osv("TEST-PY-2", "CVE-2099-0003", "PyPI", "six", HIGH),
    ]
    for r in records:
        (folder / f"{r['id']}.json").write_text(json.dumps(r))
    return folder


def test_the_gate_stops_the_release_before_publish_and_a_reviewed_vex_lets_it_through(
    tested: Cli, tmp_path: Path, advisories: Path
) -> None:
    vex = tested.root / "images" / "xpu-fixture" / "vex.openvex.json"
    regs = registries_file(tmp_path / "regs.yaml", "v" + uuid.uuid4().hex[:10])
    covered = statement("CVE-2099-0003", "pkg:pypi/six", status="not_affected",
                        justification="vulnerable_code_not_in_execute_path")  # fmt: skip
    stale = statement("CVE-2099-0999", "pkg:pypi/six", status="not_affected",
                      justification="component_not_present")  # fmt: skip
    try:
        write_vex(vex, covered, stale)
        stopped = tested.run("--registries", str(regs), "release", REF, "--advisories", str(advisories),
                             "--json")  # fmt: skip

        # Nothing is published anywhere; the summary names the stage, the error every reason.
        assert stopped.returncode == 14, stopped.stderr[-3000:]
        assert set(served(tested, regs, "1.0").values()) == {None}
        failed = json.loads(stopped.stdout)["failed"]
        assert failed["stage"] == "scan"
        assert "CVE-2099-0001 in six 1.16.0" in failed["error"]
        assert "CVE-2099-0002 in bash" in failed["error"]
        assert "stale exception CVE-2099-0999 at images/xpu-fixture/vex.openvex.json:" in failed["error"]
        assert "CVE-2099-0003" not in failed["error"]  # excepted

        write_vex(vex, covered,
                  statement("CVE-2099-0001", "pkg:pypi/six@1.16.0", status="affected",
                            action_statement="six is unused at run time; upgrade when 1.17 is pinned"),
                  statement("CVE-2099-0002", "pkg:deb/debian/bash", status="not_affected",
                            justification="vulnerable_code_cannot_be_controlled_by_adversary"))  # fmt: skip
        sarif = tmp_path / "scan.sarif"
        scanned = tested.run("scan", REF, "--advisories", str(advisories), "--json", "--sarif", str(sarif))
        released = tested.run("--registries", str(regs), "release", REF, "--advisories", str(advisories))
    finally:
        vex.unlink(missing_ok=True)

    assert scanned.returncode == 0, scanned.stderr[-3000:]
    statuses = {f["id"]: f["vex"]["status"] for f in json.loads(scanned.stdout)["findings"]}
    assert statuses == {"CVE-2099-0001": "affected", "CVE-2099-0002": "not_affected",
                        "CVE-2099-0003": "not_affected"}  # fmt: skip
    assert released.returncode == 0, released.stderr[-3000:]
    record = json.loads((tested.root / "out" / "releases" / "xpu-fixture" / "1.0.json").read_text())
    assert set(served(tested, regs, "1.0").values()) == {record["digest"]}
    assert record["scan"]["status"] == "passed"
    assert {f["id"] for f in record["scan"]["findings"]} == set(statuses)
    _sarif_is_valid(sarif)


def _sarif_is_valid(path: Path) -> None:
    """SARIF 2.1.0's own schema, as Microsoft's SARIF multitool ships it (npm; ci/test.sh)."""
    schema = sarif_schema()
    tool = shutil.which("check-jsonschema") or "check-jsonschema"
    check = subprocess.run([tool, "--schemafile", str(schema), str(path)], capture_output=True, text=True,
                           check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_release_without_advisories_says_nothing_was_checked(tested: Cli, tmp_path: Path) -> None:
    regs = registries_file(tmp_path / "regs.yaml", "w" + uuid.uuid4().hex[:10])
    env = {k: "" for k in ("XPU_RELEASE_ADVISORIES",)}

    result = tested.run("--registries", str(regs), "release", REF, env=env)
    skipped = tested.run("--registries", str(regs), "release", REF, "--no-scan", "advisories mirror down",
                         env=env)  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    assert "scan: skipped" in result.stderr
    assert "no advisories configured" in result.stderr
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    record = json.loads((tested.root / "out" / "releases" / "xpu-fixture" / "1.0.json").read_text())
    why = "--no-scan: advisories mirror down"
    assert record["scan"] == {"status": "skipped", "reason": why, "findings": []}


CPU = "training-cpu-pytorch:25.03"


def test_the_training_image_is_gated_and_its_vex_travels_to_every_endpoint(
    fixture_cli: Cli, tmp_path: Path
) -> None:
    """The family's own training image: one finding in a pip package (transformers), one in a
    Debian source package (bash), one covered by a VEX statement (accelerate), and a stale
    exception (torch). The gate stops the release before publish; reviewed, it publishes, and
    its VEX is attached by digest at all four endpoints, where trivy's discovery looks."""
    from .test_attestations import ENDPOINTS, referrers_index, skopeo

    cli = fixture_cli
    folder = tmp_path / "osv"
    folder.mkdir()
    for r in (osv("TEST-CPU-PY-1", "CVE-2099-0101", "PyPI", "transformers", CRITICAL),
              osv("TEST-CPU-DEB-1", "CVE-2099-0102", "Debian:12", "bash", HIGH),
              osv("TEST-CPU-PY-2", "CVE-2099-0103", "PyPI", "accelerate", HIGH)):  # fmt: skip
        (folder / f"{r['id']}.json").write_text(json.dumps(r))
    vex = cli.root / "images" / "training-cpu-pytorch" / "vex.openvex.json"
    namespace = "g" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    repo = f"{namespace}/training-cpu-pytorch"
    product = "pkg:oci/training-cpu-pytorch"

    def about(cve: str, purl: str, **fields: str) -> dict[str, Any]:
        return {
            **statement(cve, purl, **fields),
            "products": [{"@id": product, "subcomponents": [{"@id": purl}]}],
        }

    covered = about("CVE-2099-0103", "pkg:pypi/accelerate", status="not_affected",
                    justification="vulnerable_code_not_in_execute_path")  # fmt: skip
    try:
        write_vex(vex, covered, about("CVE-2099-0999", "pkg:pypi/torch", status="not_affected",
                                      justification="component_not_present"))  # fmt: skip
        stopped = cli.run("--registries", str(regs), "release", CPU, "--advisories", str(folder), "--json",
                          *NO_EVALUATE, timeout=1800)  # fmt: skip
        nothing = served(cli, regs, "25.03", "training-cpu-pytorch")

        write_vex(vex, covered,
                  about("CVE-2099-0101", "pkg:pypi/transformers", status="affected",
                        action_statement="the affected code path is not reached by training jobs"),
                  about("CVE-2099-0102", "pkg:deb/debian/bash", status="not_affected",
                        justification="vulnerable_code_cannot_be_controlled_by_adversary"))  # fmt: skip
        released = cli.run("--registries", str(regs), "release", CPU, "--advisories", str(folder),
                           *NO_EVALUATE, timeout=1800)  # fmt: skip
        assert released.returncode == 0, released.stderr[-3000:]  # said here, not as a missing tag below
        published = served(cli, regs, "25.03", "training-cpu-pytorch")["public"] or ""
        first = {h: referrers_index(h, repo, published) for h in ENDPOINTS}
        again = cli.run("--registries", str(regs), "release", CPU, "--advisories", str(folder),
                        *NO_EVALUATE, timeout=1800)  # fmt: skip
    finally:
        vex.unlink(missing_ok=True)

    assert stopped.returncode == 14, stopped.stderr[-3000:]
    assert json.loads(stopped.stdout)["failed"]["stage"] == "scan"
    error = json.loads(stopped.stdout)["failed"]["error"]
    assert "CVE-2099-0101 in transformers 4.49.0" in error
    assert "CVE-2099-0102 in bash" in error
    assert "stale exception CVE-2099-0999 at images/training-cpu-pytorch/vex.openvex.json:" in error
    assert "CVE-2099-0103" not in error
    assert set(nothing.values()) == {None}  # nothing at any endpoint

    assert released.returncode == 0, released.stderr[-3000:]
    assert again.returncode == 0, again.stderr[-3000:]
    # A rerun reuses the VEX it attached: every endpoint's referrers are as they were.
    assert {h: referrers_index(h, repo, published) for h in ENDPOINTS} == first
    out = cli.root / "out" / "releases" / "training-cpu-pytorch"
    record = json.loads((out / "25.03.json").read_text())
    digest = record["digest"]
    assert digest == published
    vexes = {}
    for host in ENDPOINTS:
        (entry,) = [e for e in referrers_index(host, repo, digest)
                    if e["annotations"].get("io.xpu-release.attachment") == "vex"]  # fmt: skip
        assert entry["artifactType"] == "application/vnd.in-toto+json"
        vexes[host] = entry["digest"]
    assert set(vexes.values()) == {record["attachments"]["vex"]}  # the same artifact everywhere
    host = ENDPOINTS[3]
    skopeo("copy", f"docker://{host}/{repo}@{vexes[host]}", f"dir:{tmp_path / 'vex'}", host=host)
    manifest = json.loads((tmp_path / "vex" / "manifest.json").read_text())
    (layer,) = manifest["layers"]
    assert layer["annotations"] == {"in-toto.io/predicate-type": "https://openvex.dev/ns"}
    doc = json.loads((tmp_path / "vex" / layer["digest"].split(":")[1]).read_text())
    assert doc["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}
    stated = {s["vulnerability"]["name"]: s["status"] for s in doc["predicate"]["statements"]}
    assert stated == {"CVE-2099-0101": "affected", "CVE-2099-0102": "not_affected",
                      "CVE-2099-0103": "not_affected"}  # fmt: skip

    status = cli.run("--registries", str(regs), "status", CPU, "--json")
    rows = [r for r in json.loads(status.stdout)["endpoints"] if r["tag"] == "25.03"]
    assert [r["attached"] for r in rows] == [["sbom", "provenance", "vex"]] * 4
    verified = cli.run("--registries", str(regs), "verify", CPU)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for lang in ("en", "zh"):
        notes = (out / f"25.03.{lang}.md").read_text()
        line = next(x for x in notes.splitlines() if "CVE-2099-0103" in x)
        assert "accelerate 1.5.2" in line
        assert "VEX `not_affected`, vulnerable_code_not_in_execute_path" in line
