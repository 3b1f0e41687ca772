"""A platformed release without Docker (issue 43): ``kit:25.03`` declares linux/amd64 and
linux/arm64, is rendered and locked (a section per platform, the base pinned by its index and by
each platform's image), and a fake engine holds each platform's built, smoke-tested image (its
layer compressed into the publish spool, as our build leaves it; its config saying its platform).
Three in-process fake registries (public and two VPC regions) stand behind a registries override."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpu_release.errors import NotFoundError, StackError
from xpu_release.evidence.attest import Documents
from xpu_release.image.engine import ImageInfo
from xpu_release.image.inputs import BuildInputs
from xpu_release.image.lock import load_lock
from xpu_release.image.smoke import _mark_tested, tests_sha256
from xpu_release.labels import BASE_DIGEST_LABEL, INPUTS_LABEL
from xpu_release.manifest import ImageSpec, Repo
from xpu_release.manifest.platforms import AMD64, ARM64, Platform
from xpu_release.manifest.registries import Registries, load_registries
from xpu_release.oci.codec import DEFAULT
from xpu_release.oci.credentials import Credentials, CredentialStore
from xpu_release.oci.members import Blob, CompressedMap, blob_file, spool_dir
from xpu_release.oci.registry import RegistryClient
from xpu_release.oci.store import remember_config
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import PlatformBuild, publish_index
from xpu_release.release.publishing.publish import Options
from xpu_release.settings import Settings, current, use

from ..fake_registry import State
from ..image.kit import REF, locked_kit
from ..oci.test_registry_client import FAST
from .fake_release import three_registries
from .published_kit import sbom

PLATFORMS = (AMD64, ARM64)


def _layer(platform: Platform) -> tuple[str, bytes]:
    """The platform's one layer: its diff_id and a gzip blob of it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = f"hello from {platform.machine}\n".encode()
        info = tarfile.TarInfo("opt/hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return "sha256:" + hashlib.sha256(tar_bytes).hexdigest(), gzip.compress(tar_bytes, mtime=0)


@dataclass
class PlatformEngine:
    """The engine after ``build`` and ``test`` of every platform: an image per platform, by its
    local tag (``kit:25.03``, ``kit:25.03-arm64``) and by id. ``lost``: ids it fails to inspect."""

    images: dict[str, dict[str, Any]]  # id → its inspection
    tags: dict[str, str]  # local ref → id
    lost: set[str] = field(default_factory=set)
    dpkg: dict[str, str] = field(default_factory=dict)  # id → more of dpkg's lines than bash's
    calls: Counter[str] = field(default_factory=Counter)

    def _find(self, ref: str) -> dict[str, Any] | None:
        return self.images.get(self.tags.get(ref, ref))

    def image(self, ref: str) -> ImageInfo | None:
        found = self._find(ref)
        return ImageInfo.from_attrs(found) if found is not None else None

    def require_image(self, ref: str) -> ImageInfo:
        found = self._find(ref)
        if found is None:  # as the engine says it
            msg = f"no image {ref} in the engine; run `xpu-release build {ref}` first"
            raise NotFoundError(msg)
        return ImageInfo.from_attrs(found)

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        self.calls["inspect"] += 1
        found = self._find(ref)
        if found is None or found["Id"] in self.lost:
            msg = f"the engine has no image {ref}"
            raise StackError(msg)
        return found

    def output(self, image: str, argv: list[str], *, purpose: str) -> str:
        """A throwaway container: only the SBOM's dpkg query is expected here."""
        self.calls[f"container:{purpose}:{image}"] += 1
        assert purpose == "sbom", purpose
        if image in self.lost:
            msg = f"the container of {image} exited with 139"
            raise StackError(msg)
        return "os=debian-12\nbash\t5.2.15-2+b2\tamd64\tbash\t5.2.15-2\n" + self.dpkg.get(image, "")


@dataclass
class World:
    root: Path
    engine: PlatformEngine
    registries: dict[str, State]  # endpoint name → the fake behind it
    override: Path

    @property
    def spec(self) -> ImageSpec:
        return Repo(self.root).load_ref(REF)

    def loaded(self) -> Registries:
        return load_registries(self.root, str(self.override))

    def pool(self) -> EndpointPool:
        registries = self.loaded()
        return EndpointPool(self.spec, registries, logged_in(registries), retry=FAST)

    def client(self, name: str) -> tuple[RegistryClient, str]:
        """The named endpoint's client and the repository of kit there."""
        ep = next(e for e in self.loaded().publish_endpoints() if e.name == name)
        client = RegistryClient(ep, Credentials(username="u", password="the-password"), FAST)
        return client, ep.repository("kit")

    def image_id(self, platform: Platform) -> str:
        return self.engine.tags[platform.local_ref(REF)]

    def builds(self, *platforms: Platform) -> list[PlatformBuild]:
        """What publish is handed: each platform's tested image and its documents."""
        spec, repo = self.spec, Repo(self.root)
        out = []
        for p in platforms or PLATFORMS:
            image_id = self.image_id(p)
            lock = load_lock(self.root, spec, platform=p)
            made = sbom(("torch", "2.13.0+cpu" if p == AMD64 else "2.13.0"))
            docs = Documents(repo=repo, spec=spec, lock=lock, image_id=image_id, sbom=made, builder="test")
            inputs = self.engine.images[image_id]["Config"]["Labels"][INPUTS_LABEL]
            out.append(PlatformBuild(platform=p, documents=docs, inputs=inputs))
        return out

    def published(self) -> ReleaseRecord:
        """kit:25.03 published at every endpoint (``publish_index``, default options), its record."""
        record = publish_index(self.pool(), self.engine, self.builds(), Options(), lambda _: None, "test")  # type: ignore[arg-type]
        assert record.complete, record.endpoints
        return record


def logged_in(registries: Registries) -> CredentialStore:
    """The fake registries' login, for the hosts of ``registries``, as --password-stdin gives it."""
    hosts = frozenset(e.host for e in registries.publish_endpoints())
    return CredentialStore(explicit=Credentials(username="u", password="the-password"), release_hosts=hosts)


def _built(root: Path, spec: ImageSpec) -> PlatformEngine:
    """Each platform's image as our build and smoke test leave it."""
    images, tags = {}, {}
    for inputs in BuildInputs.each(root, spec, load_registries(root)):
        p = inputs.platform
        diff_id, blob = _layer(p)
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        blob_file(spool_dir(), digest).write_bytes(blob)
        CompressedMap(DEFAULT).put(
            diff_id, Blob(digest=digest, size=len(blob), media_type=DEFAULT.media_type)
        )
        labels = {INPUTS_LABEL: inputs.digest, BASE_DIGEST_LABEL: inputs.lock.base_digest}
        config: dict[str, Any] = {"architecture": p.architecture, "os": p.os, "config": {"Labels": labels},
                                  "rootfs": {"type": "layers", "diff_ids": [diff_id]}}  # fmt: skip
        if p.variant:
            config["variant"] = p.variant
        image_id = remember_config(json.dumps(config, sort_keys=True).encode())
        _mark_tested(spec, image_id, tests_sha256(root, spec), 1)
        images[image_id] = {"Id": image_id, "RepoTags": [p.local_ref(REF)], "Config": {"Labels": labels},
                            "Size": len(blob), "RootFS": {"Type": "layers", "Layers": [diff_id]}}  # fmt: skip
        tags[p.local_ref(REF)] = image_id
    return PlatformEngine(images=images, tags=tags)


@contextmanager
def world(tmp_path: Path) -> Iterator[World]:
    """kit:25.03 rendered, locked for both platforms, built and tested, and three empty fake
    registries mapped by a registries override; a cache of its own."""
    root = tmp_path / "repo"
    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        locked_kit(root)
        spec = Repo(root).load_ref(REF)
        engine = _built(root, spec)
        with three_registries(tmp_path / "local.yaml") as (override, registries):
            yield World(root=root, engine=engine, override=override, registries=registries)
    finally:
        use(before)
