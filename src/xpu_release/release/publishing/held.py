"""What an endpoint already holds of an image, found before anything is compressed or sent: the
layers of the image's earlier releases (the version it extends, its floating tags), reused by
digest, and the layers of the release it builds on (the SDK under the CPU image), mounted from
that release's own repository."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import WireError
from ...labels import BASE_DIGEST_LABEL
from ...manifest import ImageSpec
from ...manifest.platforms import Platform
from ...oci.endpoint import Endpoint
from ...oci.members import Blob
from ...oci.model import parse_config
from ...oci.registry import Manifest, RegistryClient
from .manifests import DOCKER_MANIFEST_TYPE, MANIFEST_TYPE

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def published_layers(
    client: RegistryClient, repo: str, tags: Iterable[str], platform: Platform | None = None
) -> dict[str, Blob]:
    """diff_id → blob, for the images the endpoint serves at ``tags`` (earlier releases); of an
    index, its ``platform`` image's."""
    out: dict[str, Blob] = {}
    for tag in tags:
        try:
            manifest = client.get_manifest(repo, tag)
            if manifest is not None and manifest.is_index:
                entry = platform.entry(manifest.manifests) if platform else None
                manifest = client.get_manifest(repo, entry.digest) if entry is not None else None
        except WireError:
            continue
        for diff_id, blob in layers_of(client, repo, manifest).items():
            out.setdefault(diff_id, blob)
    return out


def layers_of(client: RegistryClient, repo: str, manifest: Manifest | None) -> dict[str, Blob]:
    """diff_id → blob of one image manifest, by its config ({} for anything else)."""
    if manifest is None or manifest.media_type not in (MANIFEST_TYPE, DOCKER_MANIFEST_TYPE):
        return {}
    what = f"{client.endpoint.name}: the config of {repo}@{manifest.digest}"
    try:
        config = parse_config(client.blob_bytes(repo, manifest.config_digest), what=what, error=WireError)
    except WireError:
        return {}
    layers = manifest.layers
    if len(config.diff_ids) != len(layers):
        return {}
    return {
        diff_id: Blob(
            digest=layer.digest,
            size=layer.size,
            media_type=layer.media_type,
            annotations=tuple(sorted(layer.annotations.items())),
        )
        for diff_id, layer in zip(config.diff_ids, layers, strict=True)
    }


@dataclass(frozen=True)
class BaseLayers:
    """The layers of the release an image builds on, as an endpoint serves them in ``repo``."""

    repo: str
    blobs: Mapping[str, Blob]  # diff_id → blob

    @classmethod
    def at(cls, client: RegistryClient, repo: str, digest: str) -> BaseLayers:
        """The layers of the manifest ``repo`` serves by ``digest`` (none if it serves nothing
        there). The digest is the one the image was built on, which the engine checked layer by
        layer when it pulled it: its config's diff_ids name its layers' blobs truly."""
        try:
            manifest = client.get_manifest(repo, digest)
        except WireError:
            manifest = None
        if manifest is None or manifest.digest != digest:
            return cls(repo=repo, blobs={})
        return cls(repo=repo, blobs=layers_of(client, repo, manifest))

    @property
    def digests(self) -> frozenset[str]:
        return frozenset(b.digest for b in self.blobs.values())


def mounted(client: RegistryClient, repo: str, digest: str, base: BaseLayers | None) -> bool:
    """``repo`` holds ``digest``, already or by a mount from the base's repository. A registry
    that will not mount leaves it to an upload."""
    if base is None or digest not in base.digests:
        return False
    return client.blob_exists(repo, digest) or client.mount_blob(repo, digest, base.repo)


def base_repository(spec: ImageSpec, ep: Endpoint) -> str | None:
    """Where ``ep`` serves the release ``spec`` builds on (in the same namespace), if it builds
    on one of ours."""
    return ep.repository(spec.base.image) if spec.base.image else None


def mount_source(
    spec: ImageSpec, ep: Endpoint, first: Endpoint, first_repo: str, base_digests: frozenset[str]
) -> Callable[[str], str | None]:
    """Where ``ep`` may mount a blob of the release from: on the first endpoint's registry, the
    first endpoint's repository (it holds every blob); elsewhere, the base release's repository
    for the base's layers (``base_digests``); else nowhere (the blob is uploaded)."""
    if ep.host == first.host:
        return lambda _digest: first_repo
    base_repo = base_repository(spec, ep)
    return lambda digest: base_repo if digest in base_digests else None


def base_layers(
    spec: ImageSpec, ep: Endpoint, client: RegistryClient, image: Mapping[str, Any]
) -> BaseLayers | None:
    """The layers of the base release as ``ep`` serves the digest the image (its engine
    inspection, ``image``) was built on: none when it builds on no release of ours."""
    repo = base_repository(spec, ep)
    digest = str(((image.get("Config") or {}).get("Labels") or {}).get(BASE_DIGEST_LABEL) or "")
    if repo is None or not _DIGEST.fullmatch(digest):  # a label is the image's word: checked
        return None
    return BaseLayers.at(client, repo, digest)
