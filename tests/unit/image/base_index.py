"""A base image served by an in-process registry, as a lock finds it: an OCI image index of an
image per platform (the local stack's base since platforms exist), or one image; and an engine
that answers, for each platform's image, which Python distributions it provides."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from xpu_release.manifest.platforms import Platform
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci.model import OCI_INDEX, OCI_MANIFEST
from xpu_release.oci.registry import Manifest, RegistryClient, RetryPolicy, sha256_digest

BASE_REPO = "debian/bookworm-python"
FAST = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, timeout=10.0)


@dataclass
class BaseEngine:
    """Pulls anything; each image provides what ``provides`` says of its digest."""

    provides: dict[str, list[tuple[str, str]]]  # image digest → (name, version)
    asked: list[str] = field(default_factory=list)  # the refs asked what they provide
    pulled: list[str] = field(default_factory=list)

    def image(self, ref: str) -> Any:
        return None

    def pull(self, ref: str, auth: Any = None) -> None:
        self.pulled.append(ref)

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        return {"RootFS": {"Layers": ["sha256:" + "0" * 64]}}

    def output(self, ref: str, argv: list[str], *, purpose: str) -> str:
        self.asked.append(ref)
        return json.dumps(self.provides[ref.rpartition("@")[2]]) + "\n"


@dataclass
class FakeBase:
    host: str
    index: str  # the tag's digest: the index (or the one image)
    images: dict[Platform, str]  # each platform's image in it
    engine: BaseEngine


def _client(host: str) -> RegistryClient:
    ep = Endpoint(registry="hub", role="base", region=None, host=host, namespace="base", insecure=True)
    return RegistryClient(ep, None, FAST)


def _image(client: RegistryClient, salt: str) -> Manifest:
    config = json.dumps({"salt": salt}).encode()
    body = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256_digest(config),
                   "size": len(config)},
        "layers": [],
    }).encode()  # fmt: skip
    manifest = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    client.put_manifest(f"base/{BASE_REPO}", manifest.digest, manifest)
    return manifest


def serve_index(host: str, platforms: dict[Platform, list[tuple[str, str]]], tag: str = "12") -> FakeBase:
    """``base/debian/bookworm-python:<tag>`` as an index of an image per platform, each providing
    the distributions given."""
    client = _client(host)
    images = {p: _image(client, p.name) for p in platforms}
    body = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": m.digest, "size": len(m.body),
                       "platform": p.oci()} for p, m in images.items()],
    }).encode()  # fmt: skip
    index = Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body)
    client.put_manifest(f"base/{BASE_REPO}", tag, index)
    engine = BaseEngine(provides={m.digest: platforms[p] for p, m in images.items()})
    return FakeBase(
        host=host, index=index.digest, images={p: m.digest for p, m in images.items()}, engine=engine
    )


def serve_one(host: str, tag: str = "12") -> FakeBase:
    """``base/debian/bookworm-python:<tag>`` as one image (no index)."""
    client = _client(host)
    image = _image(client, "one")
    client.put_manifest(f"base/{BASE_REPO}", tag, image)
    return FakeBase(host=host, index=image.digest, images={}, engine=BaseEngine(provides={image.digest: []}))
