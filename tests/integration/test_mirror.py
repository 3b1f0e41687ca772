"""``mirror`` on the real stack: a signed release of the fixture image copied, with every
referrer and cosign's ``.att`` tag, into an OCI layout directory (which skopeo reads), and
from it into a new namespace at all four endpoints (the air-gapped way back), where
``verify --key`` passes against the original release's record: digests never change."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from .conftest import Cli
from .test_attestations import ENDPOINTS, _keypair, referrers_index
from .test_publish import REF, endpoint_client, publish, registries_file

pytestmark = pytest.mark.integration


def test_a_release_travels_through_a_layout_into_every_region_and_verifies_there(
    tested: Cli, tmp_path: Path
) -> None:
    source_ns, mirror_ns = "m" + uuid.uuid4().hex[:10], "n" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", source_ns)
    mirrored = registries_file(tmp_path / "mirrored.yaml", mirror_ns)
    private, public, _ = _keypair(tmp_path / "key")
    assert publish(tested, regs, "--signing-key", str(private)).returncode == 0
    record = json.loads(regs.with_suffix(".record.json").read_text())
    digest = record["digest"]
    usb = tmp_path / "usb"

    out = tested.run("--registries", str(regs), "mirror", REF, "--to", f"oci:{usb}", "--json")
    inspect = subprocess.run(
        ["skopeo", "inspect", f"oci:{usb}:1.0"], capture_output=True, text=True, check=False
    )
    copied = subprocess.run(["skopeo", "copy", f"oci:{usb}:1.0", f"dir:{tmp_path / 'copy'}"],
                            capture_output=True, text=True, check=False)  # fmt: skip

    def bring_back(host: str) -> subprocess.CompletedProcess[str]:
        target = f"{host}/{mirror_ns}/xpu-fixture"
        return tested.run("--registries", str(regs), "mirror", REF, "--from", f"oci:{usb}", "--to", target)

    back = [bring_back(host) for host in ENDPOINTS]
    again = tested.run("--registries", str(regs), "mirror", REF, "--from", f"oci:{usb}",
                       "--to", f"{ENDPOINTS[0]}/{mirror_ns}/xpu-fixture", "--json")  # fmt: skip
    verified = tested.run("--registries", str(mirrored), "verify", REF, "--key", str(public),
                          "--record", str(regs.with_suffix(".record.json")))  # fmt: skip

    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["digest"] == digest
    assert report["att"] is True
    assert len(report["referrers"]) == 3  # the SBOM, the provenance, its cosign bundle
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["Digest"] == digest
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{usb}:1.0"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    notes = json.loads(raw)["annotations"]  # the standard annotations, as published (#22)
    assert notes["org.opencontainers.image.version"] == "1.0"
    assert notes["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z"  # the fixture's epoch
    assert notes["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert copied.returncode == 0, copied.stderr
    assert [r.returncode for r in back] == [0, 0, 0, 0], [r.stderr for r in back]
    assert json.loads(again.stdout)["blobs_copied"] == 0  # resumable: everything was there
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "the provenance is signed by" in verified.stdout
    for host in ENDPOINTS:  # the same referrers as the release's, by digest
        assert sorted(
            e["digest"] for e in referrers_index(host, f"{mirror_ns}/xpu-fixture", digest)
        ) == sorted(record["attachments"].values())


def test_a_target_that_holds_another_image_at_the_version_is_refused(tested: Cli, tmp_path: Path) -> None:
    from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest

    namespace = "o" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0
    client, _ = endpoint_client(tested, regs)
    empty = {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha256_digest(b"{}"), "size": 2}
    other_body = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": empty, "layers": []}
    ).encode()
    client.upload_blob(f"{namespace}/taken", sha256_digest(b"{}"), _file(tmp_path, b"{}"))
    other = Manifest(digest=sha256_digest(other_body), media_type=OCI_MANIFEST, body=other_body)
    client.put_manifest(f"{namespace}/taken", "1.0", other)

    refused = tested.run(
        "--registries", str(regs), "mirror", REF, "--to", f"{ENDPOINTS[0]}/{namespace}/taken"
    )
    bad = tested.run("--registries", str(regs), "mirror", REF, "--to", "https://example.invalid/x")

    assert refused.returncode == 9, refused.stderr
    assert other.digest in refused.stderr
    assert client.head_manifest(f"{namespace}/taken", "1.0") == other.digest  # left as it was
    assert bad.returncode == 2, bad.stderr
    assert "HOST/REPOSITORY" in bad.stderr
    assert "Traceback" not in refused.stderr + bad.stderr


def _file(folder: Path, data: bytes) -> Path:
    path = folder / "blob"
    path.write_bytes(data)
    return path
