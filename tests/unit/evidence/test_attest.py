"""What a release says about itself: its CycloneDX SBOM and its SLSA provenance, made from the
committed manifest and lock and from the image's dpkg database (a fake engine answers here)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from xpu_release.evidence.attest import Documents, image_sbom
from xpu_release.evidence.contents import parse
from xpu_release.evidence.sbom import sbom
from xpu_release.image.build import BuildRun
from xpu_release.image.lock import Lock, load_lock
from xpu_release.manifest import Repo
from xpu_release.manifest.model import canonical_name

from ..manifest.test_line_breaks import BREAKERS

ROOT = Path(__file__).resolve().parents[3]
IMAGE_ID = "sha256:" + "1" * 64
SUBJECT = "sha256:" + "2" * 64
BUILDER = "urn:test:publisher"  # who runs the command, as its State read it
VENV = "/opt/venv/lib/python3.11/site-packages"
SYSTEM = "/usr/local/lib/python3.11/dist-packages"


def image_says(
    os: tuple[str, str, str] = ("debian", "", ""),
    debs: tuple[str, ...] = ("bash\t5.2.15-2+b7\tamd64\t\t", "libc6\t2.36-9+deb12u9\tamd64\t\t"),
    python: tuple[tuple[str, str, str], ...] | None = None,
) -> str:
    """What ``contents.SCRIPT`` prints in an image: its os-release, dpkg's packages (name,
    version, arch, source, source version), and each Python distribution (folder, name, version).
    By default, training-cpu-pytorch:25.03 as its locks install it, plus the venv's own pip and
    a copy of aiohttp that ray vendors."""
    if python is None:
        repo = Repo(ROOT)
        lock = load_lock(ROOT, repo.load_ref("training-cpu-pytorch:25.03"))
        pinned = [(p.name, p.version) for x in lock.layers for p in x.packages]
        python = (*((f"{SYSTEM}/{n}-{v}.dist-info", n, v) for n, v in lock.provided),
                  *((f"{VENV}/{n}-{v}.dist-info", n, v) for n, v in pinned),
                  (f"{VENV}/pip-23.0.1.dist-info", "pip", "23.0.1"),
                  (f"{VENV}/ray/thirdparty_files/aiohttp-3.11.13.dist-info", "aiohttp", "3.11.13"),
                  )  # fmt: skip
    lines = [f"os\t{os[0]}\t{os[1]}"] + ([f"os-version\t{os[2]}"] if os[2] else [])
    lines += [f"deb\t{d}" for d in debs]
    lines += [f"py\t{where}\t{where}/METADATA\t{n}\t{v}" for where, n, v in python]
    return "\n".join(lines) + "\n"


class FakeEngine:
    """Answers the one question the SBOM asks of an image: what it has installed."""

    def __init__(self, out: str | None = None) -> None:
        out = image_says() if out is None else out
        self.out = out
        self.asked: list[tuple[str, str]] = []

    def output(self, image: str, argv: list[str], *, purpose: str) -> str:
        self.asked.append((image, purpose))
        return self.out


def documents(ref: str = "training-cpu-pytorch:25.03", engine: FakeEngine | None = None) -> Documents:
    repo = Repo(ROOT)
    spec = repo.load_ref(ref)
    lock = load_lock(ROOT, spec)
    made = image_sbom(repo, spec, lock, engine or FakeEngine(), IMAGE_ID)  # type: ignore[arg-type]
    return Documents(repo=repo, spec=spec, lock=lock, image_id=IMAGE_ID, sbom=made, builder=BUILDER)


def components(payload: bytes) -> dict[str, dict[str, Any]]:
    return {c.get("purl") or c["bom-ref"]: c for c in json.loads(payload)["components"]}


# --- the SBOM ---------------------------------------------------------------------------------


def test_the_sbom_is_cyclonedx_1_6_and_validates_against_its_schema() -> None:
    sbom = documents().make("sbom", SUBJECT)
    data = json.loads(sbom.payload)

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom.payload.decode()) is None
    assert (data["bomFormat"], data["specVersion"]) == ("CycloneDX", "1.6")
    assert data["metadata"]["component"]["name"] == "training-cpu-pytorch"
    assert {"name": "io.xpu-release:image-id", "value": IMAGE_ID} in data["metadata"]["component"][
        "properties"
    ]


def test_the_sbom_lists_every_python_distribution_with_its_wheel_sha256() -> None:
    lock = load_lock(ROOT, Repo(ROOT).load_ref("training-cpu-pytorch:25.03"))
    found = components(documents().make("sbom", SUBJECT).payload)

    for layer in lock.layers:
        for p in layer.packages:
            purl = next(k for k, c in found.items() if k.startswith("pkg:pypi/") and c["name"] == p.name)
            assert found[purl]["version"] == p.version
            assert found[purl]["hashes"] == [{"alg": "SHA-256", "content": p.sha256}]
    assert found["pkg:pypi/transformers@4.49.0"]["version"] == "4.49.0"
    assert found["pkg:pypi/accelerate@1.5.2"]["version"] == "1.5.2"


def test_the_base_provided_torch_is_listed_with_the_sha256_from_the_sdks_own_lock() -> None:
    repo = Repo(ROOT)
    sdk_lock = load_lock(ROOT, repo.load_ref("pytorch-cpu-sdk:2.13.0"))
    torch_sha = next(p.sha256 for layer in sdk_lock.layers for p in layer.packages if p.name == "torch")

    torch = components(documents().make("sbom", SUBJECT).payload)["pkg:pypi/torch@2.13.0%2Bcpu"]

    assert torch["hashes"] == [{"alg": "SHA-256", "content": torch_sha}]
    assert {"name": "io.xpu-release:provided-by", "value": "base image"} in torch["properties"]


def test_the_sbom_lists_debian_packages_read_in_a_throwaway_container_and_the_base_by_digest() -> None:
    engine = FakeEngine()
    lock = load_lock(ROOT, Repo(ROOT).load_ref("training-cpu-pytorch:25.03"))

    found = components(documents(engine=engine).make("sbom", SUBJECT).payload)

    assert engine.asked == [(IMAGE_ID, "sbom")]
    assert found["pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64"]["version"] == "5.2.15-2+b7"
    base = f"pkg:oci/pytorch-cpu-sdk@{lock.base_digest}"
    assert base in found
    assert found[base]["type"] == "container"


def test_debian_packages_carry_their_release_and_source_package_as_syft_writes_them() -> None:
    # What advisories name is the source package (openssl for libssl3), at the source's version
    # (a binNMU like bash's +b7 is not in the source version).
    debs = ("libssl3\t3.0.20-1~deb12u2\tamd64\topenssl\t3.0.20-1~deb12u2",
            "bash\t5.2.15-2+b7\tamd64\tbash\t5.2.15-2",
            "zlib1g\t1:1.2.13.dfsg-1\tamd64\tzlib\t1:1.2.13.dfsg-1")  # fmt: skip
    out = image_says(("debian", "12", "12.15"), debs)

    found = components(documents(engine=FakeEngine(out)).make("sbom", SUBJECT).payload)

    assert "pkg:deb/debian/libssl3@3.0.20-1~deb12u2?arch=amd64&distro=debian-12&upstream=openssl" in found
    bash = found["pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12"]
    assert {"name": "io.xpu-release:source-version", "value": "5.2.15-2"} in bash["properties"]
    assert "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1?arch=amd64&distro=debian-12&upstream=zlib" in found


def test_the_sbom_lists_each_artifact_with_its_url_and_sha256() -> None:
    repo = Repo(ROOT)
    spec = repo.load_ref("training-xpu-pytorch:25.03")
    # The notes give no checksums (the manifest says so, `# assumed:`): one is set here.
    pinned = tuple(replace(c, sha256="a" * 64) if c.id == "accl-p" else c for c in spec.components)
    lock = Lock(pins_sha256="0" * 64, layers=(), base="ppu-sdk/pytorch:1.4.3_hotfix@sha256:" + "b" * 64)

    payload = sbom(
        repo, replace(spec, components=pinned), lock, IMAGE_ID, parse(image_says(debs=(), python=()))
    )
    found = components(payload)

    accl, eic = found["artifact:accl-p"], found["artifact:eic"]
    assert (accl["name"], accl["version"]) == ("ACCL-P", "v1.4.3-8")
    assert accl["hashes"] == [{"alg": "SHA-256", "content": "a" * 64}]
    assert (
        accl["externalReferences"][0]["url"]
        == "https://artifacts.registry.invalid/accl-p/v1.4.3-8/accl-p.tar.gz"
    )
    assert "hashes" not in eic  # unknown: left out, never invented
    assert f"pkg:oci/pytorch@sha256:{'b' * 64}?repository_url=ppu-sdk/pytorch" in found  # the base


def test_the_same_image_gives_the_same_sbom_bytes() -> None:
    first = documents().make("sbom", SUBJECT)
    again = documents().make("sbom", "sha256:" + "3" * 64)

    assert first.payload == again.payload  # a rerun attaches nothing new
    assert json.loads(first.payload)["metadata"]["timestamp"] == "2025-03-01T00:00:00+00:00"


def test_an_image_without_dpkg_has_no_debian_packages() -> None:
    found = parse(image_says(("alpine", "3.20", ""), debs=(), python=()))

    assert found.debs == ()
    assert found.os is not None
    assert found.os.distro == "alpine-3.20"


# --- the provenance ---------------------------------------------------------------------------


def test_the_provenance_is_an_in_toto_statement_about_the_image_manifest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = BuildRun(builder="urn:test:runner", started="2026-12-01T10:00:00Z", finished="2026-12-01T10:02:00Z")
    monkeypatch.setattr("xpu_release.evidence.attest.known_build", lambda image_id: run)

    statement = json.loads(documents().make("provenance", SUBJECT).payload)
    predicate = statement["predicate"]
    deps = {d["name"]: d for d in predicate["buildDefinition"]["resolvedDependencies"]}

    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": "training-cpu-pytorch", "digest": {"sha256": "2" * 64}}]
    for name, path in (("manifest", "manifests/training-cpu-pytorch/25.03.yaml"),
                       ("lock", "images/training-cpu-pytorch/25.03/requirements.lock"),
                       ("dockerfile", "images/training-cpu-pytorch/25.03/Dockerfile")):  # fmt: skip
        assert deps[name]["uri"] == path
        assert deps[name]["digest"]["sha256"] == hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
    assert deps["base"]["uri"].startswith("pytorch-cpu-sdk:2.13.0@sha256:")
    assert len(deps["source"]["digest"]["gitCommit"]) == 40
    assert predicate["runDetails"]["builder"] == {"id": "urn:test:runner"}
    assert predicate["runDetails"]["metadata"]["startedOn"] == run.started
    assert predicate["runDetails"]["metadata"]["finishedOn"] == run.finished


def test_a_provenance_without_a_known_build_invents_no_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("xpu_release.evidence.attest.known_build", lambda image_id: None)
    monkeypatch.setenv("XPU_RELEASE_BUILDER_ID", "urn:read:by:a:stage")  # no stage reads it

    details = json.loads(documents().make("provenance", SUBJECT).payload)["predicate"]["runDetails"]

    assert "startedOn" not in details["metadata"]
    assert "finishedOn" not in details["metadata"]
    assert details["builder"] == {"id": BUILDER}  # who publishes it vouches for it


def test_no_secret_reaches_a_document(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-artifact-token-value"
    for name in ("XPU_RELEASE_PASSWORD", "XPU_RELEASE_ARTIFACT_TOKEN"):
        monkeypatch.setenv(name, secret)

    docs = documents()
    payloads = [docs.make(kind, SUBJECT).payload for kind in ("sbom", "provenance")]

    assert all(secret.encode() not in p for p in payloads)


HOSTILE = {**BREAKERS, "QUOTE": '"', "BACKSLASH": "\\", "NUL": "\x00"}


@pytest.mark.parametrize("ch", HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_builder_id_stays_one_string_in_the_provenance(
    monkeypatch: pytest.MonkeyPatch, ch: str
) -> None:
    # XPU_RELEASE_BUILDER_ID is free text from the environment that reaches a registry inside
    # the provenance: escaped as a JSON string, it can neither end the document nor add a key.
    monkeypatch.setattr("xpu_release.evidence.attest.known_build", lambda image_id: None)
    hostile = f'urn:ci{ch}"}},"predicateType":"https://evil.invalid/","x":{{"y":"{ch}'
    made = replace(documents(), builder=hostile).make("provenance", SUBJECT)

    statement = json.loads(made.payload)

    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert set(statement) == {"_type", "subject", "predicateType", "predicate"}
    assert statement["predicate"]["runDetails"]["builder"] == {"id": hostile}


# --- what a scanner finds in the image (tests/integration/test_interop.py runs trivy) ----------


def test_the_sbom_names_every_distribution_on_disk_where_it_is_not_only_what_the_lock_pins() -> None:
    found = components(documents().make("sbom", SUBJECT).payload)

    pip, aiohttp = found["pkg:pypi/pip@23.0.1"], found["pkg:pypi/aiohttp@3.11.13"]
    where = {p["name"]: p["value"] for p in aiohttp["properties"]}
    assert where == {"io.xpu-release:location": f"{VENV}/ray/thirdparty_files/aiohttp-3.11.13.dist-info"}
    assert "hashes" not in aiohttp  # vendored: no wheel of it was installed, nothing is invented
    assert "hashes" not in pip  # the venv's own pip came with the venv, not from a lock
    accelerate = found["pkg:pypi/accelerate@1.5.2"]
    assert {"name": "io.xpu-release:location", "value": f"{VENV}/accelerate-1.5.2.dist-info"} in (
        accelerate["properties"]
    )


def test_copies_of_one_distribution_in_two_places_are_two_components() -> None:
    python = ((f"{VENV}/idna-3.10.dist-info", "idna", "3.10"),
              (f"{VENV}/ray/thirdparty_files/idna-3.10.dist-info", "idna", "3.10"))  # fmt: skip
    payload = documents(engine=FakeEngine(image_says(python=python))).make("sbom", SUBJECT).payload

    idna = [c for c in json.loads(payload)["components"] if c.get("purl") == "pkg:pypi/idna@3.10"]
    assert len({c["bom-ref"] for c in idna}) == 2
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(payload.decode()) is None


def test_a_distribution_a_debian_package_installed_is_listed_once_as_that_package() -> None:
    out = image_says(python=(("/usr/lib/python3/dist-packages/six-1.16.0.egg-info", "six", "1.16.0"),))
    out += "owned\t/usr/lib/python3/dist-packages/six-1.16.0.egg-info\n"

    assert parse(out).python == ()


def test_the_operating_system_is_a_component_named_as_scanners_name_it() -> None:
    # trivy reads the Debian packages of an SBOM only beside it ('Unsupported os family="none"').
    out = image_says(("debian", "12", "12.15"))
    found = json.loads(documents(engine=FakeEngine(out)).make("sbom", SUBJECT).payload)

    (system,) = [c for c in found["components"] if c["type"] == "operating-system"]
    assert (system["name"], system["version"]) == ("debian", "12.15")
    bash = next(c for c in found["components"] if c["name"] == "bash")
    assert bash["purl"] == "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12"


@pytest.mark.parametrize(
    ("deb", "trivy"),
    [
        ("libssl3\t3.0.20-1~deb12u2\tamd64\topenssl\t3.0.20-1~deb12u2",
         {"SrcName": "openssl", "SrcVersion": "3.0.20", "SrcRelease": "1~deb12u2"}),
        ("bash\t5.2.15-2+b7\tamd64\tbash\t5.2.15-2",
         {"SrcName": "bash", "SrcVersion": "5.2.15", "SrcRelease": "2"}),
        ("zlib1g\t1:1.2.13.dfsg-1\tamd64\tzlib\t1:1.2.13.dfsg-1",
         {"SrcName": "zlib", "SrcVersion": "1.2.13.dfsg", "SrcRelease": "1", "SrcEpoch": "1"}),
        ("adduser\t3.134\tall\t\t", {"SrcName": "adduser", "SrcVersion": "3.134"}),
    ],
)  # fmt: skip
def test_a_debian_package_names_its_source_as_trivy_reads_it(deb: str, trivy: dict[str, str]) -> None:
    # Without these trivy takes the binary for its own source: a glibc advisory would never
    # match libc6 in `trivy sbom` of our SBOM.
    out = image_says(("debian", "12", "12.15"), (deb,))
    found = json.loads(documents(engine=FakeEngine(out)).make("sbom", SUBJECT).payload)

    (pkg,) = [c for c in found["components"] if c.get("purl", "").startswith("pkg:deb/")]
    said = {p["name"].removeprefix("aquasecurity:trivy:"): p["value"]
            for p in pkg.get("properties", ()) if p["name"].startswith("aquasecurity:trivy:")}  # fmt: skip
    assert said == trivy


def test_an_image_that_cannot_be_searched_is_described_by_its_locks() -> None:
    lock = load_lock(ROOT, Repo(ROOT).load_ref("training-cpu-pytorch:25.03"))
    out = image_says(python=()).replace("py\t", "") + "python-unknown\n"

    found = components(documents(engine=FakeEngine(out)).make("sbom", SUBJECT).payload)

    pinned = {f"pkg:pypi/{canonical_name(p.name)}" for x in lock.layers for p in x.packages}
    assert pinned <= {k.split("@")[0] for k in found}
    assert "pkg:pypi/pip@23.0.1" not in found
