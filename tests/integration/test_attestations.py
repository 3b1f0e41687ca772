"""Every published image carries its SBOM and its provenance, attached by digest at every
endpoint of the local stack, as an outside client (skopeo) finds them: through the referrers
tag schema (distribution 2.8 has no referrers API), equal everywhere, and never duplicated."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import NO_EVALUATE, Cli, Family
from .test_publish import REF as FIXTURE_REF
from .test_publish import publish, registries_file, skopeo_digest, stored_blob

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch:25.03"
ENDPOINTS = ("127.0.0.1:15001", "127.0.0.1:15002", "127.0.0.1:15003", "127.0.0.1:15004")
SBOM_TYPE = "application/vnd.cyclonedx+json"
PROVENANCE_TYPE = "application/vnd.in-toto+json"


def skopeo(*args: str, host: str) -> subprocess.CompletedProcess[str]:
    """skopeo as a user has it: the docker config's credentials, the stack's CA for the public
    registry (TLS), plain HTTP for the VPC regions."""
    tls = (
        ["--cert-dir", os.environ["XPU_STACK_CERT_DIR"]]
        if host.endswith(":15001")
        else ["--tls-verify=false"]
    )
    cmd, rest = args[0], args[1:]
    if cmd == "copy":
        tls = [flag.replace("--", "--src-", 1) for flag in tls]
    auth = ["--authfile", f"{os.environ['DOCKER_CONFIG']}/config.json"]
    return subprocess.run(["skopeo", cmd, *auth, *tls, *rest], capture_output=True, text=True, check=True)


def referrers_index(host: str, repo: str, digest: str) -> list[dict[str, Any]]:
    raw = skopeo("inspect", "--raw", f"docker://{host}/{repo}:{digest.replace(':', '-')}", host=host).stdout
    index = json.loads(raw)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    return index["manifests"]  # type: ignore[no-any-return]


def listed(host: str, repo: str, digest: str, artifact_type: str) -> str:
    """The digest of the one attachment of ``artifact_type`` the image's referrers list."""
    (entry,) = [e for e in referrers_index(host, repo, digest) if e["artifactType"] == artifact_type]
    return str(entry["digest"])


def document(host: str, repo: str, manifest_digest: str, dest: Path) -> Any:
    """The one layer of an attachment, copied out by skopeo and parsed."""
    skopeo("copy", f"docker://{host}/{repo}@{manifest_digest}", f"dir:{dest}", host=host)
    manifest = json.loads((dest / "manifest.json").read_text())
    (layer,) = manifest["layers"]
    return json.loads((dest / layer["digest"].split(":")[1]).read_text())


@pytest.fixture(scope="module")
def released(family: Family) -> tuple[Cli, Path, str, str]:
    """The CPU family released, parents first, to a namespace of its own."""
    return family.cli, family.regs, f"{family.namespace}/training-cpu-pytorch", str(family.record["digest"])


def test_every_endpoint_lists_the_sbom_and_the_provenance_with_equal_digests(
    released: tuple[Cli, Path, str, str],
) -> None:
    _cli, _regs, repo, digest = released

    found = {host: referrers_index(host, repo, digest) for host in ENDPOINTS}

    for host, entries in found.items():
        assert sorted(e["artifactType"] for e in entries) == [SBOM_TYPE, PROVENANCE_TYPE], host
    by_type = {host: {e["artifactType"]: e["digest"] for e in entries} for host, entries in found.items()}
    assert len({json.dumps(v, sort_keys=True) for v in by_type.values()}) == 1  # equal everywhere


def test_the_sbom_names_the_pinned_python_stack_and_debian_packages(
    released: tuple[Cli, Path, str, str], tmp_path: Path
) -> None:
    _cli, _regs, repo, digest = released
    host = ENDPOINTS[3]  # a VPC region: what its users pull
    sbom = document(host, repo, listed(host, repo, digest, SBOM_TYPE), tmp_path / "sbom")
    purls = {c.get("purl", "") for c in sbom["components"]}

    assert (sbom["bomFormat"], sbom["specVersion"]) == ("CycloneDX", "1.6")
    assert {
        "pkg:pypi/torch@2.13.0%2Bcpu",
        "pkg:pypi/transformers@4.49.0",
        "pkg:pypi/accelerate@1.5.2",
    } <= purls
    assert any(p.startswith("pkg:deb/debian/") for p in purls)
    assert any(p.startswith("pkg:oci/pytorch-cpu-sdk@sha256:") for p in purls)


def test_the_provenance_is_about_the_served_image(
    released: tuple[Cli, Path, str, str], tmp_path: Path
) -> None:
    cli, _regs, repo, digest = released
    host = ENDPOINTS[0]
    statement = document(host, repo, listed(host, repo, digest, PROVENANCE_TYPE), tmp_path / "provenance")
    deps = {d["name"]: d for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
    lock = (cli.root / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock").read_text()

    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}
    assert f"# base: {deps['base']['uri']}" in lock


def test_a_rerun_adds_no_duplicate_attachment_and_verify_checks_them(
    released: tuple[Cli, Path, str, str],
) -> None:
    cli, regs, repo, digest = released
    before = {host: referrers_index(host, repo, digest) for host in ENDPOINTS}

    again = cli.run("--registries", str(regs), "release", CPU, "--json", *NO_EVALUATE, timeout=1800)
    deep = cli.run("--registries", str(regs), "verify", CPU, "--deep", "--json", timeout=900)
    status = cli.run("--registries", str(regs), "status", CPU, "--json")

    assert again.returncode == 0, again.stderr
    assert {host: referrers_index(host, repo, digest) for host in ENDPOINTS} == before
    assert deep.returncode == 0, deep.stdout + deep.stderr
    assert json.loads(deep.stdout)["blobs_checked"] > 0
    rows = [r for r in json.loads(status.stdout)["endpoints"] if r["tag"] == "25.03"]
    assert [r["attached"] for r in rows] == [["sbom", "provenance"]] * 4


def test_verify_deep_names_a_region_whose_sbom_blob_is_damaged(
    released: tuple[Cli, Path, str, str], tmp_path: Path
) -> None:
    cli, regs, repo, digest = released
    host = ENDPOINTS[3]
    sbom = listed(host, repo, digest, SBOM_TYPE)
    raw = skopeo("inspect", "--raw", f"docker://{host}/{repo}@{sbom}", host=host).stdout
    blob = json.loads(raw)["layers"][0]["digest"]
    stored = stored_blob("vpc-cn-shanghai", blob)
    original = stored.read_bytes()
    stored.write_bytes(original.replace(b"CycloneDX", b"CycloneDY", 1))
    try:
        deep = cli.run("--registries", str(regs), "verify", CPU, "--deep")
    finally:
        stored.write_bytes(original)

    assert deep.returncode == 7, deep.stderr
    assert "vpc/cn-shanghai" in deep.stderr
    assert blob in deep.stderr


def _keypair(folder: Path) -> tuple[Path, Path, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    folder.mkdir(parents=True, exist_ok=True)
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    (folder / "key.pem").write_bytes(pem)
    (folder / "key.pub").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # fmt: skip
    return folder / "key.pem", folder / "key.pub", pem


def test_a_signed_provenance_verifies_with_its_public_key_only(tested: Cli, tmp_path: Path) -> None:
    regs = registries_file(tmp_path / "regs.yaml", "k" + uuid.uuid4().hex[:10])
    record = str(regs.with_suffix(".record.json"))
    private, public, pem = _keypair(tmp_path / "mine")
    _, other, _ = _keypair(tmp_path / "other")

    published = publish(tested, regs, "--signing-key", str(private))
    mine = tested.run(
        "--registries", str(regs), "verify", FIXTURE_REF, "--key", str(public), "--record", record
    )
    theirs = tested.run(
        "--registries", str(regs), "verify", FIXTURE_REF, "--key", str(other), "--record", record
    )

    assert published.returncode == 0, published.stderr
    assert mine.returncode == 0, mine.stderr
    assert "the provenance is signed by sha256:" in mine.stdout
    assert theirs.returncode == 7
    assert theirs.stderr.count("does not verify") == 4  # named at every endpoint
    key_text = pem.decode().splitlines()[1]
    assert all(
        key_text not in out for out in (published.stdout, published.stderr, mine.stderr, theirs.stderr)
    )


BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def test_a_signed_provenance_is_where_both_cosign_layouts_look_at_every_endpoint(
    tested: Cli, tmp_path: Path
) -> None:
    """cosign 2.x reads the ``.att`` tag; cosign >= 2.5's new bundle format lists referrers for a
    Sigstore bundle. Both hold the very envelope attached as the provenance, at every endpoint,
    read back with skopeo; the bundle parses with Sigstore's own model; a rerun adds nothing;
    a key that is not the release's fails each layout at each endpoint."""
    from sigstore_protobuf_specs.dev.sigstore.bundle.v1 import Bundle

    namespace = "c" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    private, public, _ = _keypair(tmp_path / "mine")
    _, other, _ = _keypair(tmp_path / "other")
    assert publish(tested, regs, "--signing-key", str(private)).returncode == 0
    repo = f"{namespace}/xpu-fixture"
    digest = skopeo_digest(f"127.0.0.1:15001/{repo}:1.0")

    def layouts() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for host in ENDPOINTS:
            entries = referrers_index(host, repo, digest)
            att = skopeo(
                "inspect", "--raw", f"docker://{host}/{repo}:{digest.replace(':', '-')}.att", host=host
            )
            out[host] = (entries, json.loads(att.stdout))
        return out

    first = layouts()
    rerun = publish(tested, regs, "--signing-key", str(private))
    mine = tested.run("--registries", str(regs), "verify", FIXTURE_REF, "--key", str(public))
    theirs = tested.run("--registries", str(regs), "verify", FIXTURE_REF, "--key", str(other))

    assert rerun.returncode == 0, rerun.stderr
    assert layouts() == first  # nothing new anywhere
    assert len({json.dumps(v, sort_keys=True) for v in first.values()}) == 1  # the same everywhere
    entries, att = first[ENDPOINTS[3]]
    (prov,) = [e for e in entries if e["annotations"]["io.xpu-release.attachment"] == "provenance"]
    (bundled,) = [e for e in entries if e["artifactType"] == BUNDLE_TYPE]
    assert bundled["annotations"]["dev.sigstore.bundle.predicateType"] == "https://slsa.dev/provenance/v1"
    envelope = document(ENDPOINTS[3], repo, prov["digest"], tmp_path / "prov")
    bundle_doc = document(ENDPOINTS[3], repo, bundled["digest"], tmp_path / "bundle")
    (layer,) = att["layers"]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    assert layer["annotations"] == {"predicateType": "https://slsa.dev/provenance/v1",
                                    "dev.cosignproject.cosign/signature": ""}  # fmt: skip
    att_ref = f"docker://{ENDPOINTS[3]}/{repo}:{digest.replace(':', '-')}.att"
    skopeo("copy", att_ref, f"dir:{tmp_path / 'att'}", host=ENDPOINTS[3])
    assert json.loads((tmp_path / "att" / layer["digest"].split(":")[1]).read_text()) == envelope
    parsed = Bundle.from_dict(bundle_doc)
    assert parsed.dsse_envelope.signatures[0].sig == base64.b64decode(envelope["signatures"][0]["sig"])
    assert parsed.dsse_envelope.payload == base64.b64decode(envelope["payload"])
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert theirs.returncode == 7
    assert theirs.stderr.count("does not verify") == 4  # the provenance, at each endpoint
    assert theirs.stderr.count("not this key's") == 4  # its bundle, at each endpoint


def test_a_region_that_refuses_the_attachments_gets_no_tag_and_neither_does_any_other(
    tested: Cli, tmp_path: Path
) -> None:
    from .faultproxy import FaultProxy
    from .test_publish import REGIONS, record_of, served

    proxy = FaultProxy(REGIONS["cn-shanghai"])
    proxy.faults.refuse_put = "/manifests/sha256-"  # the referrers index of the image
    try:
        regs = registries_file(tmp_path / "regs.yaml", "r" + uuid.uuid4().hex[:10],
                               {**REGIONS, "cn-shanghai": proxy.host})  # fmt: skip
        result = publish(tested, regs)
        version, latest = served(tested, regs, "1.0"), served(tested, regs, "latest")
    finally:
        proxy.close()

    assert result.returncode == 7, result.stderr
    shanghai = next(e for e in record_of(regs)["endpoints"] if e["endpoint"] == "vpc/cn-shanghai")  # type: ignore[attr-defined]
    assert shanghai["status"] == "failed"
    assert "400" in shanghai["error"]
    assert set(version.values()) == {None}  # no version tag anywhere: the release is not half-visible
    assert set(latest.values()) == {None}


def test_publish_never_signs_a_forged_provenance_or_reuses_a_forged_sbom(tested: Cli, tmp_path: Path) -> None:
    """An attacker with write access to the public endpoint replaces both documents there: a
    provenance whose statement names another builder, signed by another key, and an edited SBOM.
    A rerun with the release key attaches this run's own documents everywhere; the key's
    signature never covers the forged statement (read back with skopeo, checked with
    cryptography directly)."""
    import base64

    from cryptography.hazmat.primitives import serialization

    from xpu_release.evidence.attachment import Attachment
    from xpu_release.evidence.referrers import attach
    from xpu_release.evidence.signing import ENVELOPE_TYPE, envelope, load_signer, pae
    from xpu_release.oci.registry import Manifest

    from .test_publish import endpoint_client

    namespace = "f" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    private, public, _ = _keypair(tmp_path / "mine")
    attacker_key, _, _ = _keypair(tmp_path / "attacker")
    assert publish(tested, regs, "--signing-key", str(private)).returncode == 0
    repo = f"{namespace}/xpu-fixture"
    digest = skopeo_digest(f"127.0.0.1:15001/{repo}:1.0")

    # The attack, at the public endpoint only.
    genuine = document(
        ENDPOINTS[0], repo, listed(ENDPOINTS[0], repo, digest, PROVENANCE_TYPE), tmp_path / "g"
    )
    statement = json.loads(base64.b64decode(genuine["payload"]))
    statement["predicate"]["runDetails"]["builder"]["id"] = "urn:attacker"
    forged_statement = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    attacker = load_signer(str(attacker_key))
    assert attacker is not None
    sbom = document(ENDPOINTS[0], repo, listed(ENDPOINTS[0], repo, digest, SBOM_TYPE), tmp_path / "s")
    sbom["components"].append({"type": "library", "name": "backdoor", "version": "1", "bom-ref": "evil"})
    client, client_repo = endpoint_client(tested, regs)
    subject = client.get_manifest(client_repo, digest)
    assert isinstance(subject, Manifest)
    attach(client, client_repo, subject, [
        Attachment(kind="provenance", payload=envelope(forged_statement, attacker), media_type=ENVELOPE_TYPE),
        Attachment(kind="sbom", payload=json.dumps(sbom).encode()),
    ], created="2026-01-01T00:00:00Z", spool=tmp_path)  # fmt: skip

    again = publish(tested, regs, "--signing-key", str(private))
    check = tested.run("--registries", str(regs), "verify", FIXTURE_REF, "--key", str(public),
                       "--record", str(regs.with_suffix(".record.json")))  # fmt: skip

    assert again.returncode == 0, again.stderr
    assert "is not reused" in again.stdout + again.stderr
    assert check.returncode == 0, check.stderr
    ours = serialization.load_pem_public_key(public.read_bytes())
    for n, host in enumerate(ENDPOINTS):
        entries = referrers_index(host, repo, digest)
        assert sorted(e["artifactType"] for e in entries) == [SBOM_TYPE, BUNDLE_TYPE, PROVENANCE_TYPE], host
        env = document(host, repo, listed(host, repo, digest, PROVENANCE_TYPE), tmp_path / f"p{n}")
        # The attacker's `attach` also put its envelope in cosign's .att tag: ours replaced it,
        # and the bundle wraps ours.
        att = json.loads(skopeo("inspect", "--raw", f"docker://{host}/{repo}:{digest.replace(':', '-')}.att",
                                host=host).stdout)  # fmt: skip
        att_dir = tmp_path / f"att{n}"
        skopeo("copy", f"docker://{host}/{repo}:{digest.replace(':', '-')}.att", f"dir:{att_dir}", host=host)
        assert [json.loads((att_dir / x["digest"].split(":")[1]).read_text()) for x in att["layers"]] == [env]
        bundled = document(host, repo, listed(host, repo, digest, BUNDLE_TYPE), tmp_path / f"b{n}")
        assert bundled["dsseEnvelope"]["signatures"][0]["sig"] == env["signatures"][0]["sig"], host
        payload = base64.b64decode(env["payload"])
        for sig in env["signatures"]:
            ours.verify(base64.b64decode(sig["sig"]), pae(env["payloadType"], payload))  # type: ignore[union-attr,call-arg]
        assert json.loads(payload)["predicate"]["runDetails"]["builder"]["id"] != "urn:attacker", host
        assert payload != forged_statement
        found_sbom = document(host, repo, listed(host, repo, digest, SBOM_TYPE), tmp_path / f"s{n}")
        assert "backdoor" not in {c["name"] for c in found_sbom["components"]}, host
