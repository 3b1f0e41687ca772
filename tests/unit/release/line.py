"""A release line at fake registries, without Docker: an image family ``demo`` with a manifest per
version (floating tag ``latest``) in a copy of the repository, and a channel (a registries file)
whose public endpoint and two VPC regions are in-process fake registries, each serving every
version as publish leaves it: the image by digest, an SBOM and a provenance attached,
the version tag, and ``latest`` on the newest. Several channels stand in for staging and production."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import attach
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.channel import VERIFYING, RetryPolicy
from xpu_release.oci.credentials import Credentials, CredentialStore
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, RegistryClient, sha256_digest
from xpu_release.release.model import line as line_rule
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.model.record import EndpointRecord, ReleaseRecord, default_path, write

from ..fake_registry import Faults, State, fake_registry
from ..helpers import MINIMAL, write_manifest
from ..oci.test_registry_client import FAST

IMAGE = "demo"
LOGIN = ("--username", "u", "--password-stdin")
PASSWORD = "the-password\n"


def manifests(root: Path, versions: list[str], extra: str = "") -> None:
    """A manifest for each version of ``demo``, carrying ``latest``."""
    for v in versions:
        text = MINIMAL.replace('version: "1.0"', f'version: "{v}"').replace("demo 1.0", f"demo {v}")
        write_manifest(root, IMAGE, v, text + "floating_tags: [latest]\n" + extra)


@dataclass
class Channel:
    """One set of endpoints: a registries file and the fakes behind it."""

    root: Path
    file: Path
    states: dict[str, State]  # endpoint name → its fake
    namespace: str
    image: str = IMAGE

    def endpoints(self) -> list[Endpoint]:
        return load_registries(self.root, str(self.file)).publish_endpoints()

    def client(self, ep: Endpoint) -> RegistryClient:
        return RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)

    def repo(self, ep: Endpoint) -> str:
        return ep.repository(self.image)

    def served(self, tag: str) -> dict[str, str | None]:
        """What each endpoint serves at ``tag``."""
        return {ep.name: self.client(ep).head_manifest(self.repo(ep), tag) for ep in self.endpoints()}


@contextmanager
def channel(
    root: Path, tmp_path: Path, name: str, namespace: str = "ns", image: str = IMAGE, file: Path | None = None
) -> Iterator[Channel]:
    """A registries file (``<name>.yaml``, or ``file``) whose public and VPC endpoints are fresh
    fakes, for ``image``."""
    with ExitStack() as stack:
        (a, sa), (b, sb), (c, sc) = (stack.enter_context(fake_registry()) for _ in range(3))
        file = file or tmp_path / f"{name}.yaml"
        file.write_text(
            "registries:\n"
            "  hub: {host: '127.0.0.1:1', insecure: true}\n"
            f"  public: {{host: '{a}', insecure: true, namespace: {namespace}}}\n"
            f"  vpc: {{hosts: {{cn-beijing: '{b}', cn-wulanchabu: '{c}'}}, insecure: true,\n"
            f"         namespace: {namespace}}}\n"
        )
        yield Channel(root=root, file=file, namespace=namespace, image=image,
                      states={"public": sa, "vpc/cn-beijing": sb, "vpc/cn-wulanchabu": sc})  # fmt: skip


def image_of(version: str) -> tuple[list[bytes], Manifest]:
    """The blobs of ``demo:version`` (a config and a layer of its own) and its image manifest."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "version": version}).encode()
    layer = f"the layer of {version} ".encode() * 100

    def descriptor(media_type: str, data: bytes) -> dict[str, object]:
        return {"mediaType": media_type, "digest": sha256_digest(data), "size": len(data)}

    body = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
    }).encode()  # fmt: skip
    return [config, layer], Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)


@dataclass
class Published:
    digests: dict[str, str] = field(default_factory=dict)  # version → image manifest digest
    sboms: dict[str, Attachment] = field(default_factory=dict)


# A publish's fixture work, once a worker: the first publish of a kind into fresh fakes goes over
# HTTP, the next ones (the same versions, image and namespace into fresh fakes) are given a copy
# of what it left there. Most tests on a line start with a publish (0.3 s of CPU each).
_FILLED = ("blobs", "manifests", "repo_blobs", "tokens", "token_scopes", "requests", "token_requests",
           "patches")  # fmt: skip
_PUBLISHED: dict[tuple[object, ...], dict[str, dict[str, object]]] = {}


def _fresh(state: State) -> bool:
    return not (state.blobs or state.manifests or state.uploads) and state.faults == Faults()


def held(ch: Channel) -> dict[str, dict[str, object]]:
    """A copy of what each fake of ``ch`` holds (blobs, manifests, what it was asked)."""
    return {name: {f: copy.deepcopy(getattr(st, f)) for f in _FILLED} for name, st in ch.states.items()}


def hold(ch: Channel, contents: dict[str, dict[str, object]]) -> None:
    """Each fake of ``ch`` holds a copy of ``contents`` (from ``held``), as if it had been pushed."""
    for name, st in ch.states.items():
        for f, value in contents[name].items():
            setattr(st, f, copy.deepcopy(value))


def publish(ch: Channel, versions: list[str], spool: Path, *, latest: bool = True) -> Published:
    """Each version at every endpoint of ``ch`` as publish leaves it: blobs, the manifest by
    digest, an SBOM and a provenance attached, the version tag; then ``latest`` on the last one.
    Into fresh fakes, what the first such publish of this worker left there (``_PUBLISHED``)."""
    out = Published()
    spool.mkdir(parents=True, exist_ok=True)
    for version in versions:
        out.digests[version] = image_of(version)[1].digest
        out.sboms[version] = _sbom(version)
    fakes = tuple((name, st.auth, st.referrers_api, st.per_repository) for name, st in ch.states.items())
    kind = (ch.namespace, ch.image, tuple(versions), latest, fakes)
    fresh = all(_fresh(st) for st in ch.states.values())
    if fresh and kind in _PUBLISHED:
        hold(ch, _PUBLISHED[kind])
        return out
    for version in versions:
        blobs, image = image_of(version)
        provenance = Attachment(
            kind="provenance", payload=json.dumps({"_type": "statement", "of": version}).encode()
        )
        for ep in ch.endpoints():
            client, repo = ch.client(ep), ch.repo(ep)
            for data in blobs:
                path = spool / sha256_digest(data).replace(":", "-")
                path.write_bytes(data)
                client.upload_blob(repo, sha256_digest(data), path)
            client.put_manifest(repo, image.digest, image)
            attach(client, repo, image, [out.sboms[version], provenance], created="2026-01-01T00:00:00Z",
                   spool=spool)  # fmt: skip
            client.put_manifest(repo, version, image)
    if latest:
        _, newest = image_of(versions[-1])
        for ep in ch.endpoints():
            ch.client(ep).put_manifest(ch.repo(ep), "latest", newest)
    if fresh:
        _PUBLISHED[kind] = held(ch)
    return out


def _sbom(version: str) -> Attachment:
    return Attachment(kind="sbom", payload=json.dumps({"bomFormat": "CycloneDX", "of": version}).encode())


def recorded(ch: Channel, version: str, digest: str, scan: dict[str, object] | None = None) -> Path:
    """The release record of ``demo:version`` as a complete publish to ``ch`` writes it."""
    eps = tuple(
        EndpointRecord(endpoint=ep.name, host=ep.host, version_ref=ep.ref(IMAGE, version), floating_refs=(),
                       status="verified", digest=digest)
        for ep in ch.endpoints()
    )  # fmt: skip
    path = default_path(ch.root, IMAGE, version)
    write(ReleaseRecord(
        ref=f"{IMAGE}:{version}", manifest=f"manifests/{IMAGE}/{version}.yaml", manifest_sha256="",
        inputs_sha256="", tested_image_id="sha256:" + "1" * 64, digest=digest, published_at="2026-12-01",
        complete=True, floating_moved=(), endpoints=eps, scan=scan,
    ), path)  # fmt: skip
    return path


def pool_of(ch: Channel, version: str, policy: RetryPolicy = VERIFYING) -> EndpointPool:
    """The endpoint pool of ``demo:version`` at ``ch``'s endpoints, logged in."""
    registries = load_registries(ch.root, str(ch.file))
    hosts = frozenset(ep.host for ep in registries.publish_endpoints())
    creds = CredentialStore(explicit=Credentials(username="u", password="the-password"), release_hosts=hosts)
    return EndpointPool(Repo(ch.root).load(IMAGE, version), registries, creds, policy)


def moves(ch: Channel, version: str) -> tuple[str, ...]:
    """What the line rule gives ``demo:version`` at ``ch``'s endpoints now."""
    return line_rule.Line(Repo(ch.root)).moves(pool_of(ch, version))
