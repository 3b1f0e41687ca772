"""The release's VEX: what the gate concluded travels with the image. It states the exceptions
that applied and what the release fixed since the one it extends, as an OpenVEX document in an
in-toto statement about the image, attached where trivy's VEX discovery (``--vex oci``) looks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import KIND_ANNOTATION, Referrers, artifact_manifest, descriptor
from xpu_release.evidence.reuse import choose
from xpu_release.evidence.scan import ScanResult, scan
from xpu_release.evidence.signing import ENVELOPE_TYPE, signed_by, statement_of
from xpu_release.evidence.vex import Purl, read_vex
from xpu_release.evidence.vexdoc import ReleaseVex, release_vex, vex_statement
from xpu_release.oci.registry import OCI_MANIFEST, Manifest
from xpu_release.release.model.record import RecordedFinding

from .test_sign_only_ours import key
from .test_vulnerabilities import SBOM, TODAY, advisories, spec, vex_file

DIGEST = "sha256:" + "4" * 64
EXCEPTION = {
    "vulnerability": {"name": "CVE-2026-0001"},
    "products": [{"@id": "pkg:oci/demo-image", "subcomponents": [{"@id": "pkg:pypi/demo"}]}],
    "status": "not_affected",
    "justification": "vulnerable_code_not_in_execute_path",
    "review_by": "2027-03-31",
}


def gated(tmp_path: Path) -> ScanResult:
    statements, problems = read_vex(vex_file(tmp_path, EXCEPTION), "vex.openvex.json")
    assert problems == []
    return scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)


def document(vex: ReleaseVex, subject: str = DIGEST) -> dict[str, Any]:
    statement: dict[str, Any] = json.loads(vex_statement(spec(), vex, subject))
    return statement


def test_it_states_the_exceptions_that_applied_and_nothing_unreviewed(tmp_path: Path) -> None:
    vex = release_vex(gated(tmp_path), previous=None)

    (entry,) = vex.entries  # openssl's low finding has no exception: it is not in the VEX
    assert (entry.vulnerability, entry.status) == ("CVE-2026-0001", "not_affected")
    assert entry.aliases == ("TEST-GHSA-1", "TEST-PY-1")
    assert entry.justification == "vulnerable_code_not_in_execute_path"
    assert entry.packages == ("pkg:pypi/demo@1.0",)
    assert entry.review_by == "2027-03-31"


def test_what_the_previous_release_had_and_this_one_does_not_is_stated_fixed(tmp_path: Path) -> None:
    previous = [RecordedFinding.from_json(f) for f in [
        {"id": "CVE-2026-0099", "aliases": ["TEST-OLD-1"], "package": "oldpkg",
         "purls": ["pkg:pypi/oldpkg@0.9"], "installed": "0.9", "severity": "high"},
        {"id": "CVE-2026-0002", "package": "openssl", "installed": "3", "severity": "high"},  # still there
        {"id": "TEST-GHSA-1", "package": "demo", "installed": "1", "severity": "low"},  # an alias still there
        # a record written before findings had purls
        {"id": "CVE-2026-0100", "package": "gone", "installed": "1", "severity": "low"},
    ]]  # fmt: skip

    vex = release_vex(gated(tmp_path), previous)

    fixed = {e.vulnerability: e for e in vex.entries if e.status == "fixed"}
    assert set(fixed) == {"CVE-2026-0099", "CVE-2026-0100"}
    assert fixed["CVE-2026-0099"].packages == ("pkg:pypi/oldpkg@0.9",)
    assert fixed["CVE-2026-0099"].aliases == ("TEST-OLD-1",)
    assert (vex.excepted, vex.fixed) == (1, 2)
    old = next(
        s for s in document(vex)["predicate"]["statements"] if s["vulnerability"]["name"] == "CVE-2026-0100"
    )
    assert old["products"] == [{"@id": "pkg:oci/demo-image@sha256%3A" + "4" * 64}]  # the image alone


def test_it_is_an_in_toto_statement_about_the_image_with_an_openvex_predicate(tmp_path: Path) -> None:
    statement = document(release_vex(gated(tmp_path), previous=None))

    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://openvex.dev/ns"  # as `cosign attest --type openvex`
    assert statement["subject"] == [{"name": "demo-image", "digest": {"sha256": "4" * 64}}]
    doc = statement["predicate"]
    assert doc["@context"] == "https://openvex.dev/ns/v0.2.0"
    assert doc["timestamp"].endswith("Z")
    assert doc["version"] == 1
    assert doc["author"]
    (product,) = doc["statements"][0]["products"]
    image = Purl.parse(product["@id"])
    assert (image.type, image.name, image.version) == ("oci", "demo-image", DIGEST)
    assert [c["@id"] for c in product["subcomponents"]] == ["pkg:pypi/demo@1.0"]


def test_the_published_vex_reads_back_as_the_exception_it_carries(tmp_path: Path) -> None:
    """Its document is one the gate itself reads: the same finding, the same exception."""
    first = gated(tmp_path)
    published = tmp_path / "published.openvex.json"
    published.write_text(json.dumps(document(release_vex(first, previous=None))["predicate"]))

    statements, problems = read_vex(published, "published.openvex.json")
    again = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY, digests=frozenset({DIGEST}))
    elsewhere = scan(spec(), SBOM, advisories(tmp_path), statements, today=TODAY)

    assert problems == []
    assert again.passed
    assert not elsewhere.passed  # it is about the image of that digest, no other
    assert not again.stale
    demo = next(f for f in again.findings if f.package.name == "demo")
    assert demo.exception is not None
    assert demo.exception.status == "not_affected"


def test_the_same_gate_result_gives_the_same_bytes_and_another_image_other_bytes(tmp_path: Path) -> None:
    vex = release_vex(gated(tmp_path), previous=None)

    assert vex_statement(spec(), vex, DIGEST) == vex_statement(
        spec(), release_vex(gated(tmp_path), None), DIGEST
    )
    assert vex_statement(spec(), vex, DIGEST) != vex_statement(spec(), vex, "sha256:" + "5" * 64)


def subject() -> Manifest:
    body = b'{"schemaVersion":2}'
    return Manifest(digest="sha256:" + "6" * 64, media_type=OCI_MANIFEST, body=body)


def test_it_is_attached_where_trivy_looks_and_told_apart_from_the_provenance() -> None:
    vex = artifact_manifest(Attachment(kind="vex", payload=b"{}"), subject(), "2026-12-03T00:00:00Z")
    provenance = artifact_manifest(
        Attachment(kind="provenance", payload=b"{}"), subject(), "2026-12-03T00:00:00Z"
    )

    assert (
        json.loads(vex.body)["artifactType"]
        == json.loads(provenance.body)["artifactType"]
        == "application/vnd.in-toto+json"
    )
    assert json.loads(vex.body)["layers"][0]["annotations"] == {
        "in-toto.io/predicate-type": "https://openvex.dev/ns"
    }
    assert "annotations" not in json.loads(provenance.body)["layers"][0]  # as earlier releases attached it
    assert json.loads(vex.body)["annotations"][KIND_ANNOTATION] == "vex"
    found = Referrers(descriptors=(descriptor(vex), descriptor(provenance)), via="tag")
    assert [d.digest for d in found.ours("vex")] == [vex.digest]
    assert [d.digest for d in found.ours("provenance")] == [provenance.digest]


def test_with_a_key_the_vex_is_signed_and_a_found_one_is_reused_only_when_it_is_ours(tmp_path: Path) -> None:
    ours = Attachment(kind="vex", payload=vex_statement(spec(), release_vex(gated(tmp_path), None), DIGEST))
    release_key = key()

    signed = choose(ours, None, release_key, run_known=True).attachment
    assert signed.media_type == ENVELOPE_TYPE
    assert signed_by(signed.payload, release_key.verifier())
    assert statement_of(signed.payload) == ours.payload
    assert choose(ours, signed, release_key, run_known=True).attachment is signed  # a rerun adds nothing
    assert choose(ours, ours, None, run_known=True).attachment is ours
    other = Attachment(kind="vex", payload=ours.payload.replace(b"not_affected", b"affected"))
    replaced = choose(ours, other, None, run_known=False)
    assert replaced.attachment is ours
    assert replaced.replaced
    by_another = choose(ours, Attachment(kind="vex", payload=signed.payload, media_type=ENVELOPE_TYPE),
                        key(), run_known=True)  # fmt: skip
    assert by_another.attachment.payload != signed.payload  # never kept as found under another key
