"""A support date at publish, on a whole publish with a fake engine and three fake registries
(``fake_release``): the lifecycle document is attached by digest at every endpoint with the
others; when the date moves, a rerun of ``publish`` attaches the new one and touches neither the
image nor its tags (the provenance of the same build is kept); ``status`` and ``verify`` know
it. And ``publish`` never moves a floating tag onto a withdrawn release."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.evidence.attachment import END_OF_LIFE_ANNOTATION
from xpu_release.evidence.referrers import list_referrers
from xpu_release.image.engine import Engine
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, RegistryClient, sha256_digest

from ..conftest import forget_the_stack
from ..evidence.test_signing import write_key
from ..helpers import run
from ..oci.test_registry_client import FAST
from .fake_release import REF, World, copy_of_repository, world
from .line import LOGIN, PASSWORD

MANIFEST = "manifests/pytorch-cpu-sdk/2.13.0.yaml"


@pytest.fixture
def released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with world(copy_of_repository(tmp_path / "repo"), tmp_path) as w:
        forget_the_stack(monkeypatch)
        monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: w.engine))
        monkeypatch.setenv("XPU_RELEASE_CACHE", str(tmp_path / "cache"))
        yield w


def cli(w: World, *args: str) -> tuple[int, str, str]:
    result = run(w.root, "--registries", str(w.override), *args, *LOGIN, input=PASSWORD)
    return result.exit_code, result.stdout, result.stderr


def set_support(w: World, until: str) -> None:
    path = w.root / MANIFEST
    text = path.read_text().split("\nsupport:", 1)[0].rstrip("\n")
    path.write_text(f"{text}\nsupport:\n  until: {until}\n")


def at_every_endpoint(w: World, digest: str) -> dict[str, dict[str, str]]:
    """Each endpoint's referrers of ``digest``: kind → the end-of-life annotation (or digest)."""
    out = {}
    for ep in load_registries(w.root, str(w.override)).publish_endpoints():
        client = RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)
        found = list_referrers(client, ep.repository("pytorch-cpu-sdk"), digest)
        out[ep.name] = {
            k: (d[0].annotations.get(END_OF_LIFE_ANNOTATION) or d[0].digest)
            for k in ("sbom", "provenance", "lifecycle")
            if (d := found.ours(k))
        }
    return out


def served(w: World, tag: str) -> set[str | None]:
    out = set()
    for ep in load_registries(w.root, str(w.override)).publish_endpoints():
        client = RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)
        out.add(client.head_manifest(ep.repository("pytorch-cpu-sdk"), tag))
    return out


def test_a_moved_support_date_is_attached_by_a_rerun_and_touches_nothing_else(released: World) -> None:
    w = released
    set_support(w, "2027-06-30")
    code, out, err = cli(w, "publish", REF, "--json")
    assert code == 0, err
    first = json.loads(out)
    before = at_every_endpoint(w, first["digest"])

    set_support(w, "2028-06-30")
    code, out, err = cli(w, "publish", REF, "--json")
    assert code == 0, err
    second = json.loads(out)
    after = at_every_endpoint(w, first["digest"])
    status = json.loads(cli(w, "status", REF, "--json")[1])
    verified = cli(w, "verify", REF)

    assert second["digest"] == first["digest"]  # the same image
    assert served(w, "2.13.0") == served(w, "latest") == {first["digest"]}
    assert all(e["status"] == "unchanged" for e in second["endpoints"])  # no tag was written
    assert {d["lifecycle"] for d in before.values()} == {"2027-06-30T00:00:00Z"}
    assert {d["lifecycle"] for d in after.values()} == {"2028-06-30T00:00:00Z"}  # the old one dropped
    assert {d["provenance"] for d in after.values()} == {d["provenance"] for d in before.values()}
    assert second["attachments"]["lifecycle"] != first["attachments"]["lifecycle"]
    assert second["attachments"]["provenance"] == first["attachments"]["provenance"]  # the same build
    assert status["support"]["until"] == "2028-06-30"
    assert [r["documents"].get("lifecycle") for r in status["endpoints"] if r["tag"] == "2.13.0"] == [
        "unsigned"
    ] * 3
    assert verified[0] == 0, verified[2]


def put_another_image_at_latest(w: World, tmp_path: Path) -> str:
    config = b'{"architecture":"amd64","os":"linux","other":true}'
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [], "config": {
        "mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256_digest(config),
        "size": len(config)}}).encode()  # fmt: skip
    other = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    (tmp_path / "config").write_bytes(config)
    for ep in load_registries(w.root, str(w.override)).publish_endpoints():
        client = RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)
        repo = ep.repository("pytorch-cpu-sdk")
        client.upload_blob(repo, sha256_digest(config), tmp_path / "config")
        client.put_manifest(repo, "latest", other)
    return other.digest


def test_publish_never_moves_a_floating_tag_onto_a_withdrawn_release(released: World, tmp_path: Path) -> None:
    w = released
    code, out, err = cli(w, "publish", REF, "--json")
    assert code == 0, err
    digest = json.loads(out)["digest"]
    withdrawn = cli(w, "withdraw", REF, "--reason", "bad")
    assert withdrawn[0] == 0, withdrawn[2]
    other = put_another_image_at_latest(w, tmp_path)  # as if another release took latest since

    code, out, err = cli(w, "publish", REF, "--json")
    record = json.loads(out)
    latest_after_publish = served(w, "latest")
    reinstated = cli(w, "reinstate", REF)

    assert code == 0, err
    assert record["floating_moved"] == []
    assert latest_after_publish == {other}  # not moved back onto the withdrawn release
    assert record["withdrawn"]["reason"] == "bad"
    assert "is withdrawn" in err
    assert reinstated[0] == 0, reinstated[2]
    assert served(w, "latest") == {digest}  # reinstate brings it back: the newest of the line


def pem_pair(folder: Path, name: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    (folder / name).mkdir()
    return write_key(folder / name, ed25519.Ed25519PrivateKey.generate())


def test_with_a_key_the_lifecycle_document_is_signed_like_the_provenance(
    released: World, tmp_path: Path
) -> None:
    from xpu_release.evidence.cosign import att_tag

    w = released
    private, public = pem_pair(tmp_path, "release")
    _, other = pem_pair(tmp_path, "other")
    set_support(w, "2027-06-30")

    code, out, err = cli(w, "publish", REF, "--json", "--signing-key", str(private))
    digest = json.loads(out)["digest"]
    ours = cli(w, "verify", REF, "--key", str(public))
    theirs = cli(w, "verify", REF, "--key", str(other))
    status = json.loads(cli(w, "status", REF, "--json")[1])

    assert code == 0, err
    assert ours[0] == 0, ours[2]
    assert theirs[0] == 7
    assert "lifecycle" in theirs[2]
    assert [r["documents"]["lifecycle"] for r in status["endpoints"] if r["tag"] == "2.13.0"] == ["ok"] * 3
    ep = load_registries(w.root, str(w.override)).publish_endpoints()[0]
    client = RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)
    att = client.get_manifest(ep.repository("pytorch-cpu-sdk"), att_tag(digest))
    assert att is not None
    assert len(att.blobs()) == 2  # its config and the provenance's envelope: cosign's layouts are not for it
