"""SPDX 2.3 from the same facts as the CycloneDX SBOM, valid by spdx-tools' own validator
(`pyspdxtools -i FILE`: exit 0 when valid, 1 naming the problem)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xpu_release.evidence.spdx import to_spdx

from .test_attest import SUBJECT, FakeEngine, documents, image_says

DPKG = image_says(("debian", "12", "12.15"), ("libssl3\t3.0.20-1~deb12u2\tamd64\topenssl\t3.0.20-1~deb12u2",
                                             "bash\t5.2.15-2+b7\tamd64\tbash\t5.2.15-2"))  # fmt: skip


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("pyspdxtools") or str(Path(sys.executable).parent / "pyspdxtools")
    return subprocess.run([tool, "-i", str(path)], capture_output=True, text=True, check=False)


@pytest.fixture
def spdx(tmp_path: Path) -> tuple[bytes, bytes]:
    cyclonedx = documents(engine=FakeEngine(DPKG)).make("sbom", SUBJECT).payload
    return cyclonedx, to_spdx(cyclonedx, tool_version="0.1.0")


def test_the_spdx_document_passes_spdx_tools_validator(spdx: tuple[bytes, bytes], tmp_path: Path) -> None:
    path = tmp_path / "sbom.spdx.json"
    path.write_bytes(spdx[1])

    result = validate(path)

    assert result.returncode == 0, result.stdout + result.stderr


def test_the_validator_can_fail(spdx: tuple[bytes, bytes], tmp_path: Path) -> None:
    doc = json.loads(spdx[1])
    del doc["dataLicense"]
    doc["packages"][1]["SPDXID"] = "not an spdx id"
    path = tmp_path / "broken.spdx.json"
    path.write_text(json.dumps(doc))

    assert validate(path).returncode != 0


def test_every_cyclonedx_component_is_a_package_the_image_contains(spdx: tuple[bytes, bytes]) -> None:
    cyclonedx, spdx_bytes = spdx
    cdx, doc = json.loads(cyclonedx), json.loads(spdx_bytes)
    purls = {r["referenceLocator"] for p in doc["packages"] for r in p.get("externalRefs", ())}

    assert {c["purl"] for c in cdx["components"] if "purl" in c} <= purls
    assert len(doc["packages"]) == len(cdx["components"]) + 1  # and the image itself
    contains = [r for r in doc["relationships"] if r["relationshipType"] == "CONTAINS"]
    assert len(contains) == len(cdx["components"])
    assert {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
            "relatedSpdxElement": "SPDXRef-Image"} in doc["relationships"]  # fmt: skip
    torch = next(p for p in doc["packages"] if p["name"] == "torch")
    assert torch["checksums"][0]["algorithm"] == "SHA256"


def test_the_same_sbom_gives_the_same_spdx_bytes(spdx: tuple[bytes, bytes]) -> None:
    assert to_spdx(spdx[0], tool_version="0.1.0") == spdx[1]


@pytest.mark.parametrize(
    ("url", "where"),
    [("https://artifacts.example.com/accl/accl-p-1.3.7.tar.gz", "downloadLocation"),
     ("http://127.0.0.1:8080/blob.tar.gz", "sourceInfo"), ("https://artifacts/blob.tar.gz", "sourceInfo")],
)  # fmt: skip
def test_an_artifact_url_that_spdx_cannot_take_as_download_location_is_kept_beside_it(
    tmp_path: Path, url: str, where: str
) -> None:
    cdx = {"metadata": {"component": {"name": "demo", "version": "1.0"}, "timestamp": "2025-03-31T00:00:00Z"},
           "components": [{"name": "Blob", "version": "1.0", "externalReferences": [
               {"type": "distribution", "url": url}]}]}  # fmt: skip
    path = tmp_path / "doc.spdx.json"
    path.write_bytes(to_spdx(json.dumps(cdx).encode(), tool_version="0.1.0"))

    blob = next(p for p in json.loads(path.read_text())["packages"] if p["name"] == "Blob")

    assert url in str(blob[where])
    assert validate(path).returncode == 0


def test_a_manifest_that_asks_for_spdx_gets_it_attached_beside_cyclonedx(tmp_path: Path) -> None:
    """``sbom_formats: [cyclonedx, spdx]``: the SPDX document is made from the very CycloneDX SBOM
    attached beside it, validates, and is attached under SPDX's media type; by default only
    CycloneDX is attached."""
    from dataclasses import replace

    from xpu_release.evidence.referrers import artifact_manifest
    from xpu_release.oci.registry import OCI_MANIFEST, Manifest

    plain = documents(engine=FakeEngine(DPKG))
    asked = replace(plain, spec=replace(plain.spec, sbom_formats=("cyclonedx", "spdx")))

    attached = asked.make("spdx", SUBJECT)
    path = tmp_path / "attached.spdx.json"
    path.write_bytes(attached.payload)
    subject = Manifest(digest=SUBJECT, media_type=OCI_MANIFEST, body=b"{}")

    assert "spdx" not in plain.kinds
    assert asked.kinds == ("sbom", "provenance", "spdx")
    assert attached.payload == to_spdx(asked.make("sbom", SUBJECT).payload, tool_version="0.1.0")
    assert validate(path).returncode == 0
    assert (
        json.loads(artifact_manifest(attached, subject, "2026-12-03T00:00:00Z").body)["artifactType"]
        == "application/spdx+json"
    )


def test_the_manifest_schema_takes_only_known_sbom_formats(tmp_path: Path) -> None:
    from xpu_release.manifest import Repo

    from ..helpers import run

    root = tmp_path / "repo"
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(Path(__file__).resolve().parents[3] / name, root / name)
    shutil.copy(Path(__file__).resolve().parents[3] / "registries.yaml", root / "registries.yaml")
    path = root / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    text = path.read_text()
    path.write_text(text + "sbom_formats: [cyclonedx, spdx]\n")
    assert Repo(root).load_ref("training-cpu-pytorch:25.03").sbom_formats == ("cyclonedx", "spdx")
    path.write_text(text + "sbom_formats: [spdx-tag-value]\n")

    result = run(root, "validate", "training-cpu-pytorch:25.03")

    assert result.exit_code == 2
    assert "sbom_formats" in result.output
