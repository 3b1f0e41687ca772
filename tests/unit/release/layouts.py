"""Releases made for mirror tests without a registry: an OCI layout holding an image (a config
and layers of any size, streamed, never whole in memory) with referrers and the version tag."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from xpu_release.oci.layout import Layout
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest

EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
BLOCK = 1 << 20


def layer_blocks(seed: str, size: int) -> Iterator[bytes]:
    """``size`` bytes that depend on ``seed`` only, a block at a time."""
    base = hashlib.sha256(seed.encode()).digest() * (BLOCK // 32)
    for i, start in enumerate(range(0, size, BLOCK)):
        yield (i.to_bytes(8, "big") + base)[: min(BLOCK, size - start)]


def layer_digest(seed: str, size: int) -> str:
    h = hashlib.sha256()
    for block in layer_blocks(seed, size):
        h.update(block)
    return "sha256:" + h.hexdigest()


def _manifest(data: dict[str, object]) -> Manifest:
    body = json.dumps(data, sort_keys=True).encode()
    return Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)


def descriptor(media_type: str, digest: str, size: int) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest, "size": size}


def release_layout(
    root: Path, tag: str, *, seed: str = "a", layers: tuple[int, ...] = (3000, 9000), referrers: int = 1
) -> tuple[Manifest, list[Manifest]]:
    """A layout at ``root`` with an image of ``layers`` (their sizes) at ``tag`` and ``referrers``
    documents referring to it; returns the image and the referrers."""
    layout = Layout(root)
    layout.create()
    config = json.dumps({"architecture": "amd64", "os": "linux", "seed": seed}).encode()
    layout.put_bytes(config)
    described = []
    for i, size in enumerate(layers):
        digest = layer_digest(f"{seed}-{i}", size)
        layout.write_blob(digest, size, layer_blocks(f"{seed}-{i}", size))
        described.append(descriptor(LAYER_TYPE, digest, size))
    image = _manifest({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": descriptor("application/vnd.oci.image.config.v1+json",
                                            sha256_digest(config), len(config)),
                       "layers": described})  # fmt: skip
    layout.put_bytes(b"{}")
    docs = []
    for i in range(referrers):
        payload = f'{{"document": {i}, "of": "{seed}"}}'.encode()
        layout.put_bytes(payload)
        docs.append(_manifest({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example+json",
            "config": descriptor(EMPTY_TYPE, sha256_digest(b"{}"), 2),
            "layers": [descriptor("application/vnd.example+json", sha256_digest(payload), len(payload))],
            "subject": descriptor(OCI_MANIFEST, image.digest, len(image.body)),
        }))  # fmt: skip
    layout.put_manifests([(image, None), *((d, None) for d in docs), (image, tag)], version_tag=tag)
    return image, docs


def blobs_of(manifests: list[Manifest]) -> dict[str, int]:
    """Every blob the manifests list, and the manifests themselves: digest → size."""
    out = {}
    for m in manifests:
        out[m.digest] = len(m.body)
        out.update({d: size for d, size in m.blobs()})
    return out


def damaged_blobs(root: Path, blobs: dict[str, int]) -> list[str]:
    """The blobs of ``blobs`` that ``root`` does not hold as the bytes that hash to them."""
    bad = []
    for digest, size in blobs.items():
        path = root / "blobs" / "sha256" / digest[7:]
        h = hashlib.sha256()
        try:
            with path.open("rb") as f:
                for block in iter(lambda: f.read(BLOCK), b""):
                    h.update(block)
        except OSError:
            bad.append(digest)
            continue
        if "sha256:" + h.hexdigest() != digest or path.stat().st_size != size:
            bad.append(digest)
    return bad


def into_registry(root: Path, state: object, repo: str, tag: str) -> None:
    """Everything in the layout at ``root`` served by a fake registry's ``state`` at ``repo``,
    the manifest its ``tag`` names at ``tag`` too (set straight in its state, no upload)."""
    layout = Layout(root)
    for path in (root / "blobs" / "sha256").iterdir():
        state.blobs["sha256:" + path.name] = path.read_bytes()  # type: ignore[attr-defined]
    for entry in layout.entries():
        digest = str(entry["digest"])
        body = state.blobs[digest]  # type: ignore[attr-defined]
        state.manifests[(repo, digest)] = (entry["mediaType"], body)  # type: ignore[attr-defined]
        if (entry.get("annotations") or {}).get("org.opencontainers.image.ref.name") == tag:
            state.manifests[(repo, tag)] = (entry["mediaType"], body)  # type: ignore[attr-defined]
